"""The operator's reconcilers running in the test process, restartable (shared by test modules)."""

from __future__ import annotations

import asyncio

from kubernetes_asyncio import client as k8s
from prometheus_client import CollectorRegistry

import controllers
from valkey_operator.core.manager import Manager


class Operator:
    """A Manager with every reconciler, as `python -m valkey_operator` wires them, minus HTTP endpoints."""

    def __init__(self, api: k8s.ApiClient, namespace: str | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.task: asyncio.Task[None] | None = None
        self.manager: Manager | None = None
        self.registry = CollectorRegistry()

    async def start(self) -> None:
        self.manager = Manager(
            self.api,
            field_manager="valkey-operator",
            namespace=self.namespace,
            metrics_bind_address="0",
            health_probe_bind_address="0",
            registry=self.registry,
        )
        controllers.setup_all(self.manager, {})
        self.task = asyncio.create_task(self.manager.run())
        async with asyncio.timeout(30):
            while not self.manager.ready():
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self.manager is not None and self.task is not None:
            self.manager.stop()
            await asyncio.wait_for(self.task, 60)
            self.manager = self.task = None
