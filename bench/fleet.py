"""Fleet: what one operator process costs while it serves 1, 10, 50, 100 small clusters.

One operator process (a real subprocess, so its CPU and RSS are its own) and
one namespace per cluster shape. The fleet grows in place: for each size the
missing clusters are created (bounded concurrency), then, once every cluster
is settled (its own status says Active / Ready for its generation, and Valkey
itself serves it as asked: every pod ready, every node cluster_state:ok, every
slot served once, no migration, replicas linked; bench/operators.py `serving`):

  settle   `--settle` seconds of nothing (what a quiet fleet converges to);
  window   `--window` seconds of nothing (at least the operator's longest
           probe interval, so every quiet cluster is probed in it), measured: the operator's CPU
           seconds per second (utime + stime from /proc), its RSS (VmRSS)
           and peak (VmHWM); on every Valkey node, the commands the operator
           sent (INFO stats total_commands_processed delta, minus replication
           traffic (REPLCONF, PING, PSYNC, SYNC from commandstats), the
           commands of others a side names (the peer's exec probes: AUTH) and
           the INFO and AUTH of ours counted in it) per node per second, the
           connections it opened per node per minute (calls of the command
           its client opens a connection with, less ours), the connections of
           everyone else (the kubelet's probes: tcpSocket for ours, exec
           valkey-cli for the peer) and every command's calls, for the record;
  edit     one settled cluster (a different one per size) gets one more
           replica per shard (`replicasPerShard` / `replicas` +1); timed from
           the patch until it is settled again for the new generation (polled
           every 0.2 s; Valkey asked once the status says so).

Prints a row per size and how each number grows with the fleet; `--output`
writes them as JSON. Everything created is deleted at the end (namespaces,
the operator process, and the control plane when this script started it).

    nice -n 10 python bench/fleet.py [--sizes 1,10,50,100] [--shapes 1x0,2x1] [--max-pods 120]
        [--settle 180] [--window 300] [--sides ours,peer] [--sizes-of peer=1,10] [--together]
        [--operator-checkout DIR] [--kubeconfig PATH] [--output FILE]

A shape's sizes stop at `--max-pods` pods (printed as skipped): on the shared
2-core machine 2x1 beyond 10 clusters (40 pods, plus their replication and
gossip) is more than the machine bears next to other work.

`--sides` takes registered sides (SIDES below): `ours` is this checkout's
operator, or the one in `--operator-checkout DIR` (PYTHONPATH=DIR) to measure
another revision in the same conditions; `peer` is the official operator
(testbed/valkey_testbed/peer.py: VALKEY_PEER_OPERATOR, VALKEY_PEER_CRDS).
`--together` runs the sides at once on one test bed, each with its own
operator process and namespaces: both under the same machine load, in half
the time. A side joins by adding a FleetSide to SIDES: how to start it, a
cluster's manifest, when its status says settled, its pods' label, the edit,
the nodes' credentials and which node traffic is not its operator's.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import attrs
import yaml
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from operators import Shape as Served
from operators import delete_namespace, serving

from controllers.shared import layout, names
from valkey_operator.api.resources import ADMIN_USER, VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, PODS, SECRETS, Resource
from valkey_operator.core.rest import RestClient
from valkey_operator.valkey.admin import AdminClient, Credentials, check_address
from valkey_testbed import peer, processes
from valkey_testbed.crds import install_crds
from valkey_testbed.demo import curated_examples
from valkey_testbed.images import newest_image
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS, kubectl, start_operator
from valkey_testbed.wait import NotYet, eventually

ROOT = Path(__file__).resolve().parents[1]
IMAGE = newest_image()
POLL = 0.2
CREATE_CONCURRENCY = 8
PROBE_CONCURRENCY = 16
REPLICATION_COMMANDS = ("replconf", "ping", "psync", "sync")
"""Commands a node receives from its replicas or primary, not from the operator."""
Obj = dict[str, Any]


@attrs.frozen
class Shape:
    shards: int
    replicas: int

    @classmethod
    def parse(cls, text: str) -> Shape:
        shards, _, replicas = text.partition("x")
        return cls(int(shards), int(replicas))

    @property
    def pods(self) -> int:
        return self.shards * (1 + self.replicas)

    def __str__(self) -> str:
        return f"{self.shards}x{self.replicas}"


class FleetSide(Protocol):
    """What the fleet bench needs from an operator under test."""

    name: str
    resource: Resource
    handshake: str
    """The command its operator opens every connection to a node with (counts its connections)."""
    not_operator: tuple[str, ...]
    """Commands the nodes receive from others than its operator, besides replication (its pods'
    exec probes)."""

    async def install(self, kube: Client) -> None:
        """CRDs (before the operator starts)."""

    async def shared(self, kubeconfig: str, log_dir: Path) -> None:
        """Shared objects the clusters refer to (configs, roles), once the operator runs."""

    def start(self, kubeconfig: str, log_dir: Path) -> processes.ProcessRecord:
        """The operator process (one for the whole fleet)."""

    def body(self, name: str, namespace: str, shape: Shape) -> Obj:
        """A cluster's manifest."""

    def settled(self, obj: Obj) -> bool:
        """Its own status says Active (ready) for its current generation."""

    def shape_of(self, obj: Obj) -> Shape:
        """The layout its spec asks for."""

    def selector(self, name: str) -> str:
        """The label selector of one cluster's pods."""

    def edit(self, obj: Obj) -> Obj:
        """The merge patch of the timed spec edit."""

    async def credentials(self, kube: Client, namespace: str, cluster: str) -> Credentials | None:
        """What the operator authenticates to the nodes with (None: no auth)."""

    def cluster_of(self, pod: Obj) -> str | None:
        """The cluster a pod belongs to."""


class Ours:
    name = "ours"
    resource = VALKEY_CLUSTERS
    handshake = "auth"
    not_operator: tuple[str, ...] = ()  # its pods' probes are tcpSocket: they connect, send nothing

    def __init__(self, checkout: Path | None) -> None:
        self.checkout = checkout

    async def install(self, kube: Client) -> None:
        await install_crds(kube)

    async def shared(self, kubeconfig: str, log_dir: Path) -> None:
        kubectl(kubeconfig, "apply", "-f", str(curated_examples(IMAGE, log_dir)))
        kubectl(kubeconfig, "wait", "--for=condition=Resolved", "--timeout=60s", "valkeyconfig/cache-base")

    def start(self, kubeconfig: str, log_dir: Path) -> processes.ProcessRecord:
        return start_operator(kubeconfig, log_dir, checkout=self.checkout)

    def body(self, name: str, namespace: str, shape: Shape) -> Obj:
        body: Obj = yaml.safe_load((ROOT / "docs" / "examples" / "cluster.yaml").read_text())
        body["metadata"] = {"name": name, "namespace": namespace}
        body["spec"]["shards"] = shape.shards
        body["spec"]["replicasPerShard"] = shape.replicas
        return body

    def settled(self, obj: Obj) -> bool:
        status = obj.get("status") or {}
        generation = obj["metadata"].get("generation", 0)
        return status.get("state") == "Active" and status.get("observedGeneration", 0) >= generation

    def shape_of(self, obj: Obj) -> Shape:
        return Shape(obj["spec"]["shards"], obj["spec"]["replicasPerShard"])

    def selector(self, name: str) -> str:
        return f"{names.CLUSTER_LABEL}={name}"

    def edit(self, obj: Obj) -> Obj:
        return {"spec": {"replicasPerShard": obj["spec"]["replicasPerShard"] + 1}}

    async def credentials(self, kube: Client, namespace: str, cluster: str) -> Credentials | None:
        secret = await kube.get(SECRETS, names.secret_name(cluster), namespace)
        password = base64.b64decode(secret["data"][layout.ADMIN_PASSWORD_KEY]).decode()
        return Credentials(username=ADMIN_USER, password=password)

    def cluster_of(self, pod: Obj) -> str | None:
        return (pod["metadata"].get("labels") or {}).get(names.CLUSTER_LABEL)


class Peer:
    """The official operator (testbed/valkey_testbed/peer.py), unchanged, out of cluster.

    Settings go through its own ValkeyCluster: `--bind $(POD_IP)`, cluster-node-timeout 5000 and
    its exporter off (as in bench/peers.py), and, since the fleet's namespaces enforce the
    "restricted" Pod Security Standard as ours pass it, its pods' security contexts. Its operator
    opens each connection with HELLO 3 AUTH (valkey-go); its pods' exec probes (valkey-cli PING,
    every 5 s, readiness and liveness) send AUTH and PING, so AUTH is not counted as its operator's.
    """

    name = "peer"
    resource = peer.VALKEY_CLUSTERS
    handshake = "hello"
    not_operator: tuple[str, ...] = ("auth",)

    def __init__(self, found: peer.Peer) -> None:
        self.found = found

    async def install(self, kube: Client) -> None:
        await peer.install_peer_crds(kube, self.found)

    async def shared(self, kubeconfig: str, log_dir: Path) -> None:
        return None

    def start(self, kubeconfig: str, log_dir: Path) -> processes.ProcessRecord:
        return peer.start_peer(self.found, kubeconfig, log_dir / "peer.log").record

    def body(self, name: str, namespace: str, shape: Shape) -> Obj:
        return peer.cluster_manifest(
            name, namespace, shards=shape.shards, replicas=shape.replicas, image=IMAGE, restricted=True
        )

    def settled(self, obj: Obj) -> bool:
        """Its Ready condition True for the current generation, and its state Ready."""
        status = obj.get("status") or {}
        generation = obj["metadata"].get("generation", 0)
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        return (
            bool(ready)
            and ready[0].get("status") == "True"
            and ready[0].get("observedGeneration") == generation
            and status.get("state") == "Ready"
        )

    def shape_of(self, obj: Obj) -> Shape:
        return Shape(obj["spec"]["shards"], obj["spec"].get("replicas", 0))

    def selector(self, name: str) -> str:
        return f"{peer.CLUSTER_LABEL}={name}"

    def edit(self, obj: Obj) -> Obj:
        return {"spec": {"replicas": obj["spec"].get("replicas", 0) + 1}}

    async def credentials(self, kube: Client, namespace: str, cluster: str) -> Credentials | None:
        return None  # it leaves the default user open

    def cluster_of(self, pod: Obj) -> str | None:
        return (pod["metadata"].get("labels") or {}).get(peer.CLUSTER_LABEL)


def make_peer(args: argparse.Namespace) -> FleetSide:
    found = peer.find_peer()
    if isinstance(found, peer.Absent):
        raise SystemExit(f"the peer is absent: {found.reason}")
    return Peer(found)


SIDES: dict[str, Callable[[argparse.Namespace], FleetSide]] = {
    "ours": lambda args: Ours(Path(args.operator_checkout) if args.operator_checkout else None),
    "peer": make_peer,
}


# -- measuring ----------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of pid, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int) -> dict[str, int]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def calls(info: dict[str, str], command: str) -> int:
    """`calls=` of one command in INFO commandstats (0 when never called)."""
    entry = info.get(f"cmdstat_{command}", "")
    fields = dict(part.split("=", 1) for part in entry.split(",") if "=" in part)
    return int(fields.get("calls", 0))


def operator_commands(
    before: dict[str, str], after: dict[str, str], ours: int, others: tuple[str, ...] = ()
) -> int:
    """Commands the operator sent between two `INFO stats commandstats` replies on one node.

    Pure: the total delta minus replication traffic, the `others` commands (sent by others than
    the operator, such as exec probes) and `ours` (the bench's own commands between them, not
    already among the others)."""

    total = int(after["total_commands_processed"]) - int(before["total_commands_processed"])
    excluded = sum(calls(after, c) - calls(before, c) for c in (*REPLICATION_COMMANDS, *others))
    return total - excluded - ours


def command_deltas(before: dict[str, str], after: dict[str, str]) -> dict[str, int]:
    """Calls per command between two `INFO commandstats` replies (commands called in between)."""
    found = {}
    for key in after:
        if key.startswith("cmdstat_"):
            command = key.removeprefix("cmdstat_")
            delta = calls(after, command) - calls(before, command)
            if delta:
                found[command] = delta
    return found


@attrs.frozen
class Window:
    seconds: float
    cpu: float
    rss_mib: float
    hwm_mib: float
    nodes: int
    commands_per_node_s: float
    connections_per_node_min: float
    load: float
    other_connections_per_node_min: float | None = None
    """Connections from others than the operator and the bench (the kubelet's probes, replicas)."""
    calls_per_node_s: dict[str, float] = attrs.field(factory=dict)
    """Every command the nodes received in the window, per node per second (replication included)."""


async def measure_window(side: FleetSide, kube: Client, namespace: str, pid: int, seconds: float) -> Window:
    pods = [p for p in await kube.list(PODS, namespace) if (p.get("status") or {}).get("podIP")]
    clusters = sorted({c for p in pods if (c := side.cluster_of(p))})
    credentials = dict(
        zip(
            clusters,
            await asyncio.gather(*(side.credentials(kube, namespace, c) for c in clusters)),
            strict=True,
        )
    )
    limit = asyncio.Semaphore(PROBE_CONCURRENCY)

    async def read(pod: Obj) -> dict[str, str]:
        """INFO on a fresh connection (a held one would meet the servers' idle `timeout`)."""
        ip = pod["status"]["podIP"]
        check_address(ip, LOOPBACK_NETWORKS)
        found = credentials[side.cluster_of(pod) or ""]
        admin = AdminClient(
            credentials=found or Credentials(username="default", password=""),
            allowed_networks=LOOPBACK_NETWORKS,
        )
        async with limit, admin.connect(ip) as node:
            return await node.info("stats", "commandstats")

    before = await asyncio.gather(*(read(pod) for pod in pods))
    cpu0, started = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    cpu1, elapsed = cpu_seconds(pid), time.monotonic() - started
    after = await asyncio.gather(*(read(pod) for pod in pods))
    # Ours between the two replies: the first INFO, and the second connection (its AUTH).
    pairs = list(zip(before, after, strict=True))
    ours = 1 if "auth" in side.not_operator else 2
    commands = [operator_commands(b, a, ours, side.not_operator) for b, a in pairs]
    own_handshake = 1 if side.handshake == "auth" else 0
    connections = [calls(a, side.handshake) - calls(b, side.handshake) - own_handshake for b, a in pairs]
    received = [
        int(a["total_connections_received"]) - int(b["total_connections_received"]) - 1 for b, a in pairs
    ]
    by_command: dict[str, int] = {}
    for b, a in pairs:
        for command, delta in command_deltas(b, a).items():
            by_command[command] = by_command.get(command, 0) + delta
    memory = memory_kib(pid)
    count = max(1, len(pods))
    return Window(
        seconds=elapsed,
        cpu=(cpu1 - cpu0) / elapsed,
        rss_mib=memory["VmRSS"] / 1024,
        hwm_mib=memory["VmHWM"] / 1024,
        nodes=len(pods),
        commands_per_node_s=sum(commands) / count / elapsed,
        connections_per_node_min=sum(connections) / count / elapsed * 60,
        load=load_average(),
        other_connections_per_node_min=(sum(received) - sum(connections)) / count / elapsed * 60,
        calls_per_node_s={c: round(n / count / elapsed, 4) for c, n in sorted(by_command.items())},
    )


# -- the fleet ----------------------------------------------------------------------


async def bounded(items: list[Any], work: Callable[[Any], Awaitable[object]], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(item: Any) -> None:
        async with gate:
            await work(item)

    await asyncio.gather(*(one(item) for item in items))


async def valkey_says(side: FleetSide, kube: Client, obj: Obj) -> str:
    """'' when Valkey itself serves the cluster as its spec asks (bench/operators.py `serving`: every
    pod ready, every node cluster_state:ok, every slot served once, no migration, replicas linked);
    else why not. The same judge for every side."""
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    shape = side.shape_of(obj)
    found = await side.credentials(kube, namespace, name)
    auth = (found.username, found.password) if found else (None, None)
    return await serving(
        kube, namespace, Served(shape.shards, shape.replicas, IMAGE), auth, side.selector(name)
    )


async def all_settled(side: FleetSide, kube: Client, namespace: str, count: int, timeout: float) -> float:
    """Every cluster settled by its own status and served as asked by Valkey itself."""
    started = time.monotonic()
    confirmed: set[str] = set()
    gate = asyncio.Semaphore(PROBE_CONCURRENCY)

    async def confirm(obj: Obj) -> None:
        async with gate:
            if not await valkey_says(side, kube, obj):
                confirmed.add(obj["metadata"]["name"])

    async def check() -> bool | NotYet:
        found = [obj for obj in await kube.list(side.resource, namespace) if side.settled(obj)]
        await asyncio.gather(*(confirm(obj) for obj in found if obj["metadata"]["name"] not in confirmed))
        done = sum(1 for obj in found if obj["metadata"]["name"] in confirmed)
        return done == count or NotYet(f"{done} of {count} settled and serving")

    await eventually(check, f"{count} clusters to settle", timeout, interval=1.0)
    return time.monotonic() - started


async def timed_edit(side: FleetSide, kube: Client, namespace: str, name: str, timeout: float) -> float:
    current = await kube.get(side.resource, name, namespace)
    started = time.monotonic()
    patched = await kube.patch(side.resource, name, side.edit(current), namespace)
    generation = patched["metadata"]["generation"]

    async def settled() -> bool | NotYet:
        obj = await kube.get(side.resource, name, namespace)
        status = obj.get("status") or {}
        if not (obj["metadata"]["generation"] == generation and side.settled(obj)):
            return NotYet(f"{status.get('state')}: {status.get('message')}")
        why = await valkey_says(side, kube, obj)
        return not why or NotYet(why)

    await eventually(settled, f"{name} to settle after the edit", timeout, interval=POLL)
    return time.monotonic() - started


@attrs.frozen
class Row:
    side: str
    shape: str
    clusters: int
    pods: int
    settle_s: float
    """From the creates until every cluster was settled."""
    window: Window
    edit_s: float

    @classmethod
    def from_dict(cls, found: dict[str, Any]) -> Row:
        """A row as `--output` wrote it."""
        return cls(**{**found, "window": Window(**found["window"])})


def read_rows(path: Path) -> list[Row]:
    return [Row.from_dict(row) for row in json.loads(path.read_text())["rows"]]


async def run_shape(
    side: FleetSide,
    kube: Client,
    pid: Callable[[], int],
    shape: Shape,
    sizes: list[int],
    args: argparse.Namespace,
) -> list[Row]:
    namespace = f"fleet-{side.name}-{shape.shards}x{shape.replicas}-{time.strftime('%H%M%S')}"
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    await kube.create(NAMESPACES, {"metadata": {"name": namespace, "labels": labels}})
    rows: list[Row] = []
    try:
        created = 0
        for edit_index, size in enumerate(sizes):
            if size * shape.pods > args.max_pods:
                print(
                    f"{side.name} {shape} x {size}: skipped "
                    f"({size * shape.pods} pods > --max-pods {args.max_pods})",
                    flush=True,
                )
                continue
            new = [f"c{index:03d}" for index in range(created, size)]
            began = time.monotonic()
            await bounded(
                new,
                lambda name: kube.create(side.resource, side.body(name, namespace, shape)),
                CREATE_CONCURRENCY,
            )
            created = max(created, size)
            await all_settled(side, kube, namespace, created, args.timeout + 8.0 * len(new))
            bring_up = time.monotonic() - began
            print(f"{side.name} {shape} x {size}: all settled {bring_up:.1f} s after the creates", flush=True)
            await asyncio.sleep(args.settle)
            window = await measure_window(side, kube, namespace, pid(), args.window)
            edited = f"c{edit_index:03d}"
            edit = await timed_edit(side, kube, namespace, edited, args.timeout)
            row = Row(side.name, str(shape), size, size * shape.pods, bring_up, window, edit)
            rows.append(row)
            print(format_row(row), flush=True)
    finally:
        await delete_namespace(kube, namespace, timeout=300.0)
    return rows


HEADER = (
    "| side | shape | clusters | pods | load (1 min) | operator CPU (% of a core) | RSS MiB (peak) "
    "| operator cmd/s per node | operator connections/min per node | edit -> Active |"
)


def format_row(row: Row) -> str:
    w = row.window
    return (
        f"| {row.side} | {row.shape} | {row.clusters} | {row.pods} | {w.load:.2f} | {w.cpu * 100:.2f} | "
        f"{w.rss_mib:.0f} ({w.hwm_mib:.0f}) | {w.commands_per_node_s:.3f} | {w.connections_per_node_min:.2f} "
        f"| {row.edit_s:.2f} s |"
    )


def growth(rows: list[Row]) -> list[str]:
    """Each number at every size against the same shape's smallest size."""
    lines = []
    for key in sorted({(r.side, r.shape) for r in rows}):
        group = sorted((r for r in rows if (r.side, r.shape) == key), key=lambda r: r.clusters)
        base = group[0]
        for row in group[1:]:
            w, b = row.window, base.window
            added = max(1, row.clusters - base.clusters)
            rss = w.rss_mib - b.rss_mib
            lines.append(
                f"{key[0]} {key[1]} {base.clusters} -> {row.clusters} clusters: "
                f"CPU {b.cpu * 100:.2f} -> {w.cpu * 100:.2f} % of a core "
                f"({(w.cpu - b.cpu) * 100 / added:.4f} per added cluster), "
                f"RSS +{rss:.0f} MiB ({rss / added:.2f} per added cluster), "
                f"cmd/s per node {b.commands_per_node_s:.3f} -> {w.commands_per_node_s:.3f}, "
                f"edit x{row.edit_s / base.edit_s:.2f}"
            )
    return lines


def live_pid(operator: processes.ProcessRecord, logs: Path) -> Callable[[], int]:
    def pid() -> int:
        if not operator.alive():
            raise RuntimeError(f"the operator exited; see {logs}")
        return operator.pid

    return pid


async def drive(kubeconfig: str, args: argparse.Namespace, log_dir: Path) -> list[Row]:
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    host = urlparse(str(configuration.host)).hostname or ""
    check_address(host, LOOPBACK_NETWORKS)
    async with k8s.ApiClient(configuration) as api:
        kube = Client(RestClient(api), field_manager="bench")

        async def one_side(side_name: str) -> list[Row]:
            side = SIDES[side_name](args)
            await side.install(kube)
            operator = side.start(kubeconfig, log_dir / side.name)
            rows: list[Row] = []
            try:
                await side.shared(kubeconfig, log_dir)
                pid = live_pid(operator, log_dir / side.name)
                for shape_text in args.shapes.split(","):
                    shape = Shape.parse(shape_text)
                    rows += await run_shape(side, kube, pid, shape, sizes_of(side.name, args), args)
            finally:
                processes.stop([operator])
            return rows

        chosen = args.sides.split(",")
        if args.together:
            return [row for rows in await asyncio.gather(*(one_side(n) for n in chosen)) for row in rows]
        return [row for name in chosen for row in await one_side(name)]


def sizes_of(side: str, args: argparse.Namespace) -> list[int]:
    """--sizes, or a side's own --sizes-of side=1,10 (a side slower to bring up, fewer sizes)."""
    for entry in args.sizes_of or []:
        name, _, sizes = entry.partition("=")
        if name == side:
            return sorted(int(size) for size in sizes.split(","))
    return list(args.sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--sizes", type=lambda t: sorted(int(s) for s in t.split(",")), default=[1, 10, 50, 100]
    )
    parser.add_argument("--shapes", default="1x0,2x1", help="shards x replicas per shard, comma-separated")
    parser.add_argument("--max-pods", type=int, default=120, help="skip a size whose fleet has more pods")
    parser.add_argument("--settle", type=float, default=180.0, help="seconds of quiet before the window")
    parser.add_argument(
        "--window",
        type=float,
        default=300.0,
        help="the measured quiet window, seconds: at least the operator's steady-probe cap (300), or a "
        "backed-off fleet may see none of its passes in it",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="per wait, seconds (plus 8 s per new cluster)"
    )
    parser.add_argument("--sides", default="ours", help=f"comma-separated: {', '.join(SIDES)}")
    parser.add_argument(
        "--sizes-of",
        action="append",
        metavar="SIDE=SIZES",
        help="one side's own sizes (peer=1,10), instead of --sizes; repeatable",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="run the sides at once, each with its own operator and namespaces, on one test bed "
        "(same load for both; each operator's CPU and RSS are still its own process's)",
    )
    parser.add_argument("--operator-checkout", help="run ours from this checkout (PYTHONPATH)")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--output", help="write the rows as JSON here")
    args = parser.parse_args()
    for name in args.sides.split(","):
        if name not in SIDES:
            parser.error(f"unknown side {name!r}; known: {', '.join(SIDES)}")
    if args.kubeconfig:
        with tempfile.TemporaryDirectory(prefix="bench-") as logs:
            rows = asyncio.run(drive(args.kubeconfig, args, Path(logs)))
    else:
        from valkey_testbed.controlplane import ControlPlane

        with tempfile.TemporaryDirectory(prefix="bench-") as state:
            plane = ControlPlane(Path(state), nodes=3)
            plane.up()
            try:
                rows = asyncio.run(drive(str(plane.kubeconfig), args, plane.logs))
            finally:
                plane.down()
    print("\n" + HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for row in rows:
        print(format_row(row))
    print()
    for line in growth(rows):
        print(line)
    if args.output:
        record = {
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cpus": os.cpu_count(),
            "load_average_at_end": [round(value, 2) for value in os.getloadavg()],
            "peer": peer.PINNED_VERSION if "peer" in args.sides.split(",") else None,
            "args": {key: value for key, value in vars(args).items() if key != "kubeconfig"},
            "rows": [attrs.asdict(row) for row in rows],
        }
        Path(args.output).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
