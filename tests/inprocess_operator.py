"""The operator's reconcilers running in the test process, restartable (shared by test modules)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from kubernetes_asyncio import client as k8s
from prometheus_client import CollectorRegistry

import controllers
from controllers.options import ControllerOptions
from valkey_operator.core.manager import Manager
from valkey_operator.core.metrics import RESULTS
from valkey_testbed.images import OPERATOR_IMAGE
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS, TEST_BED_ENDPOINTS
from valkey_testbed.wait import eventually


class Operator:
    """A Manager with every reconciler, as `python -m valkey_operator` wires them, minus HTTP endpoints.

    It dials 127.0.0.0/8 only (the test bed's rule), and allows a backup endpoint there (the test bed's
    object store), unless options say otherwise. It watches one
    namespace, never all: tests share the control plane, and a cluster-wide operator would reconcile
    the clusters of tests running beside it, next to their own operators.
    """

    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        options: ControllerOptions | None = None,
        workers: Mapping[str, int] | None = None,
    ) -> None:
        """workers: per controller ("image", "config", "role", "cluster"), as the operator's flags."""
        self.api = api
        self.namespace = namespace
        self.workers = dict(workers or {})
        self.options = options or ControllerOptions(
            node_networks=LOOPBACK_NETWORKS,
            operator_image=OPERATOR_IMAGE,
            backup_endpoints=TEST_BED_ENDPOINTS,
        )
        self.task: asyncio.Task[None] | None = None
        self.manager: Manager | None = None
        self.registry = CollectorRegistry()

    async def start(self) -> None:
        self.manager = Manager(
            self.api,
            field_manager="valkey-operator",
            label_selectors=controllers.CACHE_LABEL_SELECTORS,
            metadata_transforms=controllers.CACHE_METADATA_TRANSFORMS,
            namespace=self.namespace,
            metrics_bind_address="0",
            health_probe_bind_address="0",
            registry=self.registry,
        )
        controllers.setup_all(self.manager, self.workers, self.options)
        self.task = asyncio.create_task(self.manager.run())
        await eventually(self.manager.ready, "the in-process operator ready", 30, interval=0.05)

    async def reconciles(self, controller: str) -> int:
        """Passes the named controller (valkeycluster, valkeyimage, ...) finished, whatever their result."""
        return int(
            sum(
                self.registry.get_sample_value(
                    "controller_runtime_reconcile_total", {"controller": controller, "result": result}
                )
                or 0
                for result in RESULTS
            )
        )

    async def sample(self, name: str, labels: Mapping[str, str]) -> float | None:
        """One sample of the operator's registry (None: no sample with these labels)."""
        return self.registry.get_sample_value(name, dict(labels))

    async def stop(self) -> None:
        if self.manager is not None and self.task is not None:
            self.manager.stop()
            await asyncio.wait_for(self.task, 60)
            self.manager = self.task = None
