"""Persistence: what each mode costs in SET throughput, and what it buys when every node is lost.

Two parts, in one run, each side measured by the same client:

  throughput  one cluster-enabled valkey-server per mode (none, rdb, aof
              everysec, aof always) started by hand with exactly the
              persistence directives the operator renders for that mode
              (controllers/cluster/render/config.py `persistence_directives`;
              `dir` a real directory on this machine's disk), owning every
              slot; --ops SETs of --value-size bytes over --keyspace keys
              (overwrites after the first pass: the memory stays bounded)
              from --clients connections, each pipelining --pipeline
              commands at a time.
              Modes in alternating order over --rounds rounds; prints the
              median ops/s per mode and its ratio to none.
  recovery    a 3x1 ValkeyCluster created through the operator (running as a
              process on the test bed, real local-path volumes) with
              persistence aof everysec, and one with rdb after a BGSAVE on
              every node, holding --data-mb MB (--gb: 1024) of --value-size
              values written by the bench's pipelined loader (WAIT 1 at the
              end of each connection); then every test-bed node fails and
              recovers (their servers killed, restarted at new IPs from their
              claims). Timed from the moment every node is back until every
              primary serving the 16384 slots answers DBSIZE equal to the keys
              written in its slots (their sum is every key), and a sample of
              values reads back; also shown: from the first failure, and until
              the status is Active. The alternative a cache user has: a 3x1
              cluster of persistence none holding the same data loses every
              node the same way, comes back empty (Active), and the same
              loader writes the data again. Prints the recovery, the empty
              cluster's return and the rewrite, and the ratios recovery /
              rewrite and recovery / (return + rewrite).

    python bench/persistence.py [--parts throughput,recovery] [--modes none,rdb,aof-everysec,aof-always]
        [--ops 3000000] [--keyspace 100000] [--clients 4] [--pipeline 16] [--value-size 1024] [--rounds 3]
        [--data-mb 256 | --gb] [--recover aof-everysec,rdb] [--timeout 900]
        [--json] [--output FILE] [--kubeconfig PATH] [--log-dir DIR]

--output writes the JSON record (date, cores, arguments, results) to FILE:
bench/results/persistence.json is the one docs/performance.md cites, and
tests/unit/test_persistence_bench.py keeps the numbers there equal to it.

Without --kubeconfig a control plane with 3 nodes and the local-path
StorageClass is started in a temporary directory (build it first: `python -m
valkey_testbed build`); the recovery part fails every node of the
test bed it is given. Everything listens on and dials 127.0.0.0/8 only; every
load is a fixed number of keys; the bench stops only the processes it started,
by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from controllers.cluster.render.config import persistence_directives, quote
from controllers.shared.persistence import Persistence
from valkey_operator.api.config import Appendfsync, PersistenceMode
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, PODS
from valkey_operator.core.rest import RestClient
from valkey_testbed import processes, valkeyproc
from valkey_testbed.crds import install_crds
from valkey_testbed.datachecker import SLOTS, check_loopback, key_slot
from valkey_testbed.images import ImageEntry, newest_image, resolve_image, valkey_version
from valkey_testbed.kubelet.control import KubeletControl
from valkey_testbed.operatorproc import start_operator
from valkey_testbed.resp import Arg, Reply, encode_command, read_reply
from valkey_testbed.superuser import SUPERUSER, SUPERUSER_PASSWORD, ensure_role, with_superuser
from valkey_testbed.wait import NotYet, eventually, eventually_blocking

Obj = dict[str, Any]
Address = tuple[str, int]
PARTS = ("throughput", "recovery")
MODES: Mapping[str, Obj] = {
    "none": {"mode": "none"},
    "rdb": {"mode": "rdb"},
    "aof-everysec": {"mode": "aof", "appendfsync": "everysec"},
    "aof-always": {"mode": "aof", "appendfsync": "always"},
}
RECOVERABLE = ("aof-everysec", "rdb")
CLUSTER = "durable"
SHARDS, REPLICAS = 3, 1
NODE_TIMEOUT_MS = 5000
CLAIM_SIZE = "8Gi"
"""local-path does not enforce a size; room for an AOF rewrite of a third of 1 GB beside the old one."""
EVERYSEC_MARGIN = 2.5
"""Seconds between the last acknowledged write and the failure: aof everysec keeps all but ~1 s."""
OK = b"+OK\r\n"
MB = 1024 * 1024


# --- pure helpers ---------------------------------------------------------------------------------


def mode_directives(mode: str) -> list[tuple[str, str]]:
    """The persistence directives the operator renders for mode, without the two paths (dir and
    cluster-config-file): the hand-started server puts both in its own directory on disk."""
    fields = MODES[mode]
    persistence = Persistence(
        mode=PersistenceMode(fields["mode"]),
        appendfsync=Appendfsync(fields["appendfsync"]) if "appendfsync" in fields else None,
    )
    return [
        (key, value)
        for key, value in persistence_directives(persistence)
        if key not in ("dir", "cluster-config-file")
    ]


def server_config(mode: str) -> dict[str, str]:
    """mode_directives as valkey.conf arguments (quoted as the operator's file quotes them)."""
    return {key: quote(value) for key, value in mode_directives(mode)}


def key_count(data_bytes: int, value_size: int) -> int:
    """Keys of value_size bytes that make up data_bytes of values (at least one)."""
    return max(1, data_bytes // value_size)


def key_of(index: int) -> bytes:
    return b"p:%d" % index


def value_of(index: int, size: int) -> bytes:
    """A value that says which key it belongs to, padded to size: a read-back can check it."""
    return (b"%d:" % index).ljust(size, b"v")


def keys_per_slot(count: int) -> list[int]:
    """How many of the keys 0..count-1 fall in each slot."""
    slots = [0] * SLOTS
    for index in range(count):
        slots[key_slot(key_of(index))] += 1
    return slots


def expected_keys(per_slot: Sequence[int], ranges: Sequence[tuple[int, int]]) -> int:
    """The keys a primary owning ranges (inclusive) should hold."""
    return sum(sum(per_slot[start : end + 1]) for start, end in ranges)


def ratios(ops: Mapping[str, float]) -> dict[str, float]:
    """Each mode's ops/s over none's (none absent: empty)."""
    base = ops.get("none")
    return {mode: value / base for mode, value in ops.items()} if base else {}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"a subset of {','.join(PARTS)}")
    parser.add_argument("--modes", default=",".join(MODES), help="throughput: a subset of the modes")
    parser.add_argument("--ops", type=int, default=3_000_000, help="throughput: SETs per mode and round")
    parser.add_argument("--keyspace", type=int, default=100_000, help="throughput: distinct keys")
    parser.add_argument("--clients", type=int, default=4, help="throughput: connections")
    parser.add_argument("--pipeline", type=int, default=16, help="commands in flight per connection")
    parser.add_argument("--value-size", type=int, default=1024, help="bytes per value")
    parser.add_argument("--rounds", type=int, default=3, help="throughput: rounds (alternating order)")
    parser.add_argument("--data-mb", type=int, default=256, help="recovery: MB of values written")
    parser.add_argument("--gb", action="store_true", help="recovery: 1 GB of values (--data-mb 1024)")
    parser.add_argument("--recover", default=",".join(RECOVERABLE), help="recovery: the modes measured")
    parser.add_argument("--timeout", type=float, default=900.0, help="per phase, seconds")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--output", help="also write the JSON record to this file")
    parser.add_argument("--kubeconfig", help="a running test bed with the process kubelet and storage")
    parser.add_argument("--log-dir", help="keep the operator log here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.gb:
        args.data_mb = 1024
    args.parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    args.recover = [mode.strip() for mode in args.recover.split(",") if mode.strip()]
    if not args.parts or set(args.parts) - set(PARTS):
        parser.error(f"--parts from {PARTS}")
    if not args.modes or set(args.modes) - set(MODES):
        parser.error(f"--modes from {tuple(MODES)}")
    if not args.recover or set(args.recover) - set(RECOVERABLE):
        parser.error(f"--recover from {RECOVERABLE}")
    if (
        min(args.ops, args.keyspace, args.clients, args.pipeline, args.rounds, args.data_mb) < 1
        or args.value_size < 16
    ):
        parser.error(
            "--ops, --keyspace, --clients, --pipeline, --rounds, --data-mb >= 1 and --value-size >= 16"
        )
    return args


# --- the client: pipelined SETs on one connection -------------------------------------------------


class Connection:
    """One RESP connection to a loopback server, AUTHed; commands pipelined in fixed-size batches."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float) -> None:
        self.reader, self.writer, self.timeout = reader, writer, timeout

    @classmethod
    async def open(cls, address: Address, auth: Sequence[str] = (), timeout: float = 30.0) -> Connection:
        check_loopback(address[0])
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(*address, limit=4 * MB)
        connection = cls(reader, writer, timeout)
        if auth:
            reply = await connection.command("AUTH", *auth)
            if reply != b"OK":
                connection.close()
                raise ConnectionError(f"AUTH to {address}: {reply!r}")
        return connection

    async def command(self, *args: Arg) -> Reply:
        async with asyncio.timeout(self.timeout):
            self.writer.write(encode_command(list(args)))
            await self.writer.drain()
            return await read_reply(self.reader)

    async def set_all(self, indexes: Sequence[int], value_size: int, pipeline: int, keyspace: int) -> None:
        """SET key_of(k) = value_of(k), k = i mod keyspace, for every index i, pipeline commands in
        flight; any reply but OK (MOVED, OOM, LOADING) stops the bench: it measures a steady server,
        not retries."""
        for start in range(0, len(indexes), pipeline):
            batch = indexes[start : start + pipeline]
            payload = b"".join(
                encode_command([b"SET", key_of(i % keyspace), value_of(i % keyspace, value_size)])
                for i in batch
            )
            async with asyncio.timeout(self.timeout):
                self.writer.write(payload)
                await self.writer.drain()
                replies = await self.reader.readexactly(len(OK) * len(batch))
            if replies != OK * len(batch):
                raise RuntimeError(f"SET replies other than OK: {replies[:200]!r}")

    def close(self) -> None:
        self.writer.close()


# --- part 1: throughput per mode ------------------------------------------------------------------


async def throughput_once(address: Address, args: argparse.Namespace) -> float:
    """ops/s of args.ops SETs from args.clients connections to one server."""
    connections = [await Connection.open(address) for _ in range(args.clients)]
    try:
        shares = [range(c, args.ops, args.clients) for c in range(args.clients)]
        started = time.perf_counter()
        await asyncio.gather(
            *(
                conn.set_all(share, args.value_size, args.pipeline, args.keyspace)
                for conn, share in zip(connections, shares, strict=True)
            )
        )
        seconds = time.perf_counter() - started
    finally:
        for conn in connections:
            conn.close()
    return float(args.ops / seconds)


def measure_mode(mode: str, args: argparse.Namespace, image: ImageEntry) -> Obj:
    """A fresh server for mode, owning every slot, its directory on disk; one timed load."""
    base = valkeyproc.server_base_dir()
    try:
        server = valkeyproc.start_server(
            image, "127.0.0.1", base_dir=base, config=server_config(mode), cluster=True
        )
        try:
            server.command("CLUSTER", "ADDSLOTSRANGE", 0, SLOTS - 1)
            eventually_blocking(lambda: valkeyproc.cluster_ok([server]), "cluster_state:ok", 30, interval=0.1)
            ops = asyncio.run(throughput_once(server.address, args))
            persistence = server.info("persistence")
        finally:
            server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {
        "ops_per_s": ops,
        "aof_rewrites": int(persistence.get("aof_rewrites", 0)),
        "rdb_saves": int(persistence.get("rdb_saves", 0)),
    }


def throughput(args: argparse.Namespace, image: ImageEntry) -> Obj:
    rounds: dict[str, list[Obj]] = {mode: [] for mode in args.modes}
    for index in range(args.rounds):
        for mode in args.modes if index % 2 == 0 else args.modes[::-1]:
            result = measure_mode(mode, args, image)
            rounds[mode].append(result)
            if not args.json:
                print(
                    f"round {index + 1} {mode:12}: {result['ops_per_s']:9,.0f} SET/s "
                    f"(rdb saves {result['rdb_saves']}, aof rewrites {result['aof_rewrites']})",
                    flush=True,
                )
    medians = {mode: statistics.median(r["ops_per_s"] for r in results) for mode, results in rounds.items()}
    return {"rounds": rounds, "ops_per_s": medians, "ratio_to_none": ratios(medians)}


# --- part 2: recovery through the operator --------------------------------------------------------


class Recovery:
    """The test bed, the operator as a process, and one ValkeyImage for the run's clusters."""

    def __init__(self, kubeconfig: str, state_dir: Path, log_dir: Path, args: argparse.Namespace) -> None:
        self.kubeconfig, self.log_dir, self.args = kubeconfig, log_dir, args
        self.kubelet = KubeletControl(state_dir)
        self.stamp = time.strftime("%H%M%S")
        self.reference = newest_image()
        self.count = key_count(args.data_mb * MB, args.value_size)
        self.per_slot = keys_per_slot(self.count)
        self.api: k8s.ApiClient | None = None
        self.kube: Client | None = None
        self.operator: processes.ProcessRecord | None = None

    async def __aenter__(self) -> Recovery:
        try:
            configuration = k8s.Configuration()
            await k8s_config.load_kube_config(config_file=self.kubeconfig, client_configuration=configuration)
            self.api = k8s.ApiClient(configuration)
            self.kube = Client(RestClient(self.api), field_manager="bench")
            await install_crds(self.kube)
            self.operator = start_operator(self.kubeconfig, self.log_dir)
            repository, _, tag = self.reference.rpartition(":")
            spec = {"repository": repository, "tag": tag, "version": valkey_version(self.reference)}
            await self.client.create(VALKEY_IMAGES, custom(VALKEY_IMAGES.kind, self.name("img"), spec))
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.operator is not None:
            processes.stop([self.operator])
        if self.kube is not None:
            with contextlib.suppress(Exception):
                await self.kube.delete(VALKEY_IMAGES, self.name("img"))
        if self.api is not None:
            await self.api.close()

    def name(self, what: str) -> str:
        return f"bench-persist-{self.stamp}-{what}"

    @property
    def client(self) -> Client:
        assert self.kube is not None
        return self.kube

    @contextlib.asynccontextmanager
    async def cluster(self, mode: str) -> Any:
        """A 3x1 cluster of mode in a fresh namespace, Active; yields (namespace, auth); deleted after."""
        namespace = config = self.name(mode)
        persistence = {**MODES[mode], **({"size": CLAIM_SIZE} if mode != "none" else {})}
        kube = self.client
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        spec = {
            "imageRef": self.name("img"),
            "valkey": {"cluster-node-timeout": str(NODE_TIMEOUT_MS)},
            "persistence": persistence,
        }
        await kube.create(VALKEY_CONFIGS, custom(VALKEY_CONFIGS.kind, config, spec))
        try:
            body = {
                "apiVersion": VALKEY_CLUSTERS.api_version,
                "kind": VALKEY_CLUSTERS.kind,
                "metadata": {"name": CLUSTER, "namespace": namespace},
                "spec": with_superuser({"configRef": config, "shards": SHARDS, "replicasPerShard": REPLICAS}),
            }
            await ensure_role(kube)
            await kube.create(VALKEY_CLUSTERS, body)
            await self.active(namespace)
            yield namespace, (SUPERUSER, SUPERUSER_PASSWORD)
        finally:
            with contextlib.suppress(Exception):
                await kube.delete(VALKEY_CLUSTERS, CLUSTER, namespace)
                await eventually(lambda: self.gone(namespace), f"{namespace} pods gone", 120, interval=1.0)
                await kube.delete(NAMESPACES, namespace)
                await kube.delete(VALKEY_CONFIGS, config)

    async def gone(self, namespace: str) -> bool:
        return not await self.client.list(PODS, namespace)

    async def active(self, namespace: str) -> Obj:
        async def done() -> Obj | NotYet:
            cluster = await self.client.get(VALKEY_CLUSTERS, CLUSTER, namespace)
            status: Obj = cluster.get("status") or {}
            current = status.get("observedGeneration") == cluster["metadata"]["generation"]
            ready = current and status.get("state") == "Active" and len(status.get("nodes") or []) == 6
            return status if ready else NotYet(status.get("message"))

        return await eventually(done, f"{namespace}/{CLUSTER} Active", self.args.timeout, interval=0.25)

    async def pod_ips(self, namespace: str) -> list[str]:
        pods = await self.client.list(PODS, namespace)
        return [pod["status"]["podIP"] for pod in pods if (pod.get("status") or {}).get("podIP")]

    async def slot_map(self, ips: Sequence[str], auth: Sequence[str]) -> dict[Address, list[tuple[int, int]]]:
        """Primary address -> its slot ranges, from the first node that answers CLUSTER SLOTS."""
        for ip in ips:
            try:
                conn = await Connection.open((ip, 6379), auth, timeout=5.0)
            except (OSError, TimeoutError, ConnectionError):
                continue
            try:
                reply = await conn.command("CLUSTER", "SLOTS")
            except (OSError, TimeoutError, ConnectionError, asyncio.IncompleteReadError):
                continue
            finally:
                conn.close()
            if not isinstance(reply, list):
                continue
            owners: dict[Address, list[tuple[int, int]]] = {}
            for entry in reply:
                assert isinstance(entry, list), entry
                start, end, node = entry[0], entry[1], entry[2]
                assert isinstance(start, int) and isinstance(end, int) and isinstance(node, list)
                host = node[0].decode() if isinstance(node[0], bytes) else ip
                owners.setdefault((host, int(str(node[1]))), []).append((start, end))
            return owners
        return {}

    async def load(self, namespace: str, auth: Sequence[str]) -> float:
        """Seconds to write every key, one connection per primary, then WAIT 1 on each."""
        owners = await self.slot_map(await self.pod_ips(namespace), auth)
        slot_owner: dict[int, Address] = {
            slot: address
            for address, ranges in owners.items()
            for start, end in ranges
            for slot in range(start, end + 1)
        }
        assert len(slot_owner) == SLOTS, f"{len(slot_owner)} slots served"
        shares: dict[Address, list[int]] = {address: [] for address in owners}
        for index in range(self.count):
            shares[slot_owner[key_slot(key_of(index))]].append(index)
        connections = {address: await Connection.open(address, auth, timeout=60.0) for address in owners}
        try:
            started = time.perf_counter()

            async def write(address: Address) -> None:
                conn = connections[address]
                await conn.set_all(shares[address], self.args.value_size, self.args.pipeline, self.count)
                waited = await conn.command("WAIT", REPLICAS, 60_000)
                if waited != REPLICAS:
                    raise RuntimeError(f"WAIT {REPLICAS} on {address}: {waited!r}")

            await asyncio.gather(*(write(address) for address in owners))
            return time.perf_counter() - started
        finally:
            for conn in connections.values():
                conn.close()

    async def served(self, namespace: str, auth: Sequence[str]) -> bool | NotYet:
        """Every slot has a primary whose DBSIZE is exactly the keys written in its slots, and a
        sample of 200 keys per primary reads back as written."""
        owners = await self.slot_map(await self.pod_ips(namespace), auth)
        covered = sum(end - start + 1 for ranges in owners.values() for start, end in ranges)
        if covered != SLOTS:
            return NotYet(f"{covered} slots served")
        seen: dict[Address, object] = {}
        for address, ranges in owners.items():
            wanted = expected_keys(self.per_slot, ranges)
            try:
                conn = await Connection.open(address, auth, timeout=5.0)
                try:
                    size = await conn.command("DBSIZE")
                    if size != wanted:
                        seen[address] = (size, wanted)
                        continue
                    slots = {slot for start, end in ranges for slot in range(start, end + 1)}
                    drawn = random.sample(range(self.count), min(self.count, 5000))
                    sample = [i for i in drawn if key_slot(key_of(i)) in slots][:200]
                    for index in sample:
                        got = await conn.command("GET", key_of(index))
                        if got != value_of(index, self.args.value_size):
                            return NotYet(f"{address}: key {index} reads {got!r:.60}")
                finally:
                    conn.close()
            except (OSError, TimeoutError, ConnectionError, asyncio.IncompleteReadError) as exc:
                seen[address] = repr(exc)
        return True if not seen else NotYet(seen)

    async def bgsave(self, namespace: str, auth: Sequence[str]) -> None:
        """A completed save on every node: what rdb keeps."""
        for ip in await self.pod_ips(namespace):
            conn = await Connection.open((ip, 6379), auth)
            try:
                await conn.command("BGSAVE")

                async def saved(conn: Connection = conn) -> bool:
                    reply = await conn.command("INFO", "persistence")
                    text = reply.decode() if isinstance(reply, bytes) else ""
                    return "rdb_bgsave_in_progress:0" in text and "rdb_last_bgsave_status:ok" in text

                await eventually(saved, f"BGSAVE on {ip}", self.args.timeout, interval=0.5)
            finally:
                conn.close()

    async def lose_every_node(self, namespace: str) -> tuple[float, float]:
        """Fail every test-bed node, wait for the operator to see the cluster down, recover them all;
        returns (first failure, every node back) on the monotonic clock."""
        hosts = sorted(node["name"] for node in (await self.kubelet.status())["nodes"])
        failed: list[str] = []
        first_failure = time.monotonic()
        try:
            for host in hosts:
                await self.kubelet.fail_node(host)
                failed.append(host)

            async def down() -> bool:
                status = (await self.client.get(VALKEY_CLUSTERS, CLUSTER, namespace)).get("status") or {}
                return status.get("state") != "Active"

            await eventually(down, "the operator to see the cluster down", 120, interval=0.25)
        finally:  # the test bed keeps its nodes, whatever happens here
            for host in failed:
                await self.kubelet.recover_node(host)
        return first_failure, time.monotonic()

    async def blackout(self, namespace: str, auth: Sequence[str]) -> Obj:
        """Every node lost and back; time until every slot is served with its data, and until Active."""
        first_failure, back = await self.lose_every_node(namespace)
        await eventually(
            lambda: self.served(namespace, auth),
            "every slot served with its data",
            self.args.timeout,
            interval=0.25,
        )
        served = time.monotonic()
        await asyncio.sleep(1.0)  # a pass after the recovery, before asking for Active
        await self.active(namespace)
        active = time.monotonic()
        return {
            "down_s": back - first_failure,
            "served_s": served - back,
            "served_from_failure_s": served - first_failure,
            "active_s": active - back,
        }

    async def measure(self, mode: str) -> Obj:
        async with self.cluster(mode) as (namespace, auth):
            load = await self.load(namespace, auth)
            if mode == "rdb":
                await self.bgsave(namespace, auth)
            else:
                await asyncio.sleep(EVERYSEC_MARGIN)
            check = await self.served(namespace, auth)
            assert check is True, f"before the failure: {check}"
            return {"load_s": load, **await self.blackout(namespace, auth)}

    async def cache(self) -> Obj:
        """The cache user's side: a persistence-none cluster holding the data loses every node, comes
        back empty (Active), and the data is written again."""
        async with self.cluster("none") as (namespace, auth):
            load = await self.load(namespace, auth)
            _, back = await self.lose_every_node(namespace)
            await asyncio.sleep(1.0)  # a pass after the recovery, before asking for Active
            await self.active(namespace)
            empty = time.monotonic() - back
            rewrite = await self.load(namespace, auth)
            check = await self.served(namespace, auth)
            assert check is True, f"after the rewrite: {check}"
            return {"load_s": load, "back_empty_s": empty, "rewrite_s": rewrite}


def custom(kind: str, name: str, spec: Obj) -> Obj:
    """A cluster-scoped object of ours (the API server wants apiVersion and kind on a create)."""
    return {"apiVersion": VALKEY_CLUSTERS.api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


async def recovery(args: argparse.Namespace, kubeconfig: str, state_dir: Path, log_dir: Path) -> Obj:
    async with Recovery(kubeconfig, state_dir, log_dir, args) as bench:
        result: Obj = {"keys": bench.count, "data_mb": args.data_mb, "modes": {}}
        for mode in args.recover:
            measured = await bench.measure(mode)
            result["modes"][mode] = measured
            if not args.json:
                print(
                    f"{mode:12}: loaded in {measured['load_s']:.1f} s; every node down for "
                    f"{measured['down_s']:.1f} s; every slot served with its data "
                    f"{measured['served_s']:.1f} s after the nodes were back "
                    f"({measured['served_from_failure_s']:.1f} s after the first failure), "
                    f"Active after {measured['active_s']:.1f} s",
                    flush=True,
                )
        cache = await bench.cache()
        result["cache"], result["rewrite_s"] = cache, cache["rewrite_s"]
        if not args.json:
            print(
                f"none (a cache): loaded in {cache['load_s']:.1f} s; after every node was lost, Active "
                f"(empty) {cache['back_empty_s']:.1f} s after the nodes were back, then the data written "
                f"again in {cache['rewrite_s']:.1f} s",
                flush=True,
            )
    cache_total = result["cache"]["back_empty_s"] + result["rewrite_s"]
    result["served_over_rewrite"] = {
        mode: measured["served_s"] / result["rewrite_s"] for mode, measured in result["modes"].items()
    }
    result["served_over_cache"] = {
        mode: measured["served_s"] / cache_total for mode, measured in result["modes"].items()
    }
    return result


# --- driver ---------------------------------------------------------------------------------------


def report(record: Obj) -> None:
    args = record["args"]
    if "throughput" in record:
        part = record["throughput"]
        print(
            f"\nSET throughput, {args['ops']:,} SETs of {args['value_size']} B, {args['clients']} clients x "
            f"pipeline {args['pipeline']}, median of {args['rounds']}:"
        )
        for mode, ops in part["ops_per_s"].items():
            ratio = part["ratio_to_none"].get(mode)
            print(f"  {mode:12} {ops:9,.0f} SET/s" + (f"  {ratio:.2f}x none" if ratio else ""))
    if "recovery" in record:
        part = record["recovery"]
        print(f"\nRecovery of a 3x1 cluster holding {part['data_mb']} MB ({part['keys']:,} keys):")
        cache = part["cache"]
        print(
            f"  none (cache) back empty {cache['back_empty_s']:.1f} s after the nodes came back, "
            f"rewrite {part['rewrite_s']:.1f} s: {cache['back_empty_s'] + part['rewrite_s']:.1f} s in all"
        )
        for mode, measured in part["modes"].items():
            print(
                f"  {mode:12} every slot served with its data {measured['served_s']:.1f} s after the nodes "
                f"came back; recovery / rewrite {part['served_over_rewrite'][mode]:.2f}x, recovery / "
                f"(back empty + rewrite) {part['served_over_cache'][mode]:.2f}x"
            )


def main() -> None:
    args = parse_args()
    reference = newest_image()
    image = resolve_image(reference)
    if image is None:
        sys.exit(f"{reference} is not installed: run `python -m valkey_testbed build`")
    record: Obj = {
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "image": reference,
        "args": {
            name: value
            for name, value in vars(args).items()
            if name not in ("kubeconfig", "log_dir", "output", "json")
        },
    }
    if "throughput" in args.parts:
        record["throughput"] = throughput(args, image)
    if "recovery" in args.parts:
        with tempfile.TemporaryDirectory(prefix="bench-persistence-") as temp:
            log_dir = Path(args.log_dir or temp)
            log_dir.mkdir(parents=True, exist_ok=True)
            if args.kubeconfig:
                state_dir = Path(args.kubeconfig).resolve().parent
                record["recovery"] = asyncio.run(recovery(args, args.kubeconfig, state_dir, log_dir))
            else:
                from valkey_testbed.controlplane import ControlPlane

                with ControlPlane(Path(temp) / "plane", nodes=3) as plane:
                    record["recovery"] = asyncio.run(
                        recovery(args, str(plane.kubeconfig), plane.state_dir, log_dir)
                    )
    record["load_average"] = [round(value, 2) for value in os.getloadavg()]  # at the end: a shared machine?
    if args.output:
        Path(args.output).write_text(json.dumps(record, indent=2) + "\n")
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        report(record)


if __name__ == "__main__":
    main()
