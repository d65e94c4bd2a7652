"""An example operator's controller running in the test for its length, on the real API server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from kubernetes_asyncio import client as k8s
from prometheus_client import CollectorRegistry

from valkey_operator.core import LeaderElectionConfig, Manager


@contextlib.asynccontextmanager
async def running_example(
    kube_api: k8s.ApiClient,
    namespace: str,
    field_manager: str,
    setup: Callable[[Manager], None],
    leader_election: LeaderElectionConfig | None = None,
) -> AsyncIterator[Manager]:
    """setup's controller on a manager scoped to namespace (loopback ephemeral listeners, its own
    registry), stopped gracefully on exit (releasing its Lease, if it leads)."""
    manager = Manager(
        kube_api,
        field_manager=field_manager,
        namespace=namespace,
        metrics_bind_address="127.0.0.1:0",
        health_probe_bind_address="127.0.0.1:0",
        registry=CollectorRegistry(),
        leader_election=leader_election,
    )
    setup(manager)
    running = asyncio.create_task(manager.run())
    try:
        yield manager
    finally:
        manager.stop()
        await asyncio.wait_for(running, 30)
