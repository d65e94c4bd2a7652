"""Memory a Valkey node needs, measured on a real valkey-server: the numbers docs/sizing.md quotes.

One valkey-server from the test bed's image catalog on 127.0.0.1, cluster-enabled
(a one-node cluster owning every slot, as each primary of a ValkeyCluster is):

  per-key   for each value size, FLUSHALL, then DEBUG POPULATE of string keys
            ("key:<n>" -> a value of that size); used_memory after minus before,
            per key, and the part of it above the value itself (the overhead);
  cow       a dataset of --cow-megabytes of 1000-byte values, then BGSAVE twice:
            idle, and while a writer process overwrites random existing keys at
            each of --write-rates SET/s (0: as fast as one pipelined connection
            goes). Valkey's own count of the
            child's copy-on-write (INFO persistence rdb_last_cow_size) is what the
            fork costs on top of used_memory; the same fork serves a replica's
            full sync and an AOF rewrite.
  defaults  what the replication backlog and the client output buffers may hold
            (CONFIG GET): memory outside the dataset that maxmemory does not bound.

Prints one line per measurement. Run with nice on a shared machine:

    nice python bench/sizing.py [--image valkey/valkey:9.1.2] [--keys 200000]
        [--sizes 16,100,1000,4096] [--cow-megabytes 256] [--write-rates 1000,10000,0]
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

from valkey_testbed import images
from valkey_testbed.resp import encode_command, read_reply_blocking
from valkey_testbed.valkeyproc import ConfigValue, ValkeyServer, server_base_dir, start_server

PASSWORD = "sizing-bench"
MAX_BYTES_PER_SIZE = 100_000_000
"""Per value size, at most this much value data (fewer keys for large values)."""


def used_memory(server: ValkeyServer) -> int:
    return int(server.info("memory")["used_memory"])


def settle(server: ValkeyServer) -> int:
    """used_memory once lazy frees and the allocator settled (two equal readings 0.2 s apart)."""
    previous = -1
    for _ in range(50):
        current = used_memory(server)
        if current == previous:
            return current
        previous = current
        time.sleep(0.2)
    return previous


def per_key(server: ValkeyServer, keys: int, size: int) -> None:
    count = max(1000, min(keys, MAX_BYTES_PER_SIZE // size))
    server.command("FLUSHALL", "SYNC", timeout=120)
    before = settle(server)
    server.command("DEBUG", "POPULATE", count, "key", size, timeout=600)
    after = settle(server)
    each = (after - before) / count
    print(
        f"per-key value {size:6d} B  keys {count:7d}  used_memory +{(after - before) / 2**20:7.1f} MiB"
        f"  {each:8.1f} B/key  overhead {each - size:6.1f} B/key ({(each - size) / size:6.1%} of the value)"
    )


def writer(host: str, port: int, keys: int, seconds: float, value_size: int, rate: float) -> None:
    """Overwrite random existing keys (DEBUG POPULATE's names) with pipelined SETs, at most `rate`
    per second (0: as fast as one connection goes) until SIGTERM; print the count and the seconds."""
    sock = socket.create_connection((host, port))
    stream = sock.makefile("rb")
    sock.sendall(encode_command(["AUTH", PASSWORD]))
    read_reply_blocking(stream)
    value = b"w" * value_size
    rng = random.Random(1)
    written = 0
    started = time.monotonic()
    deadline = started + seconds
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    while time.monotonic() < deadline and not stop:
        if rate and written > rate * (time.monotonic() - started):
            time.sleep(0.005)
            continue
        batch = b"".join(encode_command([b"SET", b"key:%d" % rng.randrange(keys), value]) for _ in range(64))
        sock.sendall(batch)
        for _ in range(64):
            read_reply_blocking(stream)
        written += 64
    print(written, time.monotonic() - started, flush=True)


def bgsave(server: ValkeyServer) -> tuple[float, int, dict[str, str]]:
    """BGSAVE and wait for it: (seconds, used_memory when it started, INFO persistence after)."""
    at_start = used_memory(server)
    started = time.monotonic()
    server.command("BGSAVE")
    while True:
        info = server.info("persistence")
        done = info.get("rdb_bgsave_in_progress") == "0" and info.get("rdb_last_bgsave_status") == "ok"
        if done and time.monotonic() - started > 0.05:
            return time.monotonic() - started, at_start, info
        time.sleep(0.05)


def cow(server: ValkeyServer, megabytes: int, rates: list[float]) -> None:
    keys = megabytes * 1000
    server.command("FLUSHALL", "SYNC", timeout=120)
    server.command("DEBUG", "POPULATE", keys, "key", 1000, timeout=600)
    dataset = settle(server)
    took, _, info = bgsave(server)
    idle_cow = int(info.get("rdb_last_cow_size", 0))
    print(
        f"cow idle      dataset {dataset / 2**20:7.1f} MiB  BGSAVE {took:5.2f} s"
        f"  copy-on-write {idle_cow / 2**20:7.1f} MiB ({idle_cow / dataset:6.1%} of used_memory)"
    )
    for rate in rates:
        cow_under_writes(server, keys, took, rate)


def cow_under_writes(server: ValkeyServer, keys: int, idle_took: float, rate: float) -> None:
    """BGSAVE while a writer process overwrites random keys at `rate` SET/s (0: flat out); the writer
    runs from a second before the save until it ends (SIGTERM), and its rate is over that time."""
    spawn = [sys.executable, __file__, "--writer", server.host, str(server.port), str(keys), "3600"]
    load = subprocess.Popen([*spawn, str(rate)], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        took, at_start, info = bgsave(server)
        written_cow = int(info.get("rdb_last_cow_size", 0))
        load.send_signal(signal.SIGTERM)
        out, _ = load.communicate(timeout=60)
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    count, seconds = out.split()
    during = int(count) / float(seconds)
    print(
        f"cow writes    dataset {at_start / 2**20:7.1f} MiB  BGSAVE {took:5.2f} s"
        f"  copy-on-write {written_cow / 2**20:7.1f} MiB ({written_cow / at_start:6.1%} of used_memory)"
        f"  writer {during:8.0f} SET/s ({'flat out' if not rate else f'paced at {rate:.0f}'};"
        f" 1000 B values over {keys} keys)"
    )


def defaults(server: ValkeyServer) -> None:
    for name in ("repl-backlog-size", "client-output-buffer-limit", "maxmemory-clients", "io-threads"):
        reply = server.command("CONFIG", "GET", name)
        assert isinstance(reply, list) and len(reply) == 2, reply
        value = reply[1].decode() if isinstance(reply[1], bytes) else reply[1]
        print(f"default {name}: {value}")
    info = server.info("server")
    print(f"valkey {info['valkey_version']}  allocator {server.info('memory').get('mem_allocator')}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        host, port, keys, seconds, rate = sys.argv[2:7]
        writer(host, int(port), int(keys), float(seconds), 1000, float(rate))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="valkey/valkey:9.1.2")
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--sizes", default="16,100,1000,4096")
    parser.add_argument("--cow-megabytes", type=int, default=256)
    parser.add_argument(
        "--write-rates", default="1000,10000,0", help="SET/s during the BGSAVE under writes; 0: flat out"
    )
    args = parser.parse_args()
    image = images.resolve_image(args.image)
    if image is None:
        raise SystemExit(f"{args.image} is not installed (python -m valkey_testbed build)")
    base = server_base_dir()
    config: dict[str, ConfigValue] = {"enable-debug-command": "yes", "rdbcompression": "no"}
    server = start_server(image, "127.0.0.1", base_dir=base, password=PASSWORD, config=config, cluster=True)
    try:
        server.command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        defaults(server)
        for size in (int(s) for s in args.sizes.split(",")):
            per_key(server, args.keys, size)
        cow(server, args.cow_megabytes, [float(r) for r in args.write_rates.split(",")])
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
