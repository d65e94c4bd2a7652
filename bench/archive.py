"""Archiving: what shipping a node's AOF to the bucket costs in SET throughput, and its lag.

Four sides in one run, each a fresh cluster-enabled valkey-server owning every slot, with the
directives the operator renders for persistence aof everysec (bench/persistence.py's modes),
loaded by persistence.py's pipelined client (--ops SETs of --value-size bytes over --keyspace
keys from --clients connections, --pipeline commands in flight each):

  aof          aof everysec
  aof+backup   aof with an RDB backup of the node running the whole time: `valkey-cli --rdb`
               (the node forks and streams its RDB, as for a ValkeyBackup; written to the data
               directory's disk) one after another until the load ends, the worst case of
               scheduled backups
  aof+ts       aof with aof-timestamp-enabled yes (what point-in-time recovery needs)
  aof+archive  aof+ts with `valkey-operator archive` beside it (a process, as in a pod), shipping
               the AOF every second to the test bed's S3 server (versitygw) on this machine

Sides in alternating order over --rounds rounds; prints the median ops/s per side, its ratio to
aof, and for aof+archive the lag: from the load's last acknowledged SET until the archiver's
progress.json says it is archived (it writes that every second here; in a pod, every 5 s). The
operator runs the same command as each Valkey pod's archiver container with
spec.backup.pointInTime (docs/backups.md, point-in-time archiving).

    python bench/archive.py [--ops 1000000] [--keyspace 100000] [--clients 4] [--pipeline 16]
        [--value-size 1024] [--rounds 3] [--json] [--output FILE]

Everything listens on and dials 127.0.0.0/8 only; every load is a fixed number of SETs; the
bench stops only the processes it started, by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import persistence

from valkey_testbed import images, objectstore, valkeyproc
from valkey_testbed.datachecker import SLOTS
from valkey_testbed.images import ImageEntry
from valkey_testbed.wait import NotYet, eventually_blocking

SIDES = ("aof", "aof+backup", "aof+ts", "aof+archive")
LAG_TIMEOUT = 60.0
BUCKET_PATH = "bench"
Obj = dict[str, Any]


def add_load_arguments(parser: argparse.ArgumentParser, ops: int, keyspace: int, value_size: int) -> None:
    """The SET load's knobs (persistence.py's client reads them), with these defaults."""
    parser.add_argument("--ops", type=int, default=ops)
    parser.add_argument("--keyspace", type=int, default=keyspace)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--pipeline", type=int, default=16)
    parser.add_argument("--value-size", type=int, default=value_size)
    parser.add_argument("--rounds", type=int, default=3)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_load_arguments(parser, ops=1_000_000, keyspace=100_000, value_size=1024)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if min(args.ops, args.keyspace, args.clients, args.pipeline, args.rounds) < 1 or args.value_size < 16:
        parser.error("--ops, --keyspace, --clients, --pipeline, --rounds >= 1 and --value-size >= 16")
    return args


def config(side: str) -> dict[str, str]:
    settings = persistence.server_config("aof-everysec")
    if side in {"aof+ts", "aof+archive"}:
        settings["aof-timestamp-enabled"] = "yes"
    return settings


async def load_under_backups(
    server: valkeyproc.ValkeyServer, image: ImageEntry, args: argparse.Namespace, target: Path
) -> tuple[float, int]:
    """The load's SET/s while `valkey-cli --rdb` backs the node up again and again; and how many
    backups finished meanwhile."""
    done = asyncio.Event()
    finished = 0

    async def backups() -> None:
        nonlocal finished
        host, port = server.address
        while not done.is_set():
            cli = await asyncio.create_subprocess_exec(
                str(image.executable("valkey-cli")), "-h", host, "-p", str(port), "--rdb", str(target),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            if await cli.wait() == 0:
                finished += 1

    running = asyncio.create_task(backups())
    try:
        ops = await persistence.throughput_once(server.address, args)
    finally:
        done.set()
        await running
    return ops, finished


def start_archiver(server: valkeyproc.ValkeyServer, store: objectstore.ObjectStoreServer, bucket: str) -> Any:
    data_dir = server.command("CONFIG", "GET", "dir")[1].decode()  # type: ignore[index,union-attr]
    argv = [
        sys.executable, "-m", "valkey_operator", "archive", "--dir", data_dir, "--node", "bench",
        "--endpoint", store.endpoint, "--bucket", bucket, "--path", BUCKET_PATH, "--namespace", "bench",
        "--cluster", "bench", "--interval", "1", "--progress-every", "1",
        "--endpoint-allowed-networks", "127.0.0.0/8",
    ]  # fmt: skip
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": store.access_key_id,
        "AWS_SECRET_ACCESS_KEY": store.secret_access_key,
    }
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def archived_until(store: objectstore.ObjectStoreServer, bucket: str) -> float | None:
    key = f"{BUCKET_PATH}/bench/bench/archive/bench/progress.json"
    try:
        body = store.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception:  # not written yet
        return None
    value = json.loads(body).get("archivedUntil")
    return float(value) if value is not None else None


def measure(
    side: str, args: argparse.Namespace, image: ImageEntry, store: objectstore.ObjectStoreServer
) -> Obj:
    base = valkeyproc.server_base_dir()
    archiver = None
    try:
        server = valkeyproc.start_server(image, "127.0.0.1", base_dir=base, config=config(side), cluster=True)
        try:
            server.command("CLUSTER", "ADDSLOTSRANGE", 0, SLOTS - 1)
            eventually_blocking(lambda: valkeyproc.cluster_ok([server]), "cluster_state:ok", 30, interval=0.1)
            bucket = store.create_bucket()
            if side == "aof+archive":
                archiver = start_archiver(server, store, bucket)
            result: Obj = {}
            if side == "aof+backup":
                ops, result["backups"] = asyncio.run(
                    load_under_backups(server, image, args, base / "backup.rdb")
                )
            else:
                ops = asyncio.run(persistence.throughput_once(server.address, args))
            loaded = time.time()
            result["ops_per_s"] = ops
            if archiver is not None:

                def covered() -> float | NotYet:
                    until = archived_until(store, bucket)
                    return time.time() if until is not None and until >= loaded else NotYet(until)

                result["lag_s"] = (
                    eventually_blocking(covered, "the archive past the load", LAG_TIMEOUT) - loaded
                )
        finally:
            if archiver is not None:
                archiver.terminate()
                archiver.wait(timeout=30)
            server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return result


def run(args: argparse.Namespace) -> Obj:
    image = images.resolve_image(images.newest_image())
    if image is None:
        raise SystemExit("the newest Valkey image is not installed: python -m valkey_testbed build")
    store = objectstore.start()
    try:
        rounds: dict[str, list[Obj]] = {side: [] for side in SIDES}
        for index in range(args.rounds):
            for side in SIDES if index % 2 == 0 else SIDES[::-1]:
                result = measure(side, args, image, store)
                rounds[side].append(result)
                if not args.json:
                    lag = f", archive lag {result['lag_s']:.2f} s" if "lag_s" in result else ""
                    lag += f", {result['backups']} backups" if "backups" in result else ""
                    print(f"round {index + 1} {side:12}: {result['ops_per_s']:9,.0f} SET/s{lag}", flush=True)
    finally:
        store.stop()
    medians = {side: statistics.median(r["ops_per_s"] for r in results) for side, results in rounds.items()}
    lags = [r["lag_s"] for r in rounds["aof+archive"]]
    return {
        "rounds": rounds,
        "ops_per_s": medians,
        "ratio_to_aof": {side: medians[side] / medians["aof"] for side in SIDES},
        "archive_lag_s": {"median": statistics.median(lags), "max": max(lags)},
    }


def recorded(args: argparse.Namespace, results: Obj) -> Obj:
    """results with when, where and how they were measured, as bench/results/ keeps them."""
    return {
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "image": images.newest_image(),
        "args": vars(args) | {"output": str(args.output) if args.output else None},
        "results": results,
    }


def main() -> None:
    args = parse_args()
    results = run(args)
    record = recorded(args, results)
    if args.output:
        args.output.write_text(json.dumps(record, indent=2) + "\n")
    if args.json:
        print(json.dumps(record, indent=2))
        return
    for side in SIDES:
        print(
            f"{side:12} {results['ops_per_s'][side]:9,.0f} SET/s  x{results['ratio_to_aof'][side]:.3f} of aof"
        )
    lag = results["archive_lag_s"]
    print(f"archive lag after the load: median {lag['median']:.2f} s, max {lag['max']:.2f} s")


if __name__ == "__main__":
    main()
