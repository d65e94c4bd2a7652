"""What exporting redis_exporter's series costs the operator at N real Valkey nodes (default 100).

Starts N real valkey-server processes (cluster mode, a password, port 6379 each on its own
127.78.x.y address, formed into N/2 clusters of one primary and one replica with 1,000 keys each)
and runs the operator's own exporter (controllers/cluster/valkey_exporter.py) in this process,
behind the operator's own /metrics endpoint (valkey_operator/core/httpserver.py) with its pre-scrape
hook, as the leader runs it. Prints, for `--reads` reads:
- a read of every node: wall time and CPU seconds of this process (median, max);
- CPU per second at a 15 s and a 30 s scrape interval: a scrape that reads (max_age is below both)
  costs its CPU once per interval;
- RSS added by the exporter (VmRSS after the reads minus before the exporter existed);
- a scrape by curl (another process, as Prometheus): GET /metrics that reads (cache expired) and
  one served from the last read: wall time and this process's CPU, body size (and gzip size),
  number of redis_* samples.
`--json FILE` writes the numbers. Every process is stopped by pid at the end.

    python bench/valkey_metrics.py [--nodes 100] [--reads 20] [--json bench/results/valkey-metrics.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import ipaddress
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from controllers.cluster.valkey_exporter import NodeTarget, ValkeyExporter
from valkey_operator.core import httpserver
from valkey_operator.valkey.admin import VALKEY_PORT, AdminClient, Credentials
from valkey_testbed import images
from valkey_testbed.valkeyproc import (
    ValkeyServer,
    form_cluster,
    server_base_dir,
    start_server,
    stop_servers,
)

PASSWORD = "bench-metrics"
KEYS = 1000


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def host(index: int) -> str:
    return f"127.78.{index // 250}.{index % 250 + 1}"


def start(nodes: int) -> tuple[list[ValkeyServer], Path]:
    image = images.catalog()[images.newest_image()]
    base = server_base_dir()
    servers: list[ValkeyServer] = []
    try:
        for index in range(nodes):
            servers.append(
                start_server(
                    image, host(index), VALKEY_PORT, base_dir=base, cluster=True, password=PASSWORD,
                    config={"maxmemory": "64mb", "maxmemory-policy": "noeviction"},
                )
            )  # fmt: skip
        for pair in range(nodes // 2):
            primary, replica = servers[2 * pair], servers[2 * pair + 1]
            form_cluster([primary], [replica])
            primary.command("DEBUG", "POPULATE", KEYS, f"k{pair}")
    except BaseException:
        stop_servers(servers)
        shutil.rmtree(base, ignore_errors=True)
        raise
    return servers, base


async def scrape(url: str, output: Path) -> tuple[float, float]:
    """GET url with curl (another process, as Prometheus is): wall seconds, and this process's CPU
    seconds meanwhile (the operator's side of the scrape only)."""
    cpu, started = time.process_time(), time.perf_counter()
    process = await asyncio.create_subprocess_exec("curl", "-sf", "-o", str(output), url)
    if await process.wait() != 0:
        raise RuntimeError(f"curl {url} failed")
    return time.perf_counter() - started, time.process_time() - cpu


async def measure(servers: list[ValkeyServer], reads: int) -> dict[str, Any]:
    before = rss_bytes()
    exporter = ValkeyExporter(max_age=0.0)
    admin = AdminClient(
        credentials=Credentials(username="default", password=PASSWORD),
        allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),),
    )
    for pair in range(len(servers) // 2):
        nodes = [
            NodeTarget(pod=f"c{pair}-0-{side}", ip=servers[2 * pair + offset].host, shard="0")
            for offset, side in ((0, "a"), (1, "b"))
        ]
        exporter.update("bench", f"c{pair}", admin, nodes)
    walls, cpus = [], []
    for _ in range(reads):
        cpu, wall = time.process_time(), time.perf_counter()
        await exporter.refresh()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    after = rss_bytes()
    registry = CollectorRegistry()
    registry.register(exporter)
    endpoint = httpserver.HttpEndpoint(httpserver.metrics_app(registry, [exporter.refresh]), "127.0.0.1", 0)
    await endpoint.start()
    url = f"http://127.0.0.1:{endpoint.port}/metrics"
    output = Path(tempfile.mkdtemp(prefix="valkey-metrics-")) / "metrics.txt"
    try:
        fresh, cached = [], []
        for _ in range(5):
            exporter.max_age = 0.0
            fresh.append(await scrape(url, output))
            exporter.max_age = 3600.0
            cached.append(await scrape(url, output))
    finally:
        await endpoint.stop()
    body = output.read_bytes()
    output.unlink()
    output.parent.rmdir()
    text = body.decode()
    ups = [line for line in text.splitlines() if line.startswith("redis_up{")]
    samples = [line for line in text.splitlines() if line.startswith("redis_")]
    cpu_scrape = statistics.median(c for _, c in fresh)
    return {
        "nodes": len(servers),
        "nodes_up": sum(line.endswith(" 1.0") for line in ups),
        "read_wall_seconds_median": statistics.median(walls),
        "read_wall_seconds_max": max(walls),
        "read_cpu_seconds_median": statistics.median(cpus),
        "read_cpu_seconds_max": max(cpus),
        "cpu_per_second_at_15s": cpu_scrape / 15,
        "cpu_per_second_at_30s": cpu_scrape / 30,
        "rss_added_bytes": after - before,
        "scrape_reading_wall_seconds_median": statistics.median(t for t, _ in fresh),
        "scrape_reading_cpu_seconds_median": statistics.median(c for _, c in fresh),
        "scrape_cached_wall_seconds_median": statistics.median(t for t, _ in cached),
        "scrape_cached_cpu_seconds_median": statistics.median(c for _, c in cached),
        "body_bytes": len(body),
        "body_gzip_bytes": len(gzip.compress(body)),
        "redis_samples": len(samples),
        "redis_samples_per_node": len(samples) / len(servers),
    }


def _pair(result: dict[str, Any], key: str, unit: str) -> str:
    return f"{result[key + '_median']:.3f}{unit} ({result[key + '_max']:.3f}{unit})"


def _wall_cpu(result: dict[str, Any], key: str) -> str:
    wall, cpu = result[f"{key}_wall_seconds_median"], result[f"{key}_cpu_seconds_median"]
    return f"{wall:.3f} s ({cpu:.3f} s)"


def table(result: dict[str, Any]) -> str:
    """The record as the Markdown table docs/monitoring.md shows (a test keeps the two equal)."""
    r = result
    rows = [
        ("Nodes read (up)", f"{r['nodes']} ({r['nodes_up']})"),
        ("One read of every node: wall, median (max)", _pair(r, "read_wall_seconds", " s")),
        ("One read: operator CPU, median (max)", _pair(r, "read_cpu_seconds", " s")),
        (
            "Operator CPU at a 15 s / 30 s scrape interval",
            f"{100 * r['cpu_per_second_at_15s']:.2f}% / {100 * r['cpu_per_second_at_30s']:.2f}% of a core",
        ),
        ("Operator RSS added", f"{r['rss_added_bytes'] / 2**20:.1f} MiB"),
        (
            "Scrape that reads: wall (operator CPU)",
            _wall_cpu(r, "scrape_reading"),
        ),
        (
            "Scrape from the last read: wall (operator CPU)",
            _wall_cpu(r, "scrape_cached"),
        ),
        ("Body: bytes (gzip)", f"{r['body_bytes']:,} ({r['body_gzip_bytes']:,})"),
        ("redis_* samples (per node)", f"{r['redis_samples']:,} ({r['redis_samples_per_node']:.1f})"),
        ("Load average (1 min) at the end", f"{r['load_average_1m']:.1f}"),
    ]
    lines = ["| At 100 nodes | Measured |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--table", action="store_true", help="print the table of --json's record and exit")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.json.read_text())), end="")
        return
    if args.nodes % 2:
        parser.error("--nodes is even (clusters of a primary and a replica)")
    started = time.monotonic()
    servers, base = start(args.nodes)
    print(f"{args.nodes} valkey-server processes up and formed in {time.monotonic() - started:.1f}s")
    try:
        result = asyncio.run(measure(servers, args.reads))
    finally:
        stop_servers(servers)
        shutil.rmtree(base, ignore_errors=True)
    result["load_average_1m"] = os.getloadavg()[0]
    width = max(len(key) for key in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value:.4g}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
