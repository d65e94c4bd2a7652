"""Backups and restores: throughput against the floor, and the write gap a client sees, in one run.

A 3x1 ValkeyCluster of the newest catalog image, created through the operator
(a process on the test bed), holds about --gigabytes GB of --value-size values
(pipelined SETs, one connection per primary, WAIT 1 at the end). The test
bed's S3 server (versitygw on 127.0.0.1, its posix backend on this machine's
disk) receives the backups. Each of --rounds rounds, ours and the floor in
alternating order:

  backup          a ValkeyBackup of the cluster; MB/s = status.totalBytes over
                  completedAt - startedAt (whole seconds, as the status has
                  them) and over the wall time from the create to Completed.
  backup floor    for each shard, one after another (the operator streams two at once):
                  the image's own `valkey-cli --rdb` from the node the backup
                  read (status.shards[].sourcePod) into a file on /dev/shm,
                  then that file uploaded with the same S3 client
                  (valkey_operator.objectstore, the same part size); MB/s of
                  the whole sequence. Delay-free: the node's
                  repl-diskless-sync-delay is set to 0 just before
                  valkey-cli starts and back to 5 once it has ended, so the
                  floor does not wait Valkey's 5 s per shard (the operator
                  lowers it for its own SYNC the same way).
  write gap       while the backup runs, a WAIT 0 writer (the test bed's
                  DataChecker, one connection per primary, one key at a time)
                  writes to every shard; its longest gap between acknowledged
                  writes per shard, next to the same writer's for as long
                  with no backup running (the baseline), in the same round.
  restore         a new 3x0 cluster with spec.restore from that backup; MB/s =
                  the backup's bytes over the time from the create to
                  status.restore.phase Verified, and to state Active.
  restore floor   the 3 objects downloaded concurrently with the same client
                  (sha256 checked, as restore-fetch does), then a cluster-
                  enabled valkey-server of the same image started on each file
                  until it has loaded it (loading:0 and DBSIZE = the shard's
                  keys); MB/s to the downloads' end and to every server loaded;
                  then made one cluster (each server owns the slots it loaded
                  keys for, as Valkey does at start; MEET the first, every one
                  cluster_state:ok): MB/s to
                  that too, the floor of a restore that ends in a serving
                  cluster (Valkey keeps a primary that starts failed from
                  reporting ok for 2 s).

Prints each round, then the medians and the ratios ours/floor.

    python bench/backup.py [--gigabytes 1.0] [--rounds 3] [--value-size 1024]
        [--operator-checkout DIR] [--output bench/results/backup.json] [--kubeconfig PATH] [--log-dir DIR]

`--operator-checkout DIR` runs the operator from another checkout
(PYTHONPATH=DIR: an earlier revision measured against the same floor, on the
same machine, in the same conditions).

Without --kubeconfig a control plane with 3 nodes is started in a temporary
directory (build the test bed first: `python -m valkey_testbed
build`); the S3 server is built if missing and started either way.
Everything listens on and dials 127.0.0.0/8 only; every load is bounded; the
bench stops only the processes it started, by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from persistence import MB, OK, Connection, key_count, key_of

from valkey_operator.api.resources import (
    VALKEY_BACKUPS,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
)
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, PODS, SECRETS
from valkey_operator.core.rest import RestClient
from valkey_operator.objectstore import ANY_ADDRESS
from valkey_operator.objectstore.model import Destination, S3Credentials
from valkey_operator.objectstore.store import open_store
from valkey_testbed import objectstore, processes, valkeyproc
from valkey_testbed.crds import install_crds
from valkey_testbed.datachecker import SLOTS, DataChecker, WriterReport, key_slot
from valkey_testbed.images import (
    OPERATOR_IMAGE,
    ImageEntry,
    newest_image,
    resolve_image,
    valkey_version,
)
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.operatorproc import operator_argv, start_operator
from valkey_testbed.resp import ReplyError, encode_command
from valkey_testbed.superuser import SUPERUSER, SUPERUSER_PASSWORD, ensure_role, with_superuser
from valkey_testbed.wait import NotYet, eventually

Obj = dict[str, Any]
Address = tuple[str, int]
SOURCE, RESTORED = "source", "restored"
SHARDS, REPLICAS = 3, 1
NODE_TIMEOUT_MS = 5000
CHUNK = 1024 * 1024
SYNC_DELAY, VALKEY_SYNC_DELAY = "repl-diskless-sync-delay", "5"
"""The floor's node setting: 0 while valkey-cli runs, then Valkey's default again."""
WRITER_MAX_KEYS = 2_000_000
"""The gap writer stops after this many keys whatever happens (every load is bounded)."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--gigabytes", type=float, default=1.0, help="GB (2^30 bytes) of values")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (ours and the floor alternate)")
    parser.add_argument("--value-size", type=int, default=1024, help="bytes per value")
    parser.add_argument("--pipeline", type=int, default=16, help="loader: commands in flight")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per phase, seconds")
    parser.add_argument("--operator-checkout", help="run the operator from this checkout (PYTHONPATH)")
    parser.add_argument("--output", help="also write the JSON record to this file")
    parser.add_argument("--kubeconfig", help="a running test bed (default: start one)")
    parser.add_argument("--log-dir", help="keep the operator log here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.gigabytes <= 0 or args.rounds < 1 or args.value_size < 16:
        parser.error("--gigabytes > 0, --rounds >= 1, --value-size >= 16")
    return args


def rate(nbytes: int, seconds: float) -> float:
    """MB/s (10^6 bytes), 0 for a zero duration (a status whose times fall in one second)."""
    return nbytes / seconds / 1e6 if seconds > 0 else 0.0


def status_seconds(status: Obj) -> float:
    """completedAt - startedAt of a backup status (whole seconds)."""
    parse = datetime.fromisoformat
    return (parse(status["completedAt"]) - parse(status["startedAt"])).total_seconds()


def shard_gaps(report: WriterReport) -> list[float]:
    """The writer's longest gap per shard, shards in slot order (labels are "start-end[,...]")."""
    labels = sorted(report.gaps_by_slots, key=lambda label: int(label.split("-", 1)[0]))
    return [report.gaps_by_slots[label] for label in labels]


def operator_image() -> None:
    """Install this checkout's valkey-operator:dev image (restore-fetch runs it) when missing: a
    test-bed image per checkout, which `python -m valkey_testbed build` makes for the
    checkout it runs from only."""
    from valkey_testbed import images

    prefix = images.image_prefix()
    wanted = images._operator_name()
    with images._locked(prefix / ".lock", print):
        for component in images._components(prefix, images.tls_build(prefix)):
            if component.name == wanted:
                images._install(prefix, component, print)


NOISE = random.Random(24).randbytes(MB)
"""Values are slices of this: random bytes, so the RDB (rdbcompression yes, the default) is as large
as the data rather than a few percent of it."""


def value_of(index: int, size: int) -> bytes:
    """size bytes that start with the key's index and go on incompressibly."""
    head = b"%d:" % index
    start = index * 7919 % (len(NOISE) - size)
    return head + NOISE[start : start + size - len(head)]


async def set_all(conn: Connection, indexes: Sequence[int], value_size: int, pipeline: int) -> None:
    """SET key_of(i) = value_of(i) for every index, pipeline commands in flight; any reply but OK
    stops the bench."""
    for start in range(0, len(indexes), pipeline):
        batch = indexes[start : start + pipeline]
        payload = b"".join(encode_command([b"SET", key_of(i), value_of(i, value_size)]) for i in batch)
        async with asyncio.timeout(conn.timeout):
            conn.writer.write(payload)
            await conn.writer.drain()
            replies = await conn.reader.readexactly(len(OK) * len(batch))
        if replies != OK * len(batch):
            raise RuntimeError(f"SET replies other than OK: {replies[:200]!r}")


def custom(kind: str, name: str, spec: Obj) -> Obj:
    """A cluster-scoped object of ours (the API server wants apiVersion and kind on a create)."""
    return {"apiVersion": VALKEY_CLUSTERS.api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


async def file_chunks(path: Path) -> AsyncIterator[bytes]:
    """path in CHUNK pieces (a tmpfs file: reads do not block for long)."""
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            yield chunk


class Bench:
    """The test bed, the operator as a process, the S3 server, and the source cluster."""

    def __init__(self, kubeconfig: str, log_dir: Path, store: ObjectStoreServer, args: argparse.Namespace):
        self.kubeconfig, self.log_dir, self.store, self.args = kubeconfig, log_dir, store, args
        self.stamp = time.strftime("%H%M%S")
        self.namespace = f"bench-backup-{self.stamp}"
        self.reference = newest_image()
        image = resolve_image(self.reference)
        assert image is not None, self.reference
        self.image: ImageEntry = image
        self.bucket = store.create_bucket()
        self.api: k8s.ApiClient | None = None
        self.kube: Client | None = None
        self.operator: processes.ProcessRecord | None = None
        self.sources: list[Obj] = []
        self.checkout = Path(args.operator_checkout).resolve() if args.operator_checkout else None
        """Another checkout whose operator runs (--operator-checkout; None: this one's)."""

    @property
    def client(self) -> Client:
        assert self.kube is not None
        return self.kube

    def name(self, what: str) -> str:
        return f"{self.namespace}-{what}"

    async def __aenter__(self) -> Bench:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        configuration = k8s.Configuration()
        await k8s_config.load_kube_config(config_file=self.kubeconfig, client_configuration=configuration)
        self.api = k8s.ApiClient(configuration)
        self.kube = kube = Client(RestClient(self.api), field_manager="bench")
        await install_crds(kube)
        argv = operator_argv(self.kubeconfig, f"--operator-image={OPERATOR_IMAGE}")  # restore-fetch's image
        self.operator = start_operator(self.kubeconfig, self.log_dir, checkout=self.checkout, argv=argv)
        repository, _, tag = self.reference.rpartition(":")
        spec = {"repository": repository, "tag": tag, "version": valkey_version(self.reference)}
        await kube.create(VALKEY_IMAGES, custom(VALKEY_IMAGES.kind, self.name("img"), spec))
        config = {"imageRef": self.name("img"), "valkey": {"cluster-node-timeout": str(NODE_TIMEOUT_MS)}}
        await kube.create(VALKEY_CONFIGS, custom(VALKEY_CONFIGS.kind, self.name("cfg"), config))
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        await kube.create(NAMESPACES, namespace)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s3", "namespace": self.namespace},
            "stringData": {
                "AWS_ACCESS_KEY_ID": self.store.access_key_id,
                "AWS_SECRET_ACCESS_KEY": self.store.secret_access_key,
            },
        }
        await kube.create(SECRETS, secret)

    async def __aexit__(self, *exc: object) -> None:
        if self.kube is not None:
            with contextlib.suppress(Exception):
                for name in (SOURCE, RESTORED):
                    with contextlib.suppress(Exception):
                        await self.kube.delete(VALKEY_CLUSTERS, name, self.namespace)
                await eventually(self.no_pods, "the bench's pods gone", 180, interval=1.0)
                await self.kube.delete(NAMESPACES, self.namespace)
        if self.operator is not None:
            processes.stop([self.operator])
        if self.kube is not None:
            for resource, what in ((VALKEY_CONFIGS, "cfg"), (VALKEY_IMAGES, "img")):
                with contextlib.suppress(Exception):
                    await self.kube.delete(resource, self.name(what))
        if self.api is not None:
            await self.api.close()

    async def no_pods(self, cluster: str | None = None) -> bool:
        pods = await self.client.list(PODS, self.namespace)
        return not [
            pod for pod in pods if cluster is None or pod["metadata"]["name"].startswith(f"{cluster}-")
        ]

    # --- clusters ---

    async def create_cluster(self, name: str, shards: int, replicas: int, restore: str | None) -> None:
        spec: Obj = {"configRef": self.name("cfg"), "shards": shards, "replicasPerShard": replicas}
        if restore is not None:
            spec["restore"] = {"backupName": restore}
        await ensure_role(self.client)
        spec = with_superuser(spec)  # the bench's data user: the operator's admin user touches no key
        body = {
            "apiVersion": VALKEY_CLUSTERS.api_version,
            "kind": VALKEY_CLUSTERS.kind,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": spec,
        }
        await self.client.create(VALKEY_CLUSTERS, body)

    async def status(self, name: str) -> Obj:
        cluster = await self.client.get(VALKEY_CLUSTERS, name, self.namespace)
        status: Obj = cluster.get("status") or {}
        status["_current"] = (
            status.get("observedGeneration") == cluster["metadata"]["generation"]
            and status.get("shards") == cluster["spec"]["shards"]
        )
        return status

    async def active(self, name: str, nodes: int) -> Obj:
        async def done() -> Obj | NotYet:
            status = await self.status(name)
            ready = status["_current"] and status.get("state") == "Active"
            return (
                status if ready and len(status.get("nodes") or []) == nodes else NotYet(status.get("message"))
            )

        return await eventually(done, f"{name} Active", self.args.timeout, interval=0.25)

    async def pod_ip(self, name: str) -> str:
        pod = await self.client.get(PODS, name, self.namespace)
        return str(pod["status"]["podIP"])

    async def primaries(self, status: Obj) -> list[Address]:
        return [(node["ip"], 6379) for node in status["nodes"] if node.get("role") == "primary"]

    async def slot_owners(self, status: Obj) -> dict[Address, list[tuple[int, int]]]:
        for address in await self.primaries(status):
            conn = await Connection.open(address, (SUPERUSER, SUPERUSER_PASSWORD), timeout=10.0)
            try:
                reply = await conn.command("CLUSTER", "SLOTS")
            finally:
                conn.close()
            assert isinstance(reply, list), reply
            owners: dict[Address, list[tuple[int, int]]] = {}
            for entry in reply:
                assert isinstance(entry, list)
                start, end, node = entry[0], entry[1], entry[2]
                assert isinstance(start, int) and isinstance(end, int) and isinstance(node, list)
                host = node[0].decode() if isinstance(node[0], bytes) else address[0]
                owners.setdefault((host, int(str(node[1]))), []).append((start, end))
            return owners
        raise RuntimeError("no primary answered CLUSTER SLOTS")

    async def load(self, status: Obj, count: int) -> float:
        """Seconds to write keys 0..count-1, one pipelined connection per primary, then WAIT 1."""
        owners = await self.slot_owners(status)
        slot_owner = {
            slot: address for address, ranges in owners.items() for a, b in ranges for slot in range(a, b + 1)
        }
        assert len(slot_owner) == SLOTS, f"{len(slot_owner)} slots served"
        shares: dict[Address, list[int]] = {address: [] for address in owners}
        for index in range(count):
            shares[slot_owner[key_slot(key_of(index))]].append(index)
        auth = (SUPERUSER, SUPERUSER_PASSWORD)
        connections = {address: await Connection.open(address, auth, timeout=120.0) for address in owners}
        try:
            started = time.perf_counter()

            async def write(address: Address) -> None:
                conn = connections[address]
                await set_all(conn, shares[address], self.args.value_size, self.args.pipeline)
                waited = await conn.command("WAIT", REPLICAS, 120_000)
                if waited != REPLICAS:
                    raise RuntimeError(f"WAIT {REPLICAS} on {address}: {waited!r}")

            await asyncio.gather(*(write(address) for address in owners))
            return time.perf_counter() - started
        finally:
            for conn in connections.values():
                conn.close()

    async def source(self) -> Obj:
        """The 3x1 source cluster, Active and loaded; returns its status."""
        await self.create_cluster(SOURCE, SHARDS, REPLICAS, None)
        status = await self.active(SOURCE, SHARDS * (1 + REPLICAS))
        count = key_count(int(self.args.gigabytes * 1024 * MB), self.args.value_size)
        seconds = await self.load(status, count)
        print(f"loaded {count:,} keys of {self.args.value_size} B in {seconds:.1f} s", flush=True)
        return status

    def checker(self, status: Obj, prefix: str) -> DataChecker:
        seeds = [(node["ip"], 6379) for node in status["nodes"] if node.get("role") == "primary"]
        return DataChecker(seeds, replicas=0, username=SUPERUSER, password=SUPERUSER_PASSWORD, prefix=prefix)

    # --- backup: ours ---

    async def backup(self, status: Obj, name: str) -> Obj:
        """A ValkeyBackup with the gap writer running; its status, wall time and the writer's report."""
        body = {
            "apiVersion": VALKEY_BACKUPS.api_version,
            "kind": VALKEY_BACKUPS.kind,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "clusterName": SOURCE,
                "destination": {
                    "endpoint": self.store.endpoint,
                    "bucket": self.bucket,
                    "credentialsSecretName": "s3",
                    "path": "ours",
                },
            },
        }
        stop = asyncio.Event()
        async with self.checker(status, f"gap-{name}") as checker:
            writer = asyncio.create_task(
                checker.run_writer(max_keys=WRITER_MAX_KEYS, duration=self.args.timeout, stop=stop)
            )
            await asyncio.sleep(1.0)  # the writer settled: its first gap is not the backup's
            started = time.monotonic()
            await self.client.create(VALKEY_BACKUPS, body)

            async def done() -> Obj | NotYet:
                backup = await self.client.get(VALKEY_BACKUPS, name, self.namespace)
                found: Obj = backup.get("status") or {}
                return (
                    found if found.get("phase") in ("Completed", "Failed") else NotYet(found.get("message"))
                )

            try:
                result = await eventually(
                    done, f"ValkeyBackup {name} finished", self.args.timeout, interval=0.25
                )
                wall = time.monotonic() - started
            finally:
                stop.set()
                report = await writer
        if result["phase"] != "Completed":
            raise RuntimeError(f"backup {name}: {result}")
        return {"status": result, "wall_s": wall, "writer": report}

    async def baseline(self, status: Obj, seconds: float) -> WriterReport:
        """The same writer for seconds with no backup running."""
        async with self.checker(status, "gap-baseline") as checker:
            return await checker.run_writer(max_keys=WRITER_MAX_KEYS, duration=seconds)

    # --- backup: the floor ---

    def cli(self, ip: str, target: Path) -> list[str]:
        return [
            str(self.image.executable("valkey-cli")), "-h", ip, "-p", "6379",
            "--user", SUPERUSER, "--pass", SUPERUSER_PASSWORD, "--no-auth-warning", "--rdb", str(target),
        ]  # fmt: skip

    async def floor_backup(self, shards: Sequence[Obj], round_: int) -> Obj:
        """valkey-cli --rdb then an upload, shard after shard; seconds and bytes (and per step)."""
        destination = Destination(endpoint=self.store.endpoint, bucket=self.bucket, path="floor")
        credentials = S3Credentials(
            access_key_id=self.store.access_key_id, secret_access_key=self.store.secret_access_key
        )
        env = {"PATH": f"{self.image.bin_dir}:/usr/bin:/bin", **self.image.env}
        total = 0
        fetch_s = upload_s = 0.0
        with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="bench-backup-") as directory:
            started = time.monotonic()
            async with open_store(destination, credentials, endpoints=ANY_ADDRESS) as store:
                for shard in shards:
                    ip = await self.pod_ip(shard["sourcePod"])
                    target = Path(directory) / f"shard-{shard['index']}.rdb"
                    step = time.monotonic()
                    admin = await Connection.open((ip, 6379), (SUPERUSER, SUPERUSER_PASSWORD))
                    try:
                        await admin.command("CONFIG", "SET", SYNC_DELAY, "0")
                        process = await asyncio.create_subprocess_exec(
                            *self.cli(ip, target),
                            env=env,
                            stdout=asyncio.subprocess.PIPE,
                            stderr=asyncio.subprocess.STDOUT,
                        )
                        output, _ = await asyncio.wait_for(process.communicate(), self.args.timeout)
                    finally:
                        await admin.command("CONFIG", "SET", SYNC_DELAY, VALKEY_SYNC_DELAY)
                        admin.close()
                    if process.returncode != 0:
                        raise RuntimeError(f"valkey-cli --rdb from {ip}: {output.decode(errors='replace')}")
                    uploading = time.monotonic()
                    fetch_s += uploading - step
                    key = store.key(f"round-{round_}", target.name)
                    uploaded = await store.upload(key, file_chunks(target))
                    upload_s += time.monotonic() - uploading
                    total += uploaded.bytes
                    target.unlink()
            seconds = time.monotonic() - started
        return {"bytes": total, "seconds": seconds, "cli_s": fetch_s, "upload_s": upload_s}

    # --- restore: ours ---

    async def restore(self, backup: str, nbytes: int) -> Obj:
        """A 3x0 cluster restored from backup: seconds to Verified and to Active; deleted after."""
        started = time.monotonic()
        await self.create_cluster(RESTORED, SHARDS, 0, backup)

        async def verified() -> Obj | NotYet:
            restore = (await self.status(RESTORED)).get("restore") or {}
            if restore.get("phase") == "Held":
                raise RuntimeError(f"restore held: {restore}")
            return restore if restore.get("phase") == "Verified" else NotYet(restore)

        try:
            restore = await eventually(verified, "restore Verified", self.args.timeout, interval=0.25)
            verified_s = time.monotonic() - started
            await self.active(RESTORED, SHARDS)
            active_s = time.monotonic() - started
        finally:
            await self.client.delete(VALKEY_CLUSTERS, RESTORED, self.namespace)
            await eventually(lambda: self.no_pods(RESTORED), "restored pods gone", 300, interval=1.0)
        if restore.get("loadedKeys") != restore.get("keys"):
            raise RuntimeError(f"restore verified with other counts: {restore}")
        return {"bytes": nbytes, "verified_s": verified_s, "active_s": active_s, "keys": restore.get("keys")}

    # --- restore: the floor ---

    async def floor_restore(self, shards: Sequence[Obj]) -> Obj:
        """The backup's objects downloaded concurrently, then a server loading each."""
        destination = Destination(endpoint=self.store.endpoint, bucket=self.bucket)
        credentials = S3Credentials(
            access_key_id=self.store.access_key_id, secret_access_key=self.store.secret_access_key
        )
        base = valkeyproc.server_base_dir()
        servers: list[valkeyproc.ValkeyServer] = []
        try:
            directories = [base / f"shard-{shard['index']}" for shard in shards]
            for directory in directories:
                directory.mkdir()
                os.chown(directory, self.image.user, self.image.group)
            started = time.monotonic()
            async with open_store(destination, credentials, endpoints=ANY_ADDRESS) as store:
                sizes = await asyncio.gather(
                    *(
                        store.download(shard["objectKey"], directory / "dump.rdb", shard["sha256"])
                        for shard, directory in zip(shards, directories, strict=True)
                    )
                )
            downloaded = time.monotonic()
            for directory in directories:
                for path in directory.iterdir():
                    os.chown(path, self.image.user, self.image.group)
            for directory in directories:
                config: dict[str, valkeyproc.ConfigValue] = {"dir": str(directory), "dbfilename": "dump.rdb"}
                servers.append(
                    await asyncio.to_thread(
                        valkeyproc.start_server,
                        self.image,
                        "127.0.0.1",
                        base_dir=base,
                        config=config,
                        cluster=True,
                    )
                )

            async def loaded() -> bool | NotYet:
                for server, shard in zip(servers, shards, strict=True):
                    info = await asyncio.to_thread(server.info, "persistence")
                    if str(info.get("loading")) != "0":
                        return NotYet(f"{server.address} loading")
                    size = await asyncio.to_thread(server.command, "DBSIZE")
                    if isinstance(size, ReplyError) or size != shard["keys"]:
                        return NotYet(f"{server.address} DBSIZE {size!r}, wanted {shard['keys']}")
                return True

            await eventually(loaded, "every server loaded", self.args.timeout, interval=0.05)
            ended = time.monotonic()
            await self.floor_form(servers)
            formed = time.monotonic()
        finally:
            valkeyproc.stop_servers(servers)
            shutil.rmtree(base, ignore_errors=True)
        return {
            "bytes": sum(sizes),
            "download_s": downloaded - started,
            "loaded_s": ended - started,
            "formed_s": formed - started,
        }

    async def floor_form(self, servers: Sequence[valkeyproc.ValkeyServer]) -> None:
        """The loaded servers made one cluster: each already took the slots it loaded keys for
        (Valkey does at start, as a restored node of ours does), all MEET the first, and every one
        reports cluster_state:ok (Valkey holds a primary that starts failed 2 s before it reports
        ok: CLUSTER_WRITABLE_DELAY). A slot without keys would never be served: the wait says so."""
        host, port = servers[0].address
        for server in servers[1:]:
            met = await asyncio.to_thread(server.command, "CLUSTER", "MEET", host, str(port))
            if isinstance(met, ReplyError):
                raise RuntimeError(f"{server.address} MEET: {met}")

        async def formed() -> bool | NotYet:
            for server in servers:
                info = await asyncio.to_thread(server.command, "CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" not in text:
                    return NotYet(f"{server.address} not ok")
            return True

        await eventually(formed, "the floor's cluster ok", self.args.timeout, interval=0.05)

    async def drop(self, prefix: str) -> None:
        """Delete the objects under prefix (the disk holds a few rounds, not all of them)."""

        def delete() -> None:
            s3 = self.store.client()
            listed = s3.list_objects_v2(Bucket=self.bucket, Prefix=prefix).get("Contents") or []
            for item in listed:
                s3.delete_object(Bucket=self.bucket, Key=item["Key"])

        await asyncio.to_thread(delete)

    # --- one round ---

    async def round(self, status: Obj, index: int) -> Obj:
        name = f"r{index}"
        result: Obj = {}
        for side in ("ours", "floor") if index % 2 == 0 else ("floor", "ours"):
            if side == "ours":
                taken = await self.backup(status, name)
                backup = taken["status"]
                result["backup"] = {
                    "bytes": backup["totalBytes"],
                    "keys": backup["totalKeys"],
                    "status_s": status_seconds(backup),
                    "wall_s": taken["wall_s"],
                    "sources": [shard["sourceRole"] for shard in backup["shards"]],
                    "gaps_s": shard_gaps(taken["writer"]),
                    "writer_acked": taken["writer"].acknowledged,
                }
                result["_shards"] = self.sources = backup["shards"]
            else:  # from the nodes the last backup read (round 0 takes ours first)
                result["backup_floor"] = await self.floor_backup(self.sources, index)
        base = await self.baseline(status, result["backup"]["wall_s"])
        result["baseline_gaps_s"] = shard_gaps(base)
        shards = result.pop("_shards")
        result["restore"] = await self.restore(name, result["backup"]["bytes"])
        result["restore_floor"] = await self.floor_restore(shards)
        await self.drop("floor/")
        await self.drop("ours/")
        return result


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def summarize(rounds: Sequence[Obj]) -> Obj:
    nbytes = median([r["backup"]["bytes"] for r in rounds])
    backup_wall = median([rate(r["backup"]["bytes"], r["backup"]["wall_s"]) for r in rounds])
    backup_status = median([rate(r["backup"]["bytes"], r["backup"]["status_s"]) for r in rounds])
    floor = median([rate(r["backup_floor"]["bytes"], r["backup_floor"]["seconds"]) for r in rounds])
    verified = median([rate(r["restore"]["bytes"], r["restore"]["verified_s"]) for r in rounds])
    active = median([rate(r["restore"]["bytes"], r["restore"]["active_s"]) for r in rounds])
    download = median([rate(r["restore_floor"]["bytes"], r["restore_floor"]["download_s"]) for r in rounds])
    loaded = median([rate(r["restore_floor"]["bytes"], r["restore_floor"]["loaded_s"]) for r in rounds])
    formed = median([rate(r["restore_floor"]["bytes"], r["restore_floor"]["formed_s"]) for r in rounds])
    shards = len(rounds[0]["backup"]["gaps_s"])
    return {
        "backup_mb": nbytes / 1e6,
        "backup_mb_s": {"wall": backup_wall, "status": backup_status, "floor": floor},
        "backup_ratio": {"wall": backup_wall / floor, "status": backup_status / floor},
        "restore_mb_s": {
            "verified": verified,
            "active": active,
            "floor_download": download,
            "floor_loaded": loaded,
            "floor_formed": formed,
        },
        "restore_ratio": {"verified": verified / loaded, "active": active / loaded},
        "restore_ratio_formed": {"verified": verified / formed, "active": active / formed},
        "gap_during_backup_s": [median([r["backup"]["gaps_s"][i] for r in rounds]) for i in range(shards)],
        "gap_baseline_s": [
            median([r["baseline_gaps_s"][i] for r in rounds])
            for i in range(len(rounds[0]["baseline_gaps_s"]))
        ],
        "gap_during_backup_max_s": max(max(r["backup"]["gaps_s"]) for r in rounds),
        "gap_baseline_max_s": max(max(r["baseline_gaps_s"]) for r in rounds),
    }


def print_round(index: int, r: Obj) -> None:
    b, f, s, g = r["backup"], r["backup_floor"], r["restore"], r["restore_floor"]
    print(
        f"round {index + 1}: backup {b['bytes'] / 1e6:.0f} MB in {b['wall_s']:.1f} s wall "
        f"({rate(b['bytes'], b['wall_s']):.1f} MB/s; status {b['status_s']:.0f} s, "
        f"{rate(b['bytes'], b['status_s']):.1f} MB/s; read from {','.join(b['sources'])}); "
        f"floor {f['seconds']:.1f} s ({rate(f['bytes'], f['seconds']):.1f} MB/s: cli {f['cli_s']:.1f} s + "
        f"upload {f['upload_s']:.1f} s)",
        flush=True,
    )
    print(
        f"         restore Verified {s['verified_s']:.1f} s ({rate(s['bytes'], s['verified_s']):.1f} MB/s), "
        f"Active {s['active_s']:.1f} s ({rate(s['bytes'], s['active_s']):.1f} MB/s); floor download "
        f"{g['download_s']:.1f} s ({rate(g['bytes'], g['download_s']):.1f} MB/s), "
        f"loaded {g['loaded_s']:.1f} s ({rate(g['bytes'], g['loaded_s']):.1f} MB/s), "
        f"a cluster ok {g['formed_s']:.1f} s ({rate(g['bytes'], g['formed_s']):.1f} MB/s)",
        flush=True,
    )
    gaps = " ".join(f"{gap:.3f}" for gap in b["gaps_s"])
    base = " ".join(f"{gap:.3f}" for gap in r["baseline_gaps_s"])
    print(f"         longest write gap per shard (s): during the backup {gaps}; baseline {base}", flush=True)


def report(record: Obj) -> None:
    s = record["summary"]
    print(
        f"\nmedians of {len(record['rounds'])} rounds, {s['backup_mb']:.0f} MB backed up ({record['image']}):"
    )
    b, r = s["backup_mb_s"], s["restore_mb_s"]
    print(
        f"  backup   {b['wall']:7.1f} MB/s wall, {b['status']:7.1f} MB/s by status; "
        f"floor {b['floor']:7.1f} MB/s; "
        f"ours/floor {s['backup_ratio']['wall']:.2f} (wall), {s['backup_ratio']['status']:.2f} (status)"
    )
    print(
        f"  restore  {r['verified']:7.1f} MB/s to Verified, {r['active']:7.1f} MB/s to Active; floor "
        f"{r['floor_download']:7.1f} MB/s download, {r['floor_loaded']:7.1f} MB/s loaded; ours/floor "
        f"{s['restore_ratio']['verified']:.2f} (Verified), {s['restore_ratio']['active']:.2f} (Active)"
    )
    print(
        f"  restore against the floor that also forms the cluster ({r['floor_formed']:7.1f} MB/s): "
        f"ours/floor {s['restore_ratio_formed']['verified']:.2f} (Verified), "
        f"{s['restore_ratio_formed']['active']:.2f} (Active)"
    )
    print(
        "  write gap per shard (s): during the backup "
        + " ".join(f"{gap:.3f}" for gap in s["gap_during_backup_s"])
        + "; baseline "
        + " ".join(f"{gap:.3f}" for gap in s["gap_baseline_s"])
        + f"; worst {s['gap_during_backup_max_s']:.3f} vs {s['gap_baseline_max_s']:.3f}"
    )


async def drive(args: argparse.Namespace, kubeconfig: str, log_dir: Path, store: ObjectStoreServer) -> Obj:
    async with Bench(kubeconfig, log_dir, store, args) as bench:
        status = await bench.source()
        rounds = []
        for index in range(args.rounds):
            result = await bench.round(status, index)
            print_round(index, result)
            rounds.append(result)
        return {"image": bench.reference, "rounds": rounds}


def operator_revision(checkout: str | None) -> str:
    """The commit the operator ran from (this checkout's unless --operator-checkout)."""
    directory = Path(checkout) if checkout else Path(__file__).resolve().parents[1]
    try:
        found = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip()


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill tears the test bed down too
    reference = newest_image()
    if resolve_image(reference) is None:
        sys.exit(f"{reference} is not installed: run `python -m valkey_testbed build`")
    objectstore.build_server()
    operator_image()
    record: Obj = {
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "operator": operator_revision(args.operator_checkout),
        "cpus": os.cpu_count(),
        "args": {k: v for k, v in vars(args).items() if k not in ("kubeconfig", "log_dir", "output")},
    }
    store = objectstore.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-backup-") as temp:
            log_dir = Path(args.log_dir or temp)
            log_dir.mkdir(parents=True, exist_ok=True)
            if args.kubeconfig:
                record.update(asyncio.run(drive(args, args.kubeconfig, log_dir, store)))
            else:
                from valkey_testbed.controlplane import ControlPlane

                with ControlPlane(Path(temp) / "plane", nodes=3) as plane:
                    record.update(asyncio.run(drive(args, str(plane.kubeconfig), log_dir, store)))
    finally:
        store.stop()
        shutil.rmtree(store.directory, ignore_errors=True)
    record["summary"] = summarize(record["rounds"])
    record["load_average"] = [round(value, 2) for value in os.getloadavg()]
    if args.output:
        Path(args.output).write_text(json.dumps(record, indent=2) + "\n")
    report(record)


if __name__ == "__main__":
    main()
