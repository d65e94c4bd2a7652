"""The official operator (valkey-io/valkey-operator) as a peer on the same test bed, for comparisons.

Nothing of it lives in this repository: the caller builds its manager binary
and points at it and at its CRD directory through the environment
(`VALKEY_PEER_OPERATOR`, `VALKEY_PEER_CRDS`); `find_peer` says which variable is
missing otherwise, so tests and benchmarks skip with that reason. Its binary
runs unchanged, out of cluster, against the test bed's kubeconfig: leader
election off, metrics and health servers off (or on 127.0.0.1), logs to a
file. What it needs from the test bed goes through its own API only
(`cluster_manifest`): `--bind $(POD_IP)` and a longer cluster-node-timeout as
arguments of its "server" container, and its metrics exporter off (its image
is not in our catalog).

    peer = find_peer()
    if isinstance(peer, Absent): pytest.skip(peer.reason)
    await install_peer_crds(kube, peer)
    process = start_peer(peer, kubeconfig, log_dir / "peer.log")
    await kube.create(VALKEY_CLUSTERS, cluster_manifest("c", namespace, shards=3, replicas=1))
    serving = await wait_serving(kube, namespace, "c", shards=3, replicas=1, timeout=300)
    usage = await process.stop()   # CPU seconds and peak RSS of its whole life
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS, Resource
from valkey_operator.core.rest import Obj
from valkey_testbed import crds, processes
from valkey_testbed.datachecker import SLOTS, check_loopback
from valkey_testbed.resp import Reply, ReplyError, encode_command, read_reply
from valkey_testbed.wait import NotYet, eventually

ENV_OPERATOR = "VALKEY_PEER_OPERATOR"
"""The peer's manager binary (built from its Go module, cached outside the repository)."""
ENV_CRDS = "VALKEY_PEER_CRDS"
"""Its CRD directory (config/crd/bases of its source at the same version)."""
PINNED_VERSION = "v0.5.0"
"""The version the comparisons were written against; a binary of another version may still run."""

VALKEY_CLUSTERS = Resource("valkey.io", "v1alpha1", "valkeyclusters", "ValkeyCluster")
VALKEY_NODES = Resource("valkey.io", "v1alpha1", "valkeynodes", "ValkeyNode")
CLUSTER_LABEL = "valkey.io/cluster"
"""The label the peer puts on every pod of a cluster."""
DEFAULT_IMAGE = "valkey/valkey:9.0.0"
"""The peer's own default image (in our catalog)."""
NODE_TIMEOUT_MS = 5000
"""TESTBED.md asks for >= 5 s on 2 shared cores (CPU starvation causes false failovers); the
peer's built-in is 2000 ms. Compare operators at the same timeout: it bounds failover time."""
PORT = 6379
VALKEY_UID = 999
"""The official Valkey image's `valkey` user and group (its pods run as them when restricted)."""


@attrs.frozen
class Peer:
    """A usable peer: its manager binary and its CRD directory."""

    operator: Path
    crd_dir: Path

    def crd_files(self) -> list[Path]:
        return sorted(self.crd_dir.glob("*.yaml"))


@attrs.frozen
class Absent:
    """No peer on this machine; `reason` names the variables to set."""

    reason: str


def find_peer(environ: Mapping[str, str] | None = None) -> Peer | Absent:
    """The peer named by VALKEY_PEER_OPERATOR and VALKEY_PEER_CRDS, or why there is none."""
    env = os.environ if environ is None else environ
    operator, crd_dir = env.get(ENV_OPERATOR, ""), env.get(ENV_CRDS, "")
    unset = [name for name, value in ((ENV_OPERATOR, operator), (ENV_CRDS, crd_dir)) if not value]
    if unset:
        return Absent(
            f"the official operator is an optional peer: set {' and '.join(unset)} "
            f"({ENV_OPERATOR}: its manager binary {PINNED_VERSION}, {ENV_CRDS}: its config/crd/bases)"
        )
    binary, directory = Path(operator), Path(crd_dir)
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return Absent(f"{ENV_OPERATOR}={operator} is not an executable file")
    if not any(directory.glob("*.yaml")):
        return Absent(f"{ENV_CRDS}={crd_dir} holds no CRD files (*.yaml)")
    return Peer(binary, directory)


async def install_peer_crds(client: Client, peer: Peer, timeout: float = 60.0) -> list[Obj]:
    """Server-side apply the peer's CRDs to the test bed's API server; return once Established."""
    return await crds.install_crds(client, peer.crd_files(), timeout)


def peer_argv(
    peer: Peer,
    *,
    health_address: str = "0",
    log_level: str | None = "info",
    watch_namespaces: Sequence[str] = (),
    flags: Sequence[str] = (),
) -> list[str]:
    """Its command line: leader election and metrics off, health server off unless given a
    127.0.0.1 address. `log_level` info matches our operator (its shipped manifest leaves zap's
    development mode at debug level); None keeps its default."""
    if health_address != "0":
        check_loopback(health_address.rsplit(":", 1)[0].strip("[]"))
    argv = [
        str(peer.operator),
        "--leader-elect=false",
        "--metrics-bind-address=0",
        f"--health-probe-bind-address={health_address}",
    ]
    if log_level is not None:
        argv.append(f"--zap-log-level={log_level}")
    argv += [f"--watch-namespace={namespace}" for namespace in watch_namespaces]
    return [*argv, *flags]


@attrs.frozen
class Usage:
    """What the peer's process cost: user + system CPU seconds, and peak resident set size."""

    cpu_seconds: float
    peak_rss_bytes: int


def sample_usage(pid: int) -> Usage | None:
    """CPU seconds (/proc/<pid>/stat utime + stime) and peak RSS (VmHWM) of a live process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat(5))
    hwm = next((line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")), "0")
    return Usage(ticks / os.sysconf("SC_CLK_TCK"), int(hwm) * 1024)


@attrs.define
class PeerProcess:
    """The running peer: its pid, its log, and its resource use."""

    record: processes.ProcessRecord
    log_file: Path
    last: Usage | None = None
    final: Usage | None = None

    @property
    def pid(self) -> int:
        return self.record.pid

    def alive(self) -> bool:
        return self.final is None and self.record.alive()

    def usage(self) -> Usage | None:
        """Its use so far (the final figures once stopped); None if it is gone and never sampled."""
        if self.final is not None:
            return self.final
        sampled = sample_usage(self.pid) if self.record.alive() else None
        if sampled is not None:
            self.last = sampled
        return self.last

    async def stop(self, grace: float = 10.0) -> Usage | None:
        """SIGTERM, SIGKILL after grace seconds; its whole-life usage.

        CPU seconds come from wait4 (it is our child), so they include its shutdown. Peak RSS is
        VmHWM sampled just before SIGTERM, not wait4's ru_maxrss: Linux carries the forking
        parent's RSS peak across fork and exec into ru_maxrss, so a small Go process started from
        a 120 MB pytest would report 120 MB.
        """
        if self.final is not None:
            return self.final
        self.usage()
        if self.record.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while True:
            reaped = self._reap()
            if reaped is not None:
                break
            if not self.record.alive():
                reaped = self._reap()  # it may have exited between the two looks: reap it now
                break
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                deadline = float("inf")
            await asyncio.sleep(0.05)
        if reaped is not None:
            self.final = Usage(reaped, self.last.peak_rss_bytes if self.last else 0)
        else:
            self.final = self.last
        return self.final

    def _reap(self) -> float | None:
        """Its CPU seconds once it has exited and is reaped here; None while it runs."""
        try:
            pid, _, rusage = os.wait4(self.pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return None
        return rusage.ru_utime + rusage.ru_stime


def start_peer(
    peer: Peer,
    kubeconfig: str | Path,
    log_file: Path,
    *,
    health_address: str = "0",
    log_level: str | None = "info",
    watch_namespaces: Sequence[str] = (),
    flags: Sequence[str] = (),
) -> PeerProcess:
    """Start the peer out of cluster against kubeconfig (its own session, output to log_file)."""
    argv = peer_argv(
        peer,
        health_address=health_address,
        log_level=log_level,
        watch_namespaces=watch_namespaces,
        flags=flags,
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("KUBERNETES_")}
    env["KUBECONFIG"] = str(kubeconfig)
    return PeerProcess(processes.start("valkey-peer-operator", argv, log_file, env=env), log_file)


def cluster_manifest(
    name: str,
    namespace: str,
    *,
    shards: int,
    replicas: int,
    image: str = DEFAULT_IMAGE,
    node_timeout_ms: int | None = NODE_TIMEOUT_MS,
    restricted: bool = False,
) -> Obj:
    """A ValkeyCluster of the peer's API with what the test bed needs, through that API only.

    The "server" container is a strategic-merge patch: its args are appended to the peer's
    command, and a command-line option overrides the same one in the peer's config file, so
    `--bind $(POD_IP)` (every listener on its own pod IP) and `--cluster-node-timeout` take
    effect (its `spec.config` cannot: the peer writes its base config after the user's). Its
    metrics exporter is off: the exporter image is not in the catalog. `node_timeout_ms=None`
    keeps the peer's own 2000 ms.

    `restricted` makes its pods admissible in a namespace enforcing the "restricted" Pod Security
    Standard (ours are by default): its shipped pods set no securityContext, so the API server
    refuses them there (allowPrivilegeEscalation, capabilities, runAsNonRoot, seccompProfile) and
    the cluster waits in "Updating ValkeyNodes" forever. Its own `spec.podSecurityContext` and the
    server container's `securityContext` carry them, as the Valkey image's user.
    """
    args = ["--bind", "$(POD_IP)"]
    if node_timeout_ms is not None:
        args += ["--cluster-node-timeout", str(node_timeout_ms)]
    server: Obj = {"name": "server", "args": args}
    spec: Obj = {
        "shards": shards,
        "replicas": replicas,
        "image": image,
        "exporter": {"enabled": False},
        "containers": [server],
    }
    if restricted:
        spec["podSecurityContext"] = {
            "runAsNonRoot": True,
            "runAsUser": VALKEY_UID,
            "runAsGroup": VALKEY_UID,
            "fsGroup": VALKEY_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        server["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def command(host: str, *args: str | int, port: int = PORT, timeout: float = 3.0) -> Reply:
    """One command to one Valkey node as its default user (the peer leaves it open); a loopback
    address only. An error reply raises ConnectionError."""
    check_loopback(host)
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(encode_command(list(args)))
            reply = await read_reply(reader)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    if isinstance(reply, ReplyError):
        raise ConnectionError(f"{host}:{port} {args[0]}: {reply.message}")
    return reply


async def info(host: str, *section: str, port: int = PORT) -> dict[str, str]:
    """`INFO section` (or `CLUSTER INFO` for section ("cluster-info",)) as key -> value."""
    args = ("CLUSTER", "INFO") if section == ("cluster-info",) else ("INFO", *section)
    reply = await command(host, *args, port=port)
    if not isinstance(reply, bytes):
        raise ConnectionError(f"{host}:{port} {' '.join(args)}: unexpected reply {reply!r}")
    pairs = (line.split(":", 1) for line in reply.decode().splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


async def config_get(host: str, name: str, port: int = PORT) -> str:
    """One configuration value of a node (`CONFIG GET name`)."""
    reply = await command(host, "CONFIG", "GET", name, port=port)
    if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], bytes)):
        raise ConnectionError(f"{host}:{port} CONFIG GET {name}: unexpected reply {reply!r}")
    return reply[1].decode()


@attrs.frozen
class Serving:
    """A peer cluster that serves every slot: its pod IPs, primaries first."""

    primaries: tuple[str, ...]
    replicas: tuple[str, ...]

    @property
    def seeds(self) -> list[tuple[str, int]]:
        return [(ip, PORT) for ip in self.primaries]


async def serving_state(
    kube: Client, namespace: str, name: str, *, shards: int, replicas: int
) -> Serving | NotYet:
    """Serving once every expected pod has an IP and every node says cluster_state:ok with all
    16384 slots ok, knows every node, counts `shards` primaries, and each primary has its
    `replicas` replicas connected; else what is missing."""
    expected = shards * (1 + replicas)
    pods = await kube.list(PODS, namespace, label_selector=f"{CLUSTER_LABEL}={name}")
    ips = sorted(
        pod["status"]["podIP"]
        for pod in pods
        if (pod.get("status") or {}).get("podIP") and not pod["metadata"].get("deletionTimestamp")
    )
    if len(ips) != expected:
        return NotYet(f"{len(ips)} of {expected} pods have an IP")
    primaries, secondaries = [], []
    for ip in ips:
        try:
            cluster = await info(ip, "cluster-info")
            replication = await info(ip, "replication")
        except (OSError, TimeoutError, ConnectionError) as exc:
            return NotYet(f"{ip}: {exc!r}")
        wanted = {
            "cluster_state": "ok",
            "cluster_slots_ok": str(SLOTS),
            "cluster_known_nodes": str(expected),
            "cluster_size": str(shards),
        }
        wrong = {key: cluster.get(key) for key, value in wanted.items() if cluster.get(key) != value}
        if wrong:
            return NotYet(f"{ip}: {wrong}")
        if replication.get("role") == "master":
            if int(replication.get("connected_slaves", "0")) != replicas:
                return NotYet(f"{ip}: {replication.get('connected_slaves')} of {replicas} replicas connected")
            primaries.append(ip)
        else:
            secondaries.append(ip)
    return Serving(tuple(primaries), tuple(secondaries))


async def wait_serving(
    kube: Client, namespace: str, name: str, *, shards: int, replicas: int, timeout: float
) -> Serving:
    """Wait until the peer's cluster `name` serves every slot (see `serving_state`)."""

    async def check() -> Serving | NotYet:
        return await serving_state(kube, namespace, name, shards=shards, replicas=replicas)

    serving: Serving = await eventually(
        check, f"peer cluster {namespace}/{name} serving every slot", timeout, interval=0.2
    )
    return serving


async def wait_reported_ready(kube: Client, namespace: str, name: str, *, shards: int, timeout: float) -> Obj:
    """Wait until the peer itself reports the cluster Ready with every shard ready; its status."""

    async def check() -> Obj | NotYet:
        status: Obj = (await kube.get(VALKEY_CLUSTERS, name, namespace)).get("status") or {}
        ready = status.get("state") == "Ready" and status.get("readyShards") == shards
        return status if ready else NotYet({k: status.get(k) for k in ("state", "reason", "readyShards")})

    status: Obj = await eventually(check, f"peer cluster {namespace}/{name} reported Ready", timeout)
    return status
