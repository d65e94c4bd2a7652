"""Fixtures of the end-to-end tests: the in-process operator, real operator processes, a per-test catalog."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from cluster_support import Catalog
from inprocess_operator import Operator
from kubernetes_asyncio import client as k8s
from operator_process import OperatorProcesses

from valkey_operator.core.client import Client


@pytest_asyncio.fixture
async def operator(kube_api: k8s.ApiClient, namespace: str) -> AsyncIterator[Operator]:
    running = Operator(kube_api, namespace)
    await running.start()
    yield running
    await running.stop()


@pytest_asyncio.fixture
async def catalog(kube: Client, namespace: str) -> AsyncIterator[Catalog]:
    created = Catalog(kube, namespace[-6:])
    yield created
    await created.cleanup()


@pytest.fixture
def operators(kubeconfig_path: Path, namespace: str, tmp_path: Path) -> Iterator[OperatorProcesses]:
    """Real operator processes (python -m valkey_operator) for this test, killed afterwards."""
    started = OperatorProcesses(kubeconfig_path, namespace, tmp_path)
    try:
        yield started
    finally:
        started.kill_all()
