"""Fixtures of the end-to-end tests: the in-process operator, real operator processes, a per-test catalog."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from chart_support import RELEASE, helm
from cluster_support import Catalog
from inprocess_operator import Operator
from kubernetes_asyncio import client as k8s
from operator_process import OperatorProcesses

from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES
from valkey_operator.testing import operatorimage


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


@pytest_asyncio.fixture
async def workloads(kube: Client, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A second namespace: where ValkeyClusters live, apart from the chart's release namespace."""
    name = f"{request.module.__name__.rsplit('_', 1)[-1]}-workloads-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        await kube.delete(NAMESPACES, name)


@pytest.fixture
def release(kubeconfig_path: Path, namespace: str) -> Iterator[str]:
    """The chart release a test installs in its namespace, uninstalled afterwards if still there (its
    cluster-scoped RBAC outlives the namespace otherwise)."""
    yield RELEASE
    helm(kubeconfig_path, "uninstall", RELEASE, "-n", namespace, "--wait", "--ignore-not-found")


@pytest.fixture(scope="module")
def operator_image() -> operatorimage.BuiltImage:
    """The operator image of this checkout, as `python -m valkey_operator.testing build` built and
    loaded it (cached: rebuilt only when the source changed). Its tag is the chart's default and is
    shared by every checkout on the machine, so tests that must run this checkout's code pin its
    digest (`image.digest`)."""
    return operatorimage.build_and_load(lambda _: None)
