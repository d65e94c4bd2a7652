"""Fixtures of the test-bed tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from kubelet_support import Pods, alive, clear_namespace, describe, process

from valkey_operator.core.client import Client
from valkey_testbed.kubelet import KubeletControl


@pytest_asyncio.fixture
async def pods(kube: Client, kubelet: KubeletControl, namespace: str) -> AsyncIterator[Pods]:
    """Pods in this test's namespace; at teardown all are deleted and none of their processes is left."""
    helper = Pods(kube, kubelet, namespace)
    try:
        yield helper
    finally:
        for view in (await kubelet.status())["pods"]:
            if view["namespace"] == namespace:
                helper.pids.update(process(c["pid"]) for c in view["containers"] if c["pid"])
        await clear_namespace(kube, kubelet, namespace)
        left = sorted(proc_id for proc_id in helper.pids if alive(proc_id))
        assert not left, f"pod processes left behind: {[describe(pid) for pid, _ in left]}"
