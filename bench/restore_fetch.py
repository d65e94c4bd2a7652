"""restore-fetch, the init container of every restoring pod: its time and CPU against the floor.

A restore downloads each shard's RDB in that shard's pods, one short-lived
`valkey-operator restore-fetch` process per pod, several at once on a node.
What it costs beyond the download itself (interpreter start, imports, the S3
client's set-up, per-chunk overhead, the sha256) is paid in every pod. This
bench starts the test bed's S3 server (versitygw on 127.0.0.1, built by
`python -m valkey_testbed build`), puts --objects objects of
--megabytes MB of random bytes, and for --rounds rounds, alternating order:

  ours     --objects `python -m valkey_operator restore-fetch` processes at
           once, each into its own directory (sha256 checked, file fsynced
           and laid out as dump.rdb), as the pods run them;
  floor    the same objects downloaded concurrently in one process already
           running, with the same client (valkey_operator.objectstore,
           sha256 checked): no interpreter start, no imports, one client.

Prints per round the wall seconds and the CPU seconds (user + system) of
each, the medians and the ratios. Everything listens on and dials 127.0.0.1.

    python bench/restore_fetch.py [--megabytes 180] [--objects 3] [--rounds 3] [--before DIR] [--output FILE]

`--before DIR` also runs restore-fetch from another checkout (PYTHONPATH=DIR) in the same rounds:
an earlier revision against the same floor, on the same machine, at the same time.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from valkey_operator.objectstore import ANY_ADDRESS, Destination, S3Credentials, open_store
from valkey_testbed import objectstore

ROOT = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def ours(
    server: objectstore.ObjectStoreServer,
    bucket: str,
    keys: dict[str, str],
    work: Path,
    checkout: str | None = None,
) -> tuple[float, float]:
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": server.secret_access_key,
    }
    if checkout is not None:  # and run there: `python -m` puts its working directory first on sys.path
        env["PYTHONPATH"] = checkout
    cpu, started = _children_cpu(), time.monotonic()
    processes = []
    for index, (key, digest) in enumerate(keys.items()):
        target = work / f"ours-{index}"
        target.mkdir()
        argv = [sys.executable, "-m", "valkey_operator", "restore-fetch", "--endpoint", server.endpoint,
                "--bucket", bucket, "--key", key, "--sha256", digest, "--dir", str(target)]  # fmt: skip
        processes.append(
            subprocess.Popen(
                argv, env=env, cwd=checkout or ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
        )
    for process in processes:
        _, err = process.communicate(timeout=600)
        if process.returncode != 0:
            raise SystemExit(f"restore-fetch failed ({process.returncode}): {err.decode()}")
    return time.monotonic() - started, _children_cpu() - cpu


async def _floor(
    server: objectstore.ObjectStoreServer, bucket: str, keys: dict[str, str], work: Path
) -> None:
    destination = Destination(endpoint=server.endpoint, bucket=bucket)
    credentials = S3Credentials(
        access_key_id=server.access_key_id, secret_access_key=server.secret_access_key
    )
    async with open_store(destination, credentials, None, endpoints=ANY_ADDRESS) as store:
        await asyncio.gather(
            *(
                store.download(key, work / f"floor-{index}.rdb", digest)
                for index, (key, digest) in enumerate(keys.items())
            )
        )


def floor(
    server: objectstore.ObjectStoreServer, bucket: str, keys: dict[str, str], work: Path
) -> tuple[float, float]:
    cpu, started = _self_cpu(), time.monotonic()
    asyncio.run(_floor(server, bucket, keys, work))
    return time.monotonic() - started, _self_cpu() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=int, default=180, help="MB (10^6 bytes) per object")
    parser.add_argument("--objects", type=int, default=3, help="objects, fetched at once")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--before", help="also run restore-fetch from this checkout (PYTHONPATH), same rounds"
    )
    parser.add_argument("--output", help="also write the JSON record here")
    args = parser.parse_args()
    server = objectstore.start()
    try:
        bucket = server.create_bucket()
        client = server.client()
        keys = {}
        for index in range(args.objects):
            body = os.urandom(args.megabytes * 10**6)
            key = f"shard-{index}.rdb"
            client.put_object(Bucket=bucket, Key=key, Body=body)
            keys[key] = hashlib.sha256(body).hexdigest()
        rounds = []
        for number in range(args.rounds):
            order: list[tuple[str, Any]] = [("ours", ours), ("floor", floor)]
            if args.before:
                order.append(("before", functools.partial(ours, checkout=args.before)))
            if number % 2:
                order.reverse()
            measured: dict[str, tuple[float, float]] = {}
            for name, run in order:
                work = Path(tempfile.mkdtemp(prefix=f"restore-fetch-{name}-", dir="/dev/shm"))
                try:
                    measured[name] = run(server, bucket, keys, work)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
            print(
                f"round {number + 1}: "
                + "; ".join(
                    f"{name} {wall:.2f} s wall, {cpu:.2f} s CPU" for name, (wall, cpu) in measured.items()
                )
            )
            rounds.append(
                {
                    f"{name}_{what}": value
                    for name, pair in measured.items()
                    for what, value in zip(("wall", "cpu"), pair, strict=True)
                }
            )
        median = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        floor_wall, floor_cpu = median["floor_wall"], median["floor_cpu"]
        print(
            f"medians of {args.rounds} rounds, {args.objects} x {args.megabytes} MB, floor {floor_wall:.2f} s"
        )
        for name in ("ours", "before") if args.before else ("ours",):
            wall, cpu = median[f"{name}_wall"], median[f"{name}_cpu"]
            print(
                f"  {name}: {wall:.2f} s ({cpu:.2f} s CPU); "
                f"floor/{name} {floor_wall / wall:.2f} (wall), {floor_cpu / cpu:.2f} (CPU)"
            )
        if args.output:
            record = {
                "megabytes": args.megabytes,
                "objects": args.objects,
                "before": args.before,
                "rounds": rounds,
                "median": median,
                "load_average": os.getloadavg(),
            }
            Path(args.output).write_text(json.dumps(record, indent=2) + "\n")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
