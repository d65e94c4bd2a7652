"""Restoring a node's history to a second: what a restoring pod does, against the floor.

One archived history, made once: a cluster-enabled valkey-server with aof-timestamp-enabled takes
--ops SETs of --value-size bytes over --keyspace keys (bench/persistence.py's pipelined client)
in --phases phases, a BGREWRITEAOF after each but the last (so the history is several bases and
incremental files), while `valkey-operator archive` ships it to the test bed's S3 server. The
cut is the first write's second, inside the first phase (so the keys restored show it). Then,
for --rounds rounds in alternating order, the history is restored to that second and loaded by
a fresh valkey-server (until it answers PING):

  ours   `python -m valkey_operator restore-fetch --archive ... --until <second>`, a process as
         in a restoring pod (lists the node's sequences, fetches the base and each incremental
         file's segments, cuts in Python, writes the manifest), then the load;
  floor  the same objects fetched concurrently by one process already running (the same S3
         client), `valkey-check-aof --truncate-to-timestamp` on the last incremental file, a
         manifest, then the load: the download, the tool and the load, nothing else.

Prints per round the seconds of each, the medians and the ratio, and checks that both restored
the same number of keys. Everything listens on and dials 127.0.0.0/8 only; every load is a
fixed number of SETs; the bench stops only the processes it started, by pid.

    python bench/restore_to_time.py [--ops 600000] [--phases 3] [--rounds 3] [--output FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import archive
import persistence

from valkey_operator.archiver import fetch, layout
from valkey_operator.archiver.cut import incr_name, write_manifest
from valkey_operator.objectstore import ANY_ADDRESS, Destination, S3Credentials, open_store
from valkey_testbed import images, objectstore, valkeyproc
from valkey_testbed.datachecker import SLOTS
from valkey_testbed.images import ImageEntry
from valkey_testbed.wait import NotYet, eventually_blocking

Obj = dict[str, Any]
FOLDER = "/".join((archive.BUCKET_PATH, *layout.node_prefix("bench", "bench", "bench")))
LOAD_TIMEOUT = 300.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    archive.add_load_arguments(parser, ops=600_000, keyspace=200_000, value_size=256)
    parser.add_argument("--phases", type=int, default=3, help="--ops is spread over them")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if min(args.ops, args.phases, args.keyspace, args.clients, args.pipeline, args.rounds) < 1:
        parser.error("every count must be at least 1")
    return args


def make_history(args: argparse.Namespace, image: ImageEntry, store: objectstore.ObjectStoreServer) -> Obj:
    """Write and archive the history; its bucket, the second to cut at and the base to start from."""
    base = valkeyproc.server_base_dir()
    server = valkeyproc.start_server(
        image, "127.0.0.1", base_dir=base, config=archive.config("aof+ts"), cluster=True
    )
    bucket = store.create_bucket()
    archiver = archive.start_archiver(server, store, bucket)
    try:
        server.command("CLUSTER", "ADDSLOTSRANGE", 0, SLOTS - 1)
        eventually_blocking(lambda: valkeyproc.cluster_ok([server]), "cluster_state:ok", 30, interval=0.1)
        phase = argparse.Namespace(**{**vars(args), "ops": args.ops // args.phases})
        began = time.time()
        for index in range(args.phases):
            asyncio.run(persistence.throughput_once(server.address, phase))
            if index < args.phases - 1:
                server.command("BGREWRITEAOF")
                time.sleep(1.0)
        ended = time.time()

        def covered() -> bool | NotYet:
            until = archive.archived_until(store, bucket)
            return (until is not None and until >= ended) or NotYet(until)

        eventually_blocking(covered, "the archive past the writes", archive.LAG_TIMEOUT)
    finally:
        archiver.terminate()
        archiver.wait(timeout=30)
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return {"bucket": bucket, "until": int(began), "base_seq": 1, "seconds": ended - began}


def loaded_keys(image: ImageEntry, data_dir: Path) -> tuple[float, int]:
    """Start a fresh server on data_dir's appendonlydir; seconds until it answers PING, and its keys."""
    for path in [data_dir, *data_dir.rglob("*")]:
        shutil.chown(path, image.user, image.group)
    started = time.monotonic()
    config = {"appendonly": "yes", "dir": str(data_dir)}
    server = valkeyproc.start_server(image, "127.0.0.1", base_dir=data_dir.parent, config=config)
    try:
        eventually_blocking(
            lambda: server.command("PING") == b"PONG" or NotYet("loading"),
            "loaded",
            LOAD_TIMEOUT,
            interval=0.02,
        )
        took = time.monotonic() - started
        keys = server.command("DBSIZE")
    finally:
        server.stop()
    assert isinstance(keys, int), keys
    return took, keys


def ours(history: Obj, store: objectstore.ObjectStoreServer, image: ImageEntry, work: Path) -> Obj:
    data_dir = work / "ours"
    data_dir.mkdir()
    argv = [
        sys.executable, "-m", "valkey_operator", "restore-fetch", "--endpoint", store.endpoint,
        "--bucket", history["bucket"], "--layout", "aof", "--dir", str(data_dir), "--archive", FOLDER,
        "--base-seq", str(history["base_seq"]), "--until", str(history["until"]),
    ]  # fmt: skip
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": store.access_key_id,
        "AWS_SECRET_ACCESS_KEY": store.secret_access_key,
    }
    started = time.monotonic()
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=LOAD_TIMEOUT)
    fetched = time.monotonic() - started
    load, keys = loaded_keys(image, data_dir)
    return {"fetch_s": fetched, "load_s": load, "total_s": fetched + load, "keys": keys}


async def _download(history: Obj, store: objectstore.ObjectStoreServer, target: Path) -> list[int]:
    destination = Destination(endpoint=store.endpoint, bucket=history["bucket"], path="")
    credentials = S3Credentials(access_key_id=store.access_key_id, secret_access_key=store.secret_access_key)
    async with open_store(destination, credentials, endpoints=ANY_ADDRESS) as opened:
        found = await fetch.plan(opened, FOLDER, history["base_seq"], history["until"])
        await fetch.download(opened, found, target)
    return [seq for seq, _ in found.incrs]


def floor(history: Obj, store: objectstore.ObjectStoreServer, image: ImageEntry, work: Path) -> Obj:
    """The same objects fetched by this process, already running, then the real tool."""
    data_dir = work / "floor"
    aof_dir = data_dir / fetch.AOF_DIR
    aof_dir.mkdir(parents=True)
    started = time.monotonic()
    incrs = asyncio.run(_download(history, store, aof_dir))
    downloaded = time.monotonic() - started
    tool = work / "valkey-check-aof"
    shutil.copy(image.executable("valkey-server"), tool)
    started = time.monotonic()
    kept = []
    for seq in incrs:  # the tool on each file in turn until one holds the second, as a person would
        kept.append(seq)
        path = aof_dir / incr_name(seq)
        size = path.stat().st_size
        argv = [str(tool), "--truncate-to-timestamp", str(history["until"]), str(path)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=LOAD_TIMEOUT, check=False)
        if result.returncode != 0:  # "has nothing before timestamp": the second precedes this file
            assert "nothing before" in result.stdout + result.stderr, result
            path.write_bytes(b"")
            break
        if path.stat().st_size < size:
            break
    for seq in incrs[len(kept) :]:
        (aof_dir / incr_name(seq)).unlink()
    write_manifest(aof_dir, history["base_seq"], kept)
    cut = time.monotonic() - started
    load, keys = loaded_keys(image, data_dir)
    return {"fetch_s": downloaded + cut, "load_s": load, "total_s": downloaded + cut + load, "keys": keys}


def main() -> None:
    args = parse_args()
    image = images.resolve_image(images.newest_image())
    if image is None:
        raise SystemExit("the newest Valkey image is not installed: python -m valkey_testbed build")
    store = objectstore.start()
    rounds: dict[str, list[Obj]] = {"ours": [], "floor": []}
    try:
        history = make_history(args, image, store)
        listed = store.client().list_objects_v2(Bucket=history["bucket"], Prefix=FOLDER + "/")
        print(
            f"history: {args.ops:,} SETs over {history['seconds']:.1f} s in {args.phases} phases, "
            f"{listed.get('KeyCount', 0)} objects; cut in the first phase",
            flush=True,
        )
        for index in range(args.rounds):
            for side in ("ours", "floor") if index % 2 == 0 else ("floor", "ours"):
                work = valkeyproc.server_base_dir()
                try:
                    result = (ours if side == "ours" else floor)(history, store, image, work)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                rounds[side].append(result)
                print(
                    f"round {index + 1} {side:5}: fetch+cut {result['fetch_s']:.2f} s, load "
                    f"{result['load_s']:.2f} s, total {result['total_s']:.2f} s, {result['keys']:,} keys",
                    flush=True,
                )
    finally:
        store.stop()
    keys = {result["keys"] for results in rounds.values() for result in results}
    assert len(keys) == 1, f"ours and the floor restored different key counts: {keys}"
    medians = {side: statistics.median(r["total_s"] for r in results) for side, results in rounds.items()}
    results = {"rounds": rounds, "total_s": medians, "ratio_to_floor": medians["ours"] / medians["floor"]}
    record = archive.recorded(args, results)
    if args.output:
        args.output.write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"median total: ours {medians['ours']:.2f} s, floor {medians['floor']:.2f} s, "
        f"x{medians['ours'] / medians['floor']:.2f} of the floor; {keys.pop():,} keys restored by both"
    )


if __name__ == "__main__":
    main()
