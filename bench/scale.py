"""Scaling: 3 -> 4 shards holding 200k keys, the operator next to valkey-cli rebalance, in one run.

Each round, in alternating order, three measurements of the same change (a
cluster of 3 primaries without replicas, slots split evenly, holding --keys
keys, gains a 4th primary that ends up with about a quarter of the slots):

  ours     a ValkeyCluster (3 shards x 0 replicas) in a fresh namespace on the
           test bed, the operator running as a process; --keys keys loaded
           through the cluster, then spec.shards patched to 4; timed from the
           patch until the status is Active for that generation with every
           slot covered once and shard 3's primary holding ~1/4 of them. This
           includes creating, starting and joining shard 3's pod; also shown:
           when the status first shows that pod's node id ("new_node") and
           first shows slots migrating to it ("migrating").
  classic  4 valkey-server processes started by hand (valkeyproc, same image,
           same cluster-node-timeout), 3 with the slots split evenly and 1
           empty primary already MET; the same keys loaded; timed
           `valkey-cli --cluster rebalance <ip:port> --cluster-use-empty-primaries`
           (key-by-key MIGRATE) until it exits and every node agrees on the
           new slot map with cluster_state:ok.
  atomic   the same on a fresh identical cluster, with valkey-cli's
           `--cluster-use-atomic-slot-migration` (CLUSTER MIGRATESLOTS; the
           flag is accepted by valkey-cli 9.1 but not listed in its help).
  floor    the fastest correct sequence for what `ours` does, on the same test
           bed: 3 hand-written pods (bench/bootstrap.py's, same image and
           cluster-node-timeout) formed with `valkey-cli --cluster create`,
           the same keys loaded; timed from creating a 4th such pod: its
           server answers PING, one CLUSTER MEET, every node lists the new
           one, the new node reports cluster_state:ok (Valkey keeps a new
           primary `fail` for min(cluster-node-timeout, 5 s) after it learns
           the slot map; a slot moved to it earlier answers CLUSTERDOWN), then
           the atomic rebalance above, until every node shows the new map.

Phases: `ours` prints, from the patch, when shard 3's pod was created, Running
and Ready (the pod as the bench polls it), MEET and the first and last slot
migration step (the operator's structured log), the node id first shown in
the status ("new_node"), slots first shown moving ("migrating"), and Active;
`floor` the same marks of its own sequence.

After every measurement: every node reports cluster_state:ok and the same
slot map covering all 16384 slots once, the new primary holds 1/4 +- 10 %,
every key written is read back with its value (strings through the data
checker, a few hashes, lists, sets and sorted sets compared whole), and the
primaries' DBSIZEs add up to the keys written; the atomic run must have
left only successful EXPORT jobs in CLUSTER GETSLOTMIGRATIONS, the classic run
none. Each phase is bounded by --timeout; one that does not finish is reported
with the last status seen, and the run goes on. Prints each measurement, the
medians and the ratios ours/classic, ours/atomic and classic/atomic.

    python bench/scale.py [--rounds 1] [--keys 200000] [--json]
        [--sides ours,floor,classic,atomic] [--timeout 600] [--image REFERENCE]
        [--kubeconfig PATH] [--log-dir DIR]

The peers need no control plane. For `ours` and `floor`, without --kubeconfig a control
plane with 3 nodes is started in a temporary directory (build it first:
`python -m valkey_testbed build`). Everything listens on and dials
127.0.0.0/8 only; the bench stops only the processes it started, by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bootstrap import answers, floor_pod
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from valkey.asyncio import Valkey
from valkey.exceptions import ValkeyError

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, PODS, Resource
from valkey_operator.core.rest import RestClient
from valkey_operator.valkey.admin import parse_info
from valkey_testbed import processes, valkeyproc
from valkey_testbed.crds import install_crds
from valkey_testbed.datachecker import SLOTS, DataChecker, key_slot
from valkey_testbed.images import ImageEntry, newest_image, resolve_image
from valkey_testbed.operatorproc import start_operator
from valkey_testbed.superuser import SUPERUSER, SUPERUSER_PASSWORD, ensure_role, with_superuser
from valkey_testbed.wait import NotYet, WaitTimeout, eventually

DEFAULT_IMAGE = newest_image()  # what the e2e tests and bench/bootstrap.py run
SIDES = ("ours", "floor", "classic", "atomic")
ON_TEST_BED = ("ours", "floor")
ATOMIC_FLAG = "--cluster-use-atomic-slot-migration"
NODE_TIMEOUT_MS = valkeyproc.CLUSTER_NODE_TIMEOUT_MS  # both sides: >= 5000 ms on 2 shared cores
POLL = 0.1
FLOOR_POLL = 0.05  # the floor's own waits: finer, so it is not slowed by its polling
SHARE_TOLERANCE = 0.10  # the new primary's slots: a quarter of 16384, +- 10 %
VALUE_SIZE = 64
LOAD_CHUNK = 20_000  # keys per DataChecker.write call
LOAD_BATCH = 500  # keys per pipeline
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
PEER_NET = "127.201"  # hand-built servers; the kubelet's pod IPs are in 127.1.0.0/16
CLUSTER = "bench"
Obj = dict[str, Any]
Address = tuple[str, int]
Auth = tuple[str | None, str | None]  # username, password


class PhaseFailed(RuntimeError):
    """A measurement that did not finish or did not verify; the message says what was last seen."""

    def __init__(self, message: str, details: Obj | None = None) -> None:
        super().__init__(message)
        self.details: Obj = details or {}


def loopback(ip: str) -> str:
    if ipaddress.ip_address(ip) not in LOOPBACK:
        raise RuntimeError(f"refusing to connect to {ip}: not in {LOOPBACK}")
    return ip


# -- talking to nodes -----------------------------------------------------------------------------


def node(address: Address, auth: Auth) -> Valkey:
    """A client for one node, replies undecoded and unparsed (raw RESP2 values)."""
    client = Valkey(
        host=loopback(address[0]),
        port=address[1],
        username=auth[0],
        password=auth[1],
        socket_timeout=10,
        socket_connect_timeout=5,
    )
    client.response_callbacks.clear()
    return client


async def call(client: Valkey, *args: Any) -> Any:
    """One command, its raw reply."""
    return await client.execute_command(*args)  # type: ignore[no-untyped-call]


async def cluster_view(address: Address, auth: Auth) -> tuple[str, list[Address | None]]:
    """(cluster_state, owner of every slot) as this node sees them."""
    client = node(address, auth)
    try:
        info = await call(client, "CLUSTER", "INFO")
        reply = await call(client, "CLUSTER", "SLOTS")
    finally:
        await client.aclose()
    state = parse_info(bytes(info).decode()).get("cluster_state", "")
    owners: list[Address | None] = [None] * SLOTS
    for start, end, primary, *_ in reply:
        host = primary[0].decode() if primary[0] else ""
        owner = (loopback(host if host not in ("", "?") else address[0]), int(primary[1]))
        for slot in range(int(start), int(end) + 1):
            if owners[slot] is not None:
                owners[slot] = ("overlap", 0)
            else:
                owners[slot] = owner
    return state, owners


def balanced(owners: Sequence[Address | None], primaries: int, new: Address | None) -> str:
    """'' when every slot has exactly one of `primaries` owners and `new` holds ~1/primaries; else why."""
    if any(owner is None or owner[0] == "overlap" for owner in owners):
        missing = sum(1 for owner in owners if owner is None)
        return f"{missing} slots unowned or claimed twice"
    counts: dict[Address, int] = {}
    for owner in owners:
        assert owner is not None
        counts[owner] = counts.get(owner, 0) + 1
    if len(counts) != primaries:
        return f"{len(counts)} owners, want {primaries}"
    fair = SLOTS / primaries
    target = counts.get(new, 0) if new is not None else min(counts.values())
    if abs(target - fair) > SHARE_TOLERANCE * fair:
        return f"the new primary holds {target} slots, want {fair:.0f} +- {SHARE_TOLERANCE:.0%}"
    return ""


async def converged(addresses: Sequence[Address], auth: Auth, new: Address | None) -> str:
    """'' when every node says ok and shows the same balanced slot map of len(addresses) owners."""
    try:
        views = await asyncio.gather(*(cluster_view(address, auth) for address in addresses))
    except (OSError, TimeoutError, ValkeyError) as exc:
        return f"unreachable: {exc!r}"
    states = {address: state for address, (state, _) in zip(addresses, views, strict=True)}
    if any(state != "ok" for state in states.values()):
        return f"cluster_state {states}"
    first = views[0][1]
    if any(owners != first for _, owners in views[1:]):
        return "nodes disagree on the slot map"
    return balanced(first, len(addresses), new)


# -- data -----------------------------------------------------------------------------------------

EXTRA_KINDS = ("hash", "list", "set", "zset")
ELEMENTS = 10


def extra_write(kind: str, key: bytes, index: int) -> list[Any]:
    if kind == "hash":
        return ["HSET", key, *(x for e in range(ELEMENTS) for x in (f"f{e}", f"v{index}:{e}"))]
    if kind == "list":
        return ["RPUSH", key, *(f"e{index}:{e}" for e in range(ELEMENTS))]
    if kind == "set":
        return ["SADD", key, *(f"m{index}:{e}" for e in range(ELEMENTS))]
    return ["ZADD", key, *(x for e in range(ELEMENTS) for x in (e, f"m{index}:{e}"))]


def extra_read(kind: str, key: bytes) -> list[Any]:
    reads: dict[str, list[Any]] = {
        "hash": ["HGETALL", key],
        "list": ["LRANGE", key, 0, -1],
        "set": ["SMEMBERS", key],
        "zset": ["ZRANGE", key, 0, -1, "WITHSCORES"],
    }
    return reads[kind]


def extra_expected(kind: str, index: int) -> Any:
    """What extra_read returns for an intact key, in canonical() form."""
    if kind == "hash":
        return sorted((f"f{e}".encode(), f"v{index}:{e}".encode()) for e in range(ELEMENTS))
    if kind == "list":
        return [f"e{index}:{e}".encode() for e in range(ELEMENTS)]
    if kind == "set":
        return sorted(f"m{index}:{e}".encode() for e in range(ELEMENTS))
    return [x for e in range(ELEMENTS) for x in (f"m{index}:{e}".encode(), str(e).encode())]


def canonical(kind: str, reply: Any) -> Any:
    if kind == "hash" and isinstance(reply, list):
        return sorted(zip(reply[::2], reply[1::2], strict=True))
    if kind == "set" and isinstance(reply, list):
        return sorted(reply)
    return reply


class Dataset:
    """--keys keys: strings through the data checker, plus a few of each other type, verified whole."""

    def __init__(self, seeds: Sequence[Address], auth: Auth, keys: int) -> None:
        self.auth = auth
        self.per_kind = min(250, keys // 200)
        self.strings = keys - self.per_kind * len(EXTRA_KINDS)
        self.checker = DataChecker(
            seeds, replicas=0, username=auth[0], password=auth[1], prefix="scale", value_size=VALUE_SIZE
        )
        tag = self.checker.run_id
        self.extras = [
            (kind, index, f"scale:{tag}:{kind}:{index}".encode())
            for kind in EXTRA_KINDS
            for index in range(self.per_kind)
        ]

    @property
    def total(self) -> int:
        return self.strings + len(self.extras)

    async def close(self) -> None:
        await self.checker.close()

    def _by_owner(
        self, keyed: Sequence[tuple[bytes, list[Any]]]
    ) -> dict[Address, list[tuple[bytes, list[Any]]]]:
        owner_of = {
            slot: address
            for address, ranges in self.checker.slot_ranges().items()
            for start, end in ranges
            for slot in range(start, end + 1)
        }
        groups: dict[Address, list[tuple[bytes, list[Any]]]] = {}
        for key, command in keyed:
            groups.setdefault(owner_of[key_slot(key)], []).append((key, command))
        return groups

    async def _run(self, keyed: Sequence[tuple[bytes, list[Any]]]) -> dict[bytes, Any]:
        """Each command on its key's primary, pipelined per primary; replies by key."""
        await self.checker.refresh()
        replies: dict[bytes, Any] = {}

        async def on(address: Address, group: list[tuple[bytes, list[Any]]]) -> None:
            client = node(address, self.auth)
            try:
                pipe = client.pipeline(transaction=False)
                for _, command in group:
                    pipe.execute_command(*command)
                results = await pipe.execute(raise_on_error=False)
            finally:
                await client.aclose()
            replies.update((key, result) for (key, _), result in zip(group, results, strict=True))

        await asyncio.gather(*(on(address, group) for address, group in self._by_owner(keyed).items()))
        return replies

    async def load(self, deadline: float) -> float:
        """Write every key; return the seconds it took."""
        started = time.monotonic()
        await self.checker.refresh()
        while len(self.checker.acknowledged) < self.strings:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PhaseFailed(f"loading: {len(self.checker.acknowledged)} of {self.strings} keys written")
            count = min(LOAD_CHUNK, self.strings - len(self.checker.acknowledged))
            report = await self.checker.write(count, batch=LOAD_BATCH, timeout=remaining)
            if report.acknowledged != count:
                raise PhaseFailed(f"loading: {report}")
        replies = await self._run([(key, extra_write(kind, key, index)) for kind, index, key in self.extras])
        failed = [key for key, reply in replies.items() if not isinstance(reply, int)]
        if failed or len(replies) != len(self.extras):
            raise PhaseFailed(f"loading: {len(failed)} extra keys failed, e.g. {failed[:3]}")
        return time.monotonic() - started

    async def verify(self, primaries: Sequence[Address]) -> str:
        """Read every key back and count them all; '' when all is there, else what is not."""
        await self.checker.refresh()
        report = await self.checker.verify(batch=1000)
        if not report.ok:
            return str(report)
        replies = await self._run([(key, extra_read(kind, key)) for kind, _, key in self.extras])
        wrong = [
            key
            for kind, index, key in self.extras
            if canonical(kind, replies.get(key)) != extra_expected(kind, index)
        ]
        if wrong:
            return f"{len(wrong)} of {len(self.extras)} hashes/lists/sets/zsets wrong, e.g. {wrong[:3]}"
        sizes = []
        for address in primaries:
            client = node(address, self.auth)
            try:
                sizes.append(int(await call(client, "DBSIZE")))
            finally:
                await client.aclose()
        if sum(sizes) != self.total:
            return f"DBSIZE adds up to {sum(sizes)} ({sizes}), want {self.total}"
        return ""


# -- peers: valkey-cli --cluster rebalance on a hand-built cluster -------------------------------


def start_peer_cluster(image: ImageEntry, base: Path, deadline: float) -> list[valkeyproc.ValkeyServer]:
    """4 primaries on fresh loopback IPs: 3 own the slots evenly, the 4th is empty and MET."""
    net = f"{PEER_NET}.{random.randrange(1, 255)}"
    config = {"cluster-node-timeout": NODE_TIMEOUT_MS}
    servers: list[valkeyproc.ValkeyServer] = []
    try:
        for index in range(1, 5):
            servers.append(
                valkeyproc.start_server(image, f"{net}.{index}", base_dir=base, config=config, cluster=True)
            )
        valkeyproc.form_cluster(servers[:3], timeout=max(1.0, deadline - time.monotonic()))
        first, new = servers[0], servers[3]
        reply = first.command("CLUSTER", "MEET", new.host, new.port)
        if reply != b"OK":
            raise PhaseFailed(f"MEET {new.address}: {reply!r}")
    except BaseException:
        valkeyproc.stop_servers(servers)
        raise
    return servers


async def peer_joined(servers: Sequence[valkeyproc.ValkeyServer], deadline: float) -> None:
    """Every node knows all 4 and agrees on the 3-owner slot map."""
    addresses = [server.address for server in servers]

    async def joined() -> bool:
        views = await asyncio.gather(*(cluster_view(address, (None, None)) for address in addresses))
        first = views[0][1]
        owners = {owner for owner in first if owner is not None}
        return all(state == "ok" and view == first for state, view in views) and len(owners) == 3

    async def known() -> bool:
        try:
            return await knows_all(addresses) and await joined()
        except (OSError, TimeoutError, ValkeyError):
            return False

    await eventually(
        known, "the empty 4th primary to be known everywhere", deadline - time.monotonic(), interval=POLL
    )


async def slot_migrations(addresses: Sequence[Address], auth: Auth) -> list[bytes]:
    """The state of every EXPORT job the nodes remember (CLUSTER GETSLOTMIGRATIONS)."""
    states = []
    for address in addresses:
        client = node(address, auth)
        try:
            jobs = await call(client, "CLUSTER", "GETSLOTMIGRATIONS")
        finally:
            await client.aclose()
        for job in jobs:
            fields = dict(zip(job[::2], job[1::2], strict=True))
            if fields.get(b"operation") == b"EXPORT":
                states.append(fields.get(b"state", b"?"))
    return states


def cli_supports_atomic(cli: Path) -> bool:
    """The flag is not in `--cluster help` of valkey-cli 9.1.2; look for it in the binary itself."""
    return ATOMIC_FLAG.encode() in cli.read_bytes()


async def rebalance(argv: Sequence[str], log: Path, deadline: float) -> None:
    """Run valkey-cli to completion (killed at the deadline), its output in log."""
    with log.open("wb") as output:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=output, stderr=subprocess.STDOUT)
        try:
            await asyncio.wait_for(proc.wait(), max(1.0, deadline - time.monotonic()))
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise PhaseFailed(f"{' '.join(argv[1:])} did not exit in time; see {log}") from None
    if proc.returncode != 0:
        tail = (await asyncio.to_thread(log.read_text, errors="replace"))[-1500:]
        raise PhaseFailed(f"valkey-cli exited {proc.returncode}:\n{tail}")


async def run_peer(
    image: ImageEntry, keys: int, atomic: bool, timeout: float, log_dir: Path, label: str
) -> Obj:
    cli = image.executable("valkey-cli")
    deadline = time.monotonic() + timeout
    base = valkeyproc.server_base_dir()
    servers: list[valkeyproc.ValkeyServer] = []
    data: Dataset | None = None
    try:
        servers = await asyncio.to_thread(start_peer_cluster, image, base, deadline)
        await peer_joined(servers, deadline)
        addresses = [server.address for server in servers]
        data = Dataset(addresses[:3], (None, None), keys)
        load_seconds = await data.load(deadline)
        first, new = servers[0], servers[3]
        argv = [str(cli), "--cluster", "rebalance", f"{first.host}:{first.port}"]
        argv += ["--cluster-use-empty-primaries", *([ATOMIC_FLAG] if atomic else [])]
        started = time.perf_counter()
        await rebalance(argv, log_dir / f"{label}-rebalance.log", deadline)
        cli_seconds = time.perf_counter() - started

        async def done() -> bool | NotYet:
            problem = await converged(addresses, (None, None), new.address)
            return NotYet(problem) if problem else True

        try:
            await eventually(done, "the new slot map everywhere", deadline - time.monotonic(), interval=POLL)
        except WaitTimeout as exc:
            raise PhaseFailed(str(exc)) from None
        seconds = time.perf_counter() - started
        problem = await data.verify(addresses)
        if problem:
            raise PhaseFailed(f"verify: {problem}")
        jobs = await slot_migrations(addresses, (None, None))
        if atomic and (not jobs or any(state != b"success" for state in jobs)):
            raise PhaseFailed(f"atomic slot migration jobs on the sources: {jobs}")
        if not atomic and jobs:
            raise PhaseFailed(f"classic rebalance ran atomic slot migration jobs: {jobs}")
        return {
            "seconds": seconds,
            "cli_seconds": cli_seconds,
            "load_seconds": load_seconds,
            "migration_jobs": len(jobs),
            "keys": data.total,
        }
    finally:
        if data is not None:
            await data.close()
        valkeyproc.stop_servers(servers)
        shutil.rmtree(base, ignore_errors=True)


# -- floor: the fewest steps on the same test bed ------------------------------------------------


async def pod_ip(kube: Client, namespace: str, name: str, deadline: float) -> str:
    async def ip() -> str | NotYet:
        pod = await kube.get(PODS, name, namespace)
        found = (pod.get("status") or {}).get("podIP")
        return loopback(str(found)) if found else NotYet(f"pod {name} has no IP yet")

    return str(await eventually(ip, f"pod {name}'s IP", deadline - time.monotonic(), interval=FLOOR_POLL))


async def answering(kube: Client, namespace: str, names: Sequence[str], deadline: float) -> list[str]:
    """The pods' IPs once each one's server answers PING."""
    ips = [await pod_ip(kube, namespace, name, deadline) for name in names]

    async def all_answer() -> bool:
        return all(await asyncio.gather(*(answers(ip) for ip in ips)))

    await eventually(
        all_answer, "valkey-server to answer PING", deadline - time.monotonic(), interval=FLOOR_POLL
    )
    return ips


async def knows_all(addresses: Sequence[Address]) -> bool:
    """Every node lists every other, none of them still in handshake."""
    try:
        for address in addresses:
            client = node(address, (None, None))
            try:
                text = bytes(await call(client, "CLUSTER", "NODES")).decode()
            finally:
                await client.aclose()
            lines = [line for line in text.splitlines() if line and "handshake" not in line.split()[2]]
            if len(lines) != len(addresses):
                return False
        return True
    except (OSError, TimeoutError, ValkeyError):
        return False


async def form_floor(
    kube: Client, cli: Path, namespace: str, deadline: float, log_dir: Path
) -> list[Address]:
    """3 hand-written pods, the slots split evenly by `valkey-cli --cluster create`; their addresses."""
    names = [f"floor-{index}" for index in range(3)]
    for name in names:
        await kube.create(PODS, floor_pod(name, namespace))
    ips = await answering(kube, namespace, names, deadline)
    argv = [str(cli), "--cluster", "create", *(f"{ip}:6379" for ip in ips), "--cluster-yes"]
    await rebalance(argv, log_dir / f"{namespace}-create.log", deadline)
    addresses = [(ip, 6379) for ip in ips]

    async def formed() -> bool | NotYet:
        problem = await converged(addresses, (None, None), None)
        return NotYet(problem) if problem else True

    await eventually(formed, "3 primaries formed", deadline - time.monotonic(), interval=POLL)
    return addresses


async def scale_floor(
    kube: Client, cli: Path, namespace: str, addresses: Sequence[Address], deadline: float, log_dir: Path
) -> dict[str, float]:
    """The timed part: a 4th pod, MEET once it answers, wait until it is known and `ok` everywhere,
    the atomic rebalance, the new map everywhere. Returns perf_counter marks ("started", PHASES, "done")."""
    marks = {"started": time.perf_counter()}
    await kube.create(PODS, floor_pod("floor-3", namespace))
    marks["pod_created"] = time.perf_counter()
    (new_ip,) = await answering(kube, namespace, ["floor-3"], deadline)
    marks["pod_running"] = time.perf_counter()
    seed = node(addresses[0], (None, None))
    try:
        reply = await call(seed, "CLUSTER", "MEET", new_ip, 6379)
    finally:
        await seed.aclose()
    if reply != b"OK":
        raise PhaseFailed(f"MEET {new_ip}: {reply!r}")
    marks["meet"] = time.perf_counter()
    new: Address = (new_ip, 6379)
    everyone = [*addresses, new]

    async def met() -> bool:
        return await knows_all(everyone)

    await eventually(met, "every node to list the new one", deadline - time.monotonic(), interval=FLOOR_POLL)
    marks["new_node"] = time.perf_counter()

    async def joined() -> bool | NotYet:
        views = await asyncio.gather(*(cluster_view(address, (None, None)) for address in everyone))
        states = [state for state, _ in views]
        same = all(owners == views[0][1] for _, owners in views)
        return True if same and all(state == "ok" for state in states) else NotYet(f"states {states}")

    await eventually(joined, "cluster_state:ok everywhere", deadline - time.monotonic(), interval=FLOOR_POLL)
    marks["new_node_ok"] = marks["first_migration"] = time.perf_counter()
    argv = [str(cli), "--cluster", "rebalance", f"{addresses[0][0]}:6379"]
    argv += ["--cluster-use-empty-primaries", ATOMIC_FLAG]
    await rebalance(argv, log_dir / f"{namespace}-rebalance.log", deadline)
    marks["last_migration"] = time.perf_counter()

    async def done() -> bool | NotYet:
        problem = await converged(everyone, (None, None), new)
        return NotYet(problem) if problem else True

    await eventually(done, "the new slot map everywhere", deadline - time.monotonic(), interval=FLOOR_POLL)
    marks["done"] = time.perf_counter()
    return marks


async def run_floor(kube: Client, cli: Path, namespace: str, keys: int, timeout: float, log_dir: Path) -> Obj:
    """3 hand-written pods formed and loaded (untimed); then, timed, scale_floor; then verified."""
    deadline = time.monotonic() + timeout
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    await kube.create(NAMESPACES, {"metadata": {"name": namespace, "labels": labels}})
    data: Dataset | None = None
    try:
        addresses = await form_floor(kube, cli, namespace, deadline, log_dir)
        data = Dataset(addresses, (None, None), keys)
        load_seconds = await data.load(deadline)
        deadline = time.monotonic() + timeout  # the scale-out gets a full --timeout of its own
        marks = await scale_floor(kube, cli, namespace, addresses, deadline, log_dir)
        started = marks.pop("started")
        (new_ip,) = await answering(kube, namespace, ["floor-3"], deadline)
        everyone = [*addresses, (new_ip, 6379)]
        problem = await data.verify(everyone)
        if problem:
            raise PhaseFailed(f"verify: {problem}")
        jobs = await slot_migrations(everyone, (None, None))
        if not jobs or any(state != b"success" for state in jobs):
            raise PhaseFailed(f"atomic slot migration jobs on the sources: {jobs}")
        return {
            "seconds": marks.pop("done") - started,
            **{f"{mark}_seconds": at - started for mark, at in marks.items()},
            "load_seconds": load_seconds,
            "keys": data.total,
        }
    except WaitTimeout as exc:
        raise PhaseFailed(str(exc)) from None
    finally:
        if data is not None:
            await data.close()
        await delete_namespace(kube, namespace)


async def delete_namespace(kube: Client, name: str, timeout: float = 120.0) -> None:
    with contextlib.suppress(Exception):
        await kube.delete(VALKEY_CLUSTERS, CLUSTER, name)
    for pod in await kube.list(PODS, name):
        await kube.delete(PODS, pod["metadata"]["name"], name, grace_period_seconds=0)
    await kube.delete(NAMESPACES, name)

    async def gone() -> bool:
        return await kube.get_or_none(NAMESPACES, name) is None

    try:
        await eventually(gone, f"namespace {name} to be deleted", timeout, interval=POLL)
    except WaitTimeout as exc:
        print(f"  warning: {exc}", file=sys.stderr, flush=True)


# -- where ours spends the time: its structured log ------------------------------------------------


def log_time(stamp: str) -> float:
    """Unix seconds of a structured log line's ISO timestamp."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def operator_marks(lines: Iterable[str], cluster: str, shard: int, since: float) -> dict[str, float]:
    """Unix times, from the operator's structured log, of the steps for `cluster` ("namespace/name")
    at or after `since`: shard `shard`'s pod created ("pod_created"), the MEET of that pod ("meet"),
    the first and the last MigrateSlots issued ("first_migration", "last_migration")."""
    marks: dict[str, float] = {}
    prefix = f"{cluster.rpartition('/')[2]}-{shard}-"
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("cluster") != cluster or "timestamp" not in entry:
            continue
        at = log_time(str(entry["timestamp"]))
        if at < since:
            continue
        event, action = entry.get("event"), str(entry.get("action", ""))
        if event == "created pod" and entry.get("shard") == shard:
            marks.setdefault("pod_created", at)
        elif event == "cluster step" and action.startswith("Meet(") and f"peer='{prefix}" in action:
            marks.setdefault("meet", at)
        elif event == "cluster step" and action.startswith("MigrateSlots("):
            marks.setdefault("first_migration", at)
            marks["last_migration"] = at
    return marks


# -- ours: the operator on the test bed ----------------------------------------------------------


class Ours:
    """The operator as a process, a bench-owned ValkeyImage and ValkeyConfig, a namespace per round."""

    def __init__(self, kubeconfig: str, image: str, log_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.image = image
        self.log_dir = log_dir
        stamp = time.strftime("%H%M%S")
        self.image_name = f"bench-scale-{stamp}"
        self.config_name = f"bench-scale-{stamp}"
        self.operator: processes.ProcessRecord | None = None
        self.kube: Client | None = None
        self.api: k8s.ApiClient | None = None

    async def __aenter__(self) -> Ours:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        configuration = k8s.Configuration()
        await k8s_config.load_kube_config(config_file=self.kubeconfig, client_configuration=configuration)
        loopback(urlparse(str(configuration.host)).hostname or "")
        self.api = k8s.ApiClient(configuration)
        self.kube = Client(RestClient(self.api), field_manager="bench")
        await install_crds(self.kube)
        self.operator = start_operator(self.kubeconfig, self.log_dir)
        repository, _, tag = self.image.rpartition(":")
        image = {"repository": repository, "tag": tag, "version": tag}
        await self.kube.create(VALKEY_IMAGES, self._object(VALKEY_IMAGES.kind, self.image_name, image))
        config = {"imageRef": self.image_name, "valkey": {"cluster-node-timeout": str(NODE_TIMEOUT_MS)}}
        await self.kube.create(VALKEY_CONFIGS, self._object(VALKEY_CONFIGS.kind, self.config_name, config))

    @staticmethod
    def _object(kind: str, name: str, spec: Obj) -> Obj:
        return {
            "apiVersion": VALKEY_CLUSTERS.api_version,
            "kind": kind,
            "metadata": {"name": name},
            "spec": spec,
        }

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self.kube is not None:
                await self.delete_catalog(self.kube)
        finally:
            if self.operator is not None:
                processes.stop([self.operator])
            if self.api is not None:
                await self.api.close()

    async def delete_catalog(self, kube: Client) -> None:
        """Delete the config, then the image, each gone (finalizers released by the operator) first."""
        for resource, name in ((VALKEY_CONFIGS, self.config_name), (VALKEY_IMAGES, self.image_name)):

            async def gone(resource: Resource = resource, name: str = name) -> bool:
                return await kube.get_or_none(resource, name) is None

            try:
                await kube.delete(resource, name)
                await eventually(gone, f"{resource.kind} {name} to be deleted", 30, interval=POLL)
            except Exception as exc:
                print(f"  warning: {exc}", file=sys.stderr, flush=True)

    async def delete_namespace(self, name: str) -> None:
        assert self.kube is not None
        await delete_namespace(self.kube, name)

    async def run(self, namespace: str, keys: int, timeout: float) -> Obj:
        assert self.kube is not None and self.operator is not None
        kube = self.kube
        if not self.operator.alive():
            raise PhaseFailed(f"the operator exited; see {self.log_dir / 'operator.log'}")
        labels = {"pod-security.kubernetes.io/enforce": "restricted"}
        await kube.create(NAMESPACES, {"metadata": {"name": namespace, "labels": labels}})
        data: Dataset | None = None
        progress: Obj = {}
        marks: dict[str, float] = {}
        started = time.perf_counter()
        try:
            deadline = time.monotonic() + timeout
            body = {
                "apiVersion": VALKEY_CLUSTERS.api_version,
                "kind": VALKEY_CLUSTERS.kind,
                "metadata": {"name": CLUSTER, "namespace": namespace},
                "spec": with_superuser({"configRef": self.config_name, "shards": 3, "replicasPerShard": 0}),
            }
            await ensure_role(kube)
            created = await kube.create(VALKEY_CLUSTERS, body)
            status = await self.wait_settled(namespace, created["metadata"]["generation"], 3, deadline, None)
            progress["bootstrap_seconds"] = time.perf_counter() - started
            auth: Auth = (SUPERUSER, SUPERUSER_PASSWORD)
            seeds = [(loopback(n["ip"]), 6379) for n in status["nodes"] if n.get("role") == "primary"]
            data = Dataset(seeds, auth, keys)
            progress["load_seconds"] = await data.load(deadline)

            deadline = time.monotonic() + timeout  # the scale-up gets a full --timeout of its own
            started, wall = time.perf_counter(), time.time()
            patched = await kube.patch(VALKEY_CLUSTERS, CLUSTER, {"spec": {"shards": 4}}, namespace)
            generation = patched["metadata"]["generation"]
            status = await self.wait_settled(namespace, generation, 4, deadline, marks)
            seconds = time.perf_counter() - started
            logged = (self.log_dir / "operator.log").read_text(errors="replace").splitlines()
            for mark, at in operator_marks(logged, f"{namespace}/{CLUSTER}", 3, wall).items():
                marks[mark] = started + (at - wall)
            primaries = [(loopback(n["ip"]), 6379) for n in status["nodes"] if n.get("role") == "primary"]
            new = next((loopback(n["ip"]), 6379) for n in status["nodes"] if n.get("shard") == 3)
            problem = await converged(primaries, auth, new)
            if problem:
                raise PhaseFailed(f"status Active but the nodes say: {problem}")
            problem = await data.verify(primaries)
            if problem:
                raise PhaseFailed(f"verify: {problem}")
            return {
                "seconds": seconds,
                **{f"{mark}_seconds": at - started for mark, at in marks.items()},
                **progress,
                "keys": data.total,
            }
        except PhaseFailed as exc:
            progress.update({f"{mark}_seconds": at - started for mark, at in marks.items()})
            exc.details.update(progress)
            raise
        finally:
            if data is not None:
                await data.close()
            await self.delete_namespace(namespace)

    async def mark_pod(self, namespace: str, prefix: str, marks: dict[str, float]) -> None:
        """Mark when the first pod named prefix* is first seen Running and first seen Ready."""
        assert self.kube is not None
        for pod in await self.kube.list(PODS, namespace):
            if not pod["metadata"]["name"].startswith(prefix):
                continue
            status = pod.get("status") or {}
            if status.get("phase") == "Running":
                marks.setdefault("pod_running", time.perf_counter())
            conditions = status.get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                marks.setdefault("pod_ready", time.perf_counter())

    async def wait_settled(
        self, namespace: str, generation: int, shards: int, deadline: float, marks: dict[str, float] | None
    ) -> Obj:
        """Poll until status is Active for generation with `shards` balanced primaries; return it.

        marks gets the perf_counter times the status first shows shard `shards - 1`'s node id
        ("new_node") and first shows slots migrating or migrated to it ("migrating"), and the
        times its pod is first seen Running ("pod_running") and Ready ("pod_ready").
        Every status change is appended, timed, to <log dir>/<namespace>-status-<shards>.log.
        """
        assert self.kube is not None
        kube = self.kube
        last: list[str] = ["no status yet"]
        started = time.perf_counter()
        timeline = self.log_dir / f"{namespace}-status-{shards}.log"

        async def settled() -> Obj | NotYet:
            cluster = await kube.get(VALKEY_CLUSTERS, CLUSTER, namespace)
            status: Obj = cluster.get("status") or {}
            nodes = status.get("nodes") or []
            if marks is not None:
                newest = [n for n in nodes if n.get("shard") == shards - 1]
                if "new_node" not in marks and any(n.get("nodeId") for n in newest):
                    marks["new_node"] = time.perf_counter()
                moving = "slot migration" in status.get("message", "") or any(n.get("slots") for n in newest)
                if "migrating" not in marks and moving:
                    marks["migrating"] = time.perf_counter()
                if "pod_ready" not in marks:
                    await self.mark_pod(namespace, f"{CLUSTER}-{shards - 1}-", marks)
            seen = (
                f"state {status.get('state')} (generation {status.get('observedGeneration')} of "
                f"{generation}): {status.get('message', '')}; nodes "
                + ", ".join(f"{n.get('shard')}/{n.get('role')}:{n.get('slots', '')}" for n in nodes)
            )
            if seen != last[0]:  # every change, timed: where the seconds go
                with timeline.open("a") as log:
                    log.write(f"{time.perf_counter() - started:8.2f} s  {seen}\n")
                last[0] = seen
            if status.get("state") != "Active" or status.get("observedGeneration", 0) < generation:
                return NotYet(seen)
            owners: list[Address | None] = [None] * SLOTS
            for n in nodes:
                if n.get("role") != "primary":
                    continue
                for part in filter(None, (n.get("slots") or "").split(",")):
                    start, _, end = part.partition("-")
                    for slot in range(int(start), int(end or start) + 1):
                        owners[slot] = ("overlap", 0) if owners[slot] else (str(n["ip"]), 6379)
            new = next(((str(n["ip"]), 6379) for n in nodes if n.get("shard") == shards - 1), None)
            problem = balanced(owners, shards, new if shards == 4 else None)
            return NotYet(f"{seen} ({problem})") if problem else status

        if not self.operator or not self.operator.alive():
            raise PhaseFailed(f"the operator exited; see {self.log_dir / 'operator.log'}")
        try:
            return await eventually(
                settled, f"{shards} shards Active", deadline - time.monotonic(), interval=POLL
            )
        except WaitTimeout as exc:
            raise PhaseFailed(str(exc)) from None


# -- driver ---------------------------------------------------------------------------------------


def describe_machine() -> str:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cpus ({model}), Linux {platform.release()}"


def fmt(value: float | None) -> str:
    return f"{value:7.2f} s" if value is not None else "    -    "


PHASES = (
    "pod_created",
    "pod_running",
    "pod_ready",
    "meet",
    "new_node",
    "new_node_ok",
    "first_migration",
    "migrating",
    "last_migration",
)
"""The marks a scale-out passes, in order, each in seconds from its start (those a side has)."""


def report_line(side: str, result: Obj) -> str:
    line = f"round {result['round']} {side:8}"
    names = [f"{phase}_seconds" for phase in PHASES] + ["cli_seconds", "load_seconds", "bootstrap_seconds"]
    extra = ", ".join(
        f"{name.removesuffix('_seconds')} {result[name]:.2f} s"
        for name in names
        if result.get(name) is not None
    )
    if result.get("error"):
        return f"{line}: DID NOT FINISH ({extra or 'nothing timed'}): {result['error']}"
    return f"{line}: {fmt(result['seconds'])} ({extra}; {result['keys']} keys verified)"


def rounds_table(document: Obj) -> str:
    """Markdown: each round's ours and floor and their ratio, then the medians (as in docs/performance.md)."""
    ours, floor = document["results"]["ours"], document["results"]["floor"]
    lines = ["| round | ours | floor | ours / floor |", "|---|---|---|---|"]
    for mine, theirs in zip(ours, floor, strict=True):
        lines.append(
            f"| {mine['round']} | {mine['seconds']:.2f} s | {theirs['seconds']:.2f} s | "
            f"{mine['seconds'] / theirs['seconds']:.2f}x |"
        )
    medians, ratios = document["medians"], document["ratios"]
    lines.append(
        f"| median | {medians['ours']:.2f} s | {medians['floor']:.2f} s | {ratios['ours/floor']:.2f}x |"
    )
    return "\n".join(lines)


def phases_table(document: Obj) -> str:
    """Markdown: the median second of each phase, from the start, for ours and the floor."""
    lines = ["| phase (median, s from the start) | ours | floor |", "|---|---|---|"]
    for phase in (*PHASES, "active"):
        cells = []
        for side in ("ours", "floor"):
            key = "seconds" if phase == "active" else f"{phase}_seconds"
            values = [r[key] for r in document["results"][side] if r.get(key) is not None]
            cells.append(f"{statistics.median(values):.2f}" if values else "-")
        lines.append(f"| {phase.replace('_', ' ')} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


async def measure(
    args: argparse.Namespace, image: ImageEntry, sides: Sequence[str], ours: Ours | None, log_dir: Path
) -> dict[str, list[Obj]]:
    """Every round, sides in alternating order; a side that fails is recorded, not fatal."""
    results: dict[str, list[Obj]] = {side: [] for side in sides}
    stamp = time.strftime("%H%M%S")
    for index in range(args.rounds):
        order = list(sides) if index % 2 == 0 else list(sides)[::-1]
        for side in order:
            try:
                if side == "ours":
                    assert ours is not None
                    result = await ours.run(f"bench-scale-{stamp}-{index}", args.keys, args.timeout)
                elif side == "floor":
                    assert ours is not None and ours.kube is not None
                    cli = image.executable("valkey-cli")
                    namespace = f"bench-floor-{stamp}-{index}"
                    result = await run_floor(ours.kube, cli, namespace, args.keys, args.timeout, log_dir)
                else:
                    label = f"round{index + 1}-{side}"
                    result = await run_peer(image, args.keys, side == "atomic", args.timeout, log_dir, label)
            except PhaseFailed as exc:
                result = {"seconds": None, "error": str(exc), **exc.details}
            except Exception as exc:  # report it and go on with the other sides
                result = {"seconds": None, "error": f"{type(exc).__name__}: {exc}"}
            result["round"] = index + 1
            results[side].append(result)
            if not args.json:
                print(report_line(side, result), flush=True)
    return results


def summarize(results: dict[str, list[Obj]]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Medians per side (None unless every round finished) and the ratios between them."""
    medians: dict[str, float | None] = {}
    for side, rounds in results.items():
        done = [r["seconds"] for r in rounds if r.get("seconds") is not None]
        medians[side] = statistics.median(done) if done and len(done) == len(rounds) else None
    ratios: dict[str, float | None] = {}
    pairs = (
        ("ours", "floor"),
        ("ours", "classic"),
        ("ours", "atomic"),
        ("classic", "atomic"),
        ("floor", "atomic"),
    )
    for a, b in pairs:
        if a in medians and b in medians:
            x, y = medians[a], medians[b]
            ratios[f"{a}/{b}"] = x / y if x is not None and y else None
    return medians, ratios


async def drive(args: argparse.Namespace, header: Obj, kubeconfig: str | None, log_dir: Path) -> int:
    image = resolve_image(args.image)
    if image is None:
        raise SystemExit(f"{args.image} is not installed: run `python -m valkey_testbed build`")
    sides = [side for side in SIDES if side in args.sides]
    if "atomic" in sides and not cli_supports_atomic(image.executable("valkey-cli")):
        header["notes"].append(f"{header['valkey_cli']} has no {ATOMIC_FLAG}: the atomic side is skipped")
        sides.remove("atomic")
    if not args.json:
        print(f"{header['date']}, {header['machine']}", flush=True)
        print(f"{args.image}, {header['valkey_cli']}; {args.keys} keys; logs in {log_dir}", flush=True)
        for note in header["notes"]:
            print(f"note: {note}", flush=True)
    async with contextlib.AsyncExitStack() as stack:
        ours: Ours | None = None
        if any(side in ON_TEST_BED for side in sides):
            assert kubeconfig is not None
            ours = await stack.enter_async_context(Ours(kubeconfig, args.image, log_dir))
        results = await measure(args, image, sides, ours, log_dir)
    medians, ratios = summarize(results)
    if args.json:
        document = {**header, "sides": sides, "results": results, "medians": medians, "ratios": ratios}
        print(json.dumps(document, indent=2))
    else:
        print(f"\n3 -> 4 shards, {args.keys} keys, median of {args.rounds} round(s):")
        for side in sides:
            finished = medians[side] is not None
            print(f"  {side:8} {fmt(medians[side])}" + ("" if finished else "  (did not finish)"))
        for name, ratio in ratios.items():
            print(f"  {name:16} " + (f"{ratio:.2f}x" if ratio is not None else "n/a"))
    return 0 if all(value is not None for value in medians.values()) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    parser.add_argument("--timeout", type=float, default=600.0, help="per phase, seconds")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"a subset of {','.join(SIDES)}")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="image catalog reference, both sides")
    parser.add_argument("--kubeconfig", help="a running test bed (with the process kubelet) for `ours`")
    parser.add_argument("--log-dir", help="keep the operator and valkey-cli logs here (default: a temp dir)")
    args = parser.parse_args()
    args.sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    unknown = set(args.sides) - set(SIDES)
    if unknown or args.keys < 1000 or args.rounds < 1:
        parser.error(f"unknown sides {sorted(unknown)}" if unknown else "--keys >= 1000 and --rounds >= 1")
    image = resolve_image(args.image)
    if image is None:
        parser.error(f"{args.image} is not installed: run `python -m valkey_testbed build`")
    cli = [str(image.executable("valkey-cli")), "--version"]
    version = subprocess.run(cli, capture_output=True, text=True, check=True).stdout.strip()
    header: Obj = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": describe_machine(),
        "image": args.image,
        "valkey_cli": version,
        "keys": args.keys,
        "timeout": args.timeout,
        "notes": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as temp:
        log_dir = Path(args.log_dir or temp)
        log_dir.mkdir(parents=True, exist_ok=True)
        if args.kubeconfig or not any(side in ON_TEST_BED for side in args.sides):
            code = asyncio.run(drive(args, header, args.kubeconfig, log_dir))
        else:
            from valkey_testbed.controlplane import ControlPlane

            with ControlPlane(Path(temp) / "plane", nodes=3) as plane:
                code = asyncio.run(drive(args, header, str(plane.kubeconfig), log_dir))
    sys.exit(code)


if __name__ == "__main__":
    main()
