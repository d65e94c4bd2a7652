"""RDB stream throughput: open_rdb_stream to /dev/null next to `valkey-cli --rdb`, in one run.

One valkey-server from the test bed's image catalog on 127.0.0.1 holds about
--megabytes of data (DEBUG POPULATE with 1000-byte values, rdbcompression off
so the RDB is as large as the data). Each round, in alternating order:

  diskless  open_rdb_stream with the EOF capability (the node streams from its
            fork), every chunk (1 MiB) discarded;
  disk      the same without it (the node writes its dump.rdb first);
  cli       the image's own `valkey-cli --rdb` (the floor: C, no per-chunk
            work) into a file on /dev/shm (it fsyncs, which /dev/null
            refuses), when the image has a valkey-cli; it announces the EOF
            capability, as `diskless` does.

Timed from connect to the last byte, including the node's fork (and its disk
write for `disk`).
Prints each measurement in MB/s (10^6 bytes) and the medians.

    python bench/rdb_stream.py [--megabytes 300] [--rounds 3] [--image valkey/valkey:9.1.2] [--tls]
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import re
import shutil
import statistics
import subprocess
import tempfile
import time

from valkey_operator.valkey.admin import Credentials
from valkey_operator.valkey.rdb_stream import open_rdb_stream
from valkey_testbed import images
from valkey_testbed.valkeyproc import (
    ConfigValue,
    ValkeyServer,
    server_base_dir,
    start_server,
    write_tls_files,
)

PASSWORD = "rdb-stream-bench"
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


async def ours(server: ValkeyServer, diskless: bool) -> tuple[int, float]:
    started = time.perf_counter()
    total = 0
    credentials = Credentials(username="default", password=PASSWORD)
    ca_pem = server.tls.ca.read_text() if server.tls is not None else None
    async with open_rdb_stream(
        server.host, server.port, credentials, ca_pem=ca_pem, allowed_networks=LOOPBACK, diskless=diskless
    ) as stream:
        async for chunk in stream.chunks():
            total += len(chunk)  # discarded, as into /dev/null
    return total, time.perf_counter() - started


def cli(server: ValkeyServer) -> tuple[int, float]:
    # valkey-cli fsyncs its output, which /dev/null refuses: a tmpfs file instead.
    with tempfile.TemporaryDirectory(dir="/dev/shm") as directory:
        started = time.perf_counter()
        result = subprocess.run(
            server.cli_argv("--rdb", f"{directory}/dump.rdb"),
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        elapsed = time.perf_counter() - started
    finished = re.search(r"success after (\d+) bytes", result.stdout + result.stderr)
    return int(finished.group(1)) if finished else 0, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--image", default="valkey/valkey:9.1.2")
    parser.add_argument(
        "--tls", action="store_true", help="the node serves TLS only (the image must have it)"
    )
    args = parser.parse_args()
    image = images.resolve_image(args.image)
    if image is None:
        raise SystemExit(f"{args.image} is not installed (python -m valkey_testbed build)")
    base = server_base_dir()
    config: dict[str, ConfigValue] = {
        "enable-debug-command": "yes",
        "rdbcompression": "no",
        "repl-diskless-sync-delay": 0,
    }
    tls = write_tls_files(base / "tls", ["127.0.0.1"]) if args.tls else None
    server = start_server(image, "127.0.0.1", base_dir=base, password=PASSWORD, config=config, tls=tls)
    try:
        server.command("DEBUG", "POPULATE", args.megabytes * 1000, "key", 1000, timeout=600)
        sides = ["diskless", "disk"] + (["cli"] if image.executable("valkey-cli").exists() else [])
        rates: dict[str, list[float]] = {side: [] for side in sides}
        for round_ in range(args.rounds):
            order = sides if round_ % 2 == 0 else sides[::-1]
            for side in order:
                total, elapsed = (
                    cli(server) if side == "cli" else asyncio.run(ours(server, side == "diskless"))
                )
                rate = total / elapsed / 1e6
                rates[side].append(rate)
                print(
                    f"round {round_ + 1} {side:8} {total / 1e6:8.1f} MB in {elapsed:6.2f} s: {rate:7.1f} MB/s"
                )
        for side, values in rates.items():
            print(f"median   {side:8} {statistics.median(values):7.1f} MB/s")
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
