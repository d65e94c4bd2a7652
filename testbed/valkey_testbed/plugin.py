"""pytest plugin: one real control plane per test session, a fresh namespace per test.

Registered as the `valkey_operator_testbed` pytest11 entry point of the test
bed's distribution (testbed/setup.cfg, not the operator's), so any project that
installs the test bed gets these fixtures, and this plugin loads in every pytest
run of that environment; a plain install of the operator registers none. It starts nothing (no build, no
process, no state dir) unless a test that runs uses `kube_control_plane` or a
fixture depending on it (`kubelet`, `kubeconfig_path`, `kube_api`,
`namespace`), or `object_store`/`object_store_tls`; then it starts what that
fixture needs, once per session, when the first such test sets up.

- `kube_control_plane` (session): the running ControlPlane, with the process
  kubelet's three zoned nodes (pods really run; see docs/testing.md) and the
  local-path-provisioner behind the default StorageClass `local-path`.
- `kubelet` (session): a KubeletControl for that kubelet: node failure and
  recovery, pod pids and log paths, exec in a container.
- `kubeconfig_path` (session): path of its admin kubeconfig.
- `kube_api`: a kubernetes-asyncio ApiClient, connected as cluster admin.
- `namespace`: a namespace created for this test, deleted after it.
- `object_store` (session): a real S3-compatible server (versitygw) on 127.0.0.1, plain HTTP: its
  endpoint, root access key and secret, `ca_pem` None, and `create_bucket()`; `object_store_tls`
  (session) the same over TLS, with the CA's PEM in `ca_pem`. Neither needs the control plane.

`--testbed-state-dir DIR` keeps the control plane in DIR and leaves it running
after the session, so the next session starts in a second instead of ~15 s; a
control plane already running there is used as it is (nothing is built), and
one with fewer nodes than `--testbed-nodes N` (default 3) is an error naming
the count found. The async fixtures need pytest-asyncio (the `testing` extra):
without it the plugin still loads, and asking for one fails saying so.

The Kubernetes release is versions.KUBERNETES unless VALKEY_OPERATOR_KUBERNETES names another
minor of versions.KUBERNETES_MINORS (kubeversion.py): the same tests then run against that API
server (`python -m valkey_testbed compat` does so). The session header says which.

With pytest-xdist (`-n 2`), the controller process does not collect, so it
starts nothing: it names a state dir (--testbed-state-dir, or a fresh one under
the temporary directory, not created) and passes it to the workers. The first
worker test that uses the control plane creates the dir and starts the plane
there (under a file lock, before the test's timeout starts); every other worker
attaches to it; the controller stops it at the end of the session if the dir
exists (unless kept). Namespaces keep their tests apart. A test
module that changes what all tests share (fails or taints a node, replaces a
CRD) is marked `testbed_exclusive`: while it runs no other module that uses
the control plane runs, and it waits for those running to finish (a
writer-preferring lock held per module, outside each test's timeout). Tests
marked `testbed_serial(group)` run one at a time within their group (Helm
releases, which take ownership of the CRDs and the chart's ClusterRoles) but
beside every ordinary module.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

try:
    import pytest_asyncio
except ModuleNotFoundError:  # installed without the `testing` extra: load, and say so when used
    pytest_asyncio = None  # type: ignore[assignment]

from valkey_testbed import kubeversion, objectstore
from valkey_testbed.build import build
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.sessionbed import KUBELET_ARGS, NODES

WORKER_STATE_DIR = "valkey_operator_testbed_state_dir"
"""The key of xdist's workerinput carrying the session's control-plane state dir."""
WORKER_SESSION = "valkey_operator_testbed_session"
"""The key of xdist's workerinput carrying the session's token (which worker starts the plane)."""
STATE_DIR_PREFIX = "valkey-operator-testbed-"
"""Name of a session's own state dir (under the temporary directory) without --testbed-state-dir."""
EXCLUSIVE = "testbed_exclusive"
SERIAL = "testbed_serial"
_SHARED_DIR = pytest.StashKey[tuple[Path, bool, str]]()
"""The xdist controller's (state dir, kept, session token); the dir exists once a worker needed it."""
_SHARED_START = pytest.StashKey[Exception | None]()
"""A worker's outcome of starting or attaching to the shared plane: None, or why it failed."""
_HELD = pytest.StashKey[tuple[tuple[str, ...], contextlib.ExitStack]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("valkey-operator test bed")
    group.addoption(
        "--testbed-state-dir",
        default=None,
        help="keep the test bed's control plane in this directory and leave it running afterwards",
    )
    group.addoption(
        "--testbed-nodes",
        type=int,
        default=NODES,
        help=f"nodes of the test bed's process kubelet (default {NODES}; 0: no kubelet, no pods)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    release = kubeversion.selected()
    chosen = f" (${kubeversion.ENV})" if not release.is_default else ""
    return f"test bed: Kubernetes {release.kubernetes}, etcd {release.etcd}{chosen}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{EXCLUSIVE}: the module changes what every test shares (nodes, CRDs); under xdist it runs "
        "while no other test-bed module runs",
    )
    config.addinivalue_line(
        "markers",
        f"{SERIAL}(group): under xdist, tests of the same group run one at a time (for example Helm "
        "releases that take ownership of the CRDs), beside ordinary test-bed modules",
    )
    if _is_xdist_controller(config):
        # Only a name: the controller does not collect, so it cannot know whether any test uses the
        # control plane. The first worker test that does creates the dir and starts the plane there.
        kept = config.getoption("--testbed-state-dir")
        state_dir = (
            Path(kept) if kept else Path(tempfile.gettempdir()) / f"{STATE_DIR_PREFIX}{uuid.uuid4().hex}"
        )
        config.stash[_SHARED_DIR] = (state_dir.resolve(), bool(kept), uuid.uuid4().hex)


def pytest_unconfigure(config: pytest.Config) -> None:
    """xdist controller: stop the session's plane if a worker started one (its dir exists)."""
    shared = config.stash.get(_SHARED_DIR, None)
    if shared is not None:
        state_dir, kept, _token = shared
        if not kept and state_dir.exists():
            ControlPlane(state_dir).down()
            shutil.rmtree(state_dir, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: tell each worker where the session's control plane runs (or will)."""
    shared = node.config.stash.get(_SHARED_DIR, None)
    if shared is not None:
        node.workerinput[WORKER_STATE_DIR] = str(shared[0])
        node.workerinput[WORKER_SESSION] = shared[2]


def _is_xdist_controller(config: pytest.Config) -> bool:
    workers = getattr(config.option, "numprocesses", None)
    return bool(workers) and not hasattr(config, "workerinput") and not config.option.collectonly


def _worker_state_dir(config: pytest.Config) -> Path | None:
    workerinput: dict[str, Any] = getattr(config, "workerinput", {})
    state_dir = workerinput.get(WORKER_STATE_DIR)
    return Path(state_dir) if state_dir else None


def _shared_plane(config: pytest.Config, state_dir: Path) -> None:
    """xdist worker: make sure the session's plane runs in state_dir. The first worker to need it
    starts it, as _start_plane does (a plane already running in a kept dir is used as it is); the
    others, holding the same lock until it is up, attach. Each worker tries once: a failure is
    kept, and raised again for every test that asks for the plane."""
    if _SHARED_START in config.stash:
        failed = config.stash[_SHARED_START]
        if failed is not None:
            raise failed
        return
    nodes = config.getoption("--testbed-nodes")
    token: str = getattr(config, "workerinput", {})[WORKER_SESSION]
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        session = state_dir / ".xdist-session"
        with (state_dir / ".xdist-start").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
            if session.exists() and session.read_text() == token:
                ControlPlane(state_dir, nodes=nodes, kubelet_args=KUBELET_ARGS).attach()
            else:
                _start_plane(str(state_dir), nodes)
                session.write_text(token)
    except Exception as exc:
        config.stash[_SHARED_START] = exc
        raise
    config.stash[_SHARED_START] = None


def _start_plane(kept: str | None, nodes: int) -> ControlPlane:
    """The session's control plane: the one running in `kept` as it is (its binaries exist, so
    nothing is built), else a new one, built first."""
    state_dir = Path(kept) if kept else Path(tempfile.mkdtemp(prefix="valkey-operator-testbed-"))
    plane = ControlPlane(state_dir.resolve(), nodes=nodes, kubelet_args=KUBELET_ARGS)
    if kept and plane.running():
        _check_nodes(plane, nodes)
    else:
        build(progress=lambda _line: None)
    plane.up()
    return plane


def _check_nodes(plane: ControlPlane, nodes: int) -> None:
    """Fail at once, naming the count, where waiting for nodes a running kubelet never registers
    would time out after two minutes."""
    record = plane.kubelet_record()
    if nodes == 0 or record is None or not record.alive():
        return  # no kubelet: up() starts one with `nodes`
    status, body = plane.get("/api/v1/nodes")
    names = sorted(n["metadata"]["name"] for n in json.loads(body).get("items", [])) if status == 200 else []
    if len(names) < nodes:
        raise pytest.UsageError(
            f"--testbed-state-dir {plane.state_dir} holds a test bed with {len(names)} node(s) "
            f"({', '.join(names) or 'none'}); this session asks for {nodes}: pass --testbed-nodes "
            f"{len(names)}, or restart the bed with `python -m valkey_testbed up --nodes {nodes}`"
        )


@pytest.fixture(scope="session")
def kube_control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """Build (if needed) and start the control plane once for the whole session (under xdist: the
    first worker that needs it starts it, the others attach, and the controller stops it)."""
    shared = _worker_state_dir(request.config)
    if shared is not None:
        _shared_plane(request.config, shared)  # already done by pytest_runtest_protocol, as a rule
        yield ControlPlane(
            shared, nodes=request.config.getoption("--testbed-nodes"), kubelet_args=KUBELET_ARGS
        )
        return
    kept = request.config.getoption("--testbed-state-dir")
    plane = _start_plane(kept, request.config.getoption("--testbed-nodes"))
    try:
        yield plane
    finally:
        if not kept:
            plane.down()
            shutil.rmtree(plane.state_dir, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """Under xdist, hold the test bed's lock for each run of tests that uses the control plane:
    shared, exclusive for `testbed_exclusive`, shared plus its group's lock for `testbed_serial`.
    A module keeps its lock from test to test; a parameter marked otherwise takes its own. Taken
    outside pytest-timeout's timer (this wrapper runs first), so waiting for the lock never counts
    against a test's timeout; so is the first start of the shared plane (a build check and ~15 s)."""
    state_dir = _worker_state_dir(item.config)
    uses_plane = "kube_control_plane" in getattr(item, "fixturenames", ())
    held = item.config.stash.get(_HELD, None)
    if state_dir is None or not uses_plane:
        try:
            yield
        finally:
            # A test without the plane in a locked module (say its last, a pure schema check)
            # still ends the module's run: else the worker, out of tests, kept the lock.
            if held is not None and _run_ends(item, nextitem, held[0]):
                del item.config.stash[_HELD]
                held[1].close()
        return
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = _lock_key(item)
    if held is None or held[0] != key:
        if held is not None:
            held[1].close()
        stack = contextlib.ExitStack()
        if key[0] == SERIAL:
            stack.enter_context(_group_lock(state_dir, key[1]))
        stack.enter_context(_module_lock(state_dir, exclusive=key[0] == EXCLUSIVE))
        held = item.config.stash[_HELD] = (key, stack)
    with contextlib.suppress(Exception):  # kept: the kube_control_plane fixture raises it in the test
        _shared_plane(item.config, state_dir)
    try:
        yield
    finally:
        if _run_ends(item, nextitem, key):
            del item.config.stash[_HELD]
            held[1].close()


def _run_ends(item: pytest.Item, nextitem: pytest.Item | None, key: tuple[str, ...]) -> bool:
    """Whether the lock `key` held for item's module is released after item: the worker has no
    next test, or it is in another module, or it takes another lock."""
    return nextitem is None or nextitem.path != item.path or _lock_key(nextitem) != key


def _lock_key(item: pytest.Item) -> tuple[str, ...]:
    """("testbed_exclusive",), ("testbed_serial", group) or ("shared",): what item must hold."""
    if item.get_closest_marker(EXCLUSIVE) is not None:
        return (EXCLUSIVE,)
    serial = item.get_closest_marker(SERIAL)
    if serial is not None:
        return (SERIAL, str(serial.args[0]))
    return ("shared",)


@contextlib.contextmanager
def _group_lock(state_dir: Path, group: str) -> Iterator[None]:
    """One holder at a time for a testbed_serial group; taken before the shared lock, never while
    holding it, so an exclusive module waiting for the shared lock cannot deadlock with it."""
    with (state_dir / f".xdist-serial-{group}").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _module_lock(state_dir: Path, *, exclusive: bool) -> Iterator[None]:
    """A readers-writer lock over flock(2) that prefers writers: a writer holds the turnstile while
    it waits, so no new reader slips in ahead of it."""
    with (state_dir / ".xdist-turnstile").open("a") as turnstile, (state_dir / ".xdist-rw").open("a") as rw:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(rw, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(rw, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def kubelet(kube_control_plane: ControlPlane) -> KubeletControl:
    """The session kubelet's control channel (fail_node, recover_node, pod, exec)."""
    return KubeletControl(kube_control_plane.state_dir)


@pytest.fixture(scope="session")
def kubeconfig_path(kube_control_plane: ControlPlane) -> Path:
    return kube_control_plane.kubeconfig


MISSING_ASYNCIO = (
    "the test bed's async fixtures (kube_api, namespace) need pytest-asyncio: install the testing "
    "extra from a checkout of this repository, `pip install -e 'testbed[testing]'`, and set "
    '`asyncio_mode = "auto"` (docs/testing.md)'
)


def _async_fixture(function: Callable[..., Any]) -> Any:
    """pytest_asyncio.fixture, or without pytest-asyncio a fixture that fails saying what to install."""
    if pytest_asyncio is not None:
        return pytest_asyncio.fixture(function)

    def missing() -> None:
        raise pytest.UsageError(MISSING_ASYNCIO)

    missing.__doc__ = function.__doc__
    return pytest.fixture(name=function.__name__)(missing)


@_async_fixture
async def kube_api(kubeconfig_path: Path) -> AsyncIterator[client.ApiClient]:
    """An admin ApiClient bound to the running test's event loop."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        yield api


def _namespace_name(test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].rstrip("-")
    return f"{stem}-{uuid.uuid4().hex[:6]}"


@_async_fixture
async def namespace(kube_api: client.ApiClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace named after the test; deleted (not awaited) afterwards."""
    name = _namespace_name(request.node.name)
    core = client.CoreV1Api(kube_api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        await core.delete_namespace(name)


@pytest.fixture(scope="session")
def object_store() -> Iterator[objectstore.ObjectStoreServer]:
    """An S3-compatible server (plain HTTP) for the session; each test makes its own bucket."""
    objectstore.build_server(progress=lambda _line: None)
    server = objectstore.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def object_store_tls() -> Iterator[objectstore.ObjectStoreServer]:
    """The same server over TLS: a serving certificate for 127.0.0.1 from a CA whose PEM is ca_pem."""
    objectstore.build_server(progress=lambda _line: None)
    server = objectstore.start(tls=True)
    try:
        yield server
    finally:
        server.stop()
