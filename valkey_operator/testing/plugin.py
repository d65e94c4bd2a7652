"""pytest plugin: one real control plane per test session, a fresh namespace per test.

Registered as the `valkey_operator_testbed` pytest11 entry point, so any
project that installs this package (with the `testing` extra) gets these
fixtures. Nothing starts until a test asks for one of them.

- `kube_control_plane` (session): the running ControlPlane, with the process
  kubelet's three zoned nodes (pods really run; see docs/testing.md).
- `kubelet` (session): a KubeletControl for that kubelet: node failure and
  recovery, pod pids and log paths, exec in a container.
- `kubeconfig_path` (session): path of its admin kubeconfig.
- `kube_api`: a kubernetes-asyncio ApiClient, connected as cluster admin.
- `namespace`: a namespace created for this test, deleted after it.

`--testbed-state-dir DIR` keeps the control plane in DIR and leaves it running
after the session, so the next session starts in a second instead of ~15 s.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from kubernetes_asyncio import client, config

from valkey_operator.testing.build import build
from valkey_operator.testing.controlplane import ControlPlane
from valkey_operator.testing.kubelet import KubeletControl

# The session kubelet: three zoned nodes, and timings shortened for tests.
NODES = 3
SYNC_DELAY = 2.0
BACKOFF_BASE = 1.0
BACKOFF_MAX = 10.0
KUBELET_ARGS = (
    f"--sync-delay={SYNC_DELAY}",
    f"--backoff-base={BACKOFF_BASE}",
    f"--backoff-max={BACKOFF_MAX}",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("valkey-operator test bed")
    group.addoption(
        "--testbed-state-dir",
        default=None,
        help="keep the test bed's control plane in this directory and leave it running afterwards",
    )


@pytest.fixture(scope="session")
def kube_control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """Build (if needed) and start the control plane once for the whole session."""
    kept = request.config.getoption("--testbed-state-dir")
    state_dir = Path(kept) if kept else Path(tempfile.mkdtemp(prefix="valkey-operator-testbed-"))
    build(progress=lambda _line: None)
    plane = ControlPlane(state_dir.resolve(), nodes=NODES, kubelet_args=KUBELET_ARGS)
    plane.up()
    try:
        yield plane
    finally:
        if not kept:
            plane.down()
            shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def kubelet(kube_control_plane: ControlPlane) -> KubeletControl:
    """The session kubelet's control channel (fail_node, recover_node, pod, exec)."""
    return KubeletControl(kube_control_plane.state_dir)


@pytest.fixture(scope="session")
def kubeconfig_path(kube_control_plane: ControlPlane) -> Path:
    return kube_control_plane.kubeconfig


@pytest_asyncio.fixture
async def kube_api(kubeconfig_path: Path) -> AsyncIterator[client.ApiClient]:
    """An admin ApiClient bound to the running test's event loop."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield api


def _namespace_name(test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].rstrip("-")
    return f"{stem}-{uuid.uuid4().hex[:6]}"


@pytest_asyncio.fixture
async def namespace(kube_api: client.ApiClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace named after the test; deleted (not awaited) afterwards."""
    name = _namespace_name(request.node.name)
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        await core.delete_namespace(name)
