"""Suite-wide fixtures on top of the test-bed plugin (valkey_testbed.plugin)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import own_bed
import pytest
import pytest_asyncio
from kubernetes_asyncio import client as k8s

from valkey_operator.core.client import Client
from valkey_operator.core.rest import RestClient
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.crds import install_crds


@pytest_asyncio.fixture
async def kube(kube_api: k8s.ApiClient) -> AsyncIterator[Client]:
    """Our JSON client as cluster admin, for arranging and inspecting objects in tests."""
    yield Client(RestClient(kube_api), field_manager="tests")


@pytest_asyncio.fixture
async def valkey_crds(kube: Client) -> AsyncIterator[None]:
    """The product's CRDs (crds/*.yaml) installed and Established (idempotent, cheap when current)."""
    await install_crds(kube)
    yield


@pytest.fixture(scope="module")
def lone_plane() -> Iterator[ControlPlane]:
    """A control plane of the module's own (etcd and an API server, no nodes; about 3 s): for tests
    that own cluster-scoped state (write status by hand, stop an operator mid-way) and would
    otherwise have to stop every other module on the shared plane. A module points the test bed's
    fixtures at it by overriding `kubeconfig_path` (own_bed.py gives one with nodes)."""
    with own_bed.bed(0) as plane:
        yield plane
