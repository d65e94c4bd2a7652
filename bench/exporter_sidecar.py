"""redis_exporter as a per-pod sidecar: memory per pod, CPU and time per scrape, series, freshness.

The real redis_exporter (the test bed's image `oliver006/redis_exporter:<version>`, built from its
Go module) next to each of N real valkey-server processes of one hand-formed cluster (cluster
mode; N=1: one primary with every slot; N>1: N/2 primaries with a replica each), each pair on its
own 127.77.x.y address as a pod on its pod IP: Valkey on a free port, the exporter on :9121,
both bound to that address only. Each exporter runs as the image's user (59000) with the flags
and the least-privileged ACL user the sidecar renders (controllers/cluster/render/exporter.py),
so the run also proves those rules suffice: every node's ACL LOG must stay empty.

Per N it measures, after three warm-up scrapes per exporter:
- memory per pod: each exporter's VmRSS after the scrapes, and its peak (VmHWM);
- CPU per scrape: user+sys ticks of each exporter (and of its valkey-server, minus that server's
  idle rate measured first over --idle-seconds) over --scrapes scrapes, divided by the scrapes;
- scrape time and size: wall time of each GET /metrics on a fresh connection (client side),
  the body's bytes, and gzip's (Prometheus asks for gzip);
- series: sample lines of one scrape, by family prefix;
- freshness: scrape, INCR a key the first primary owns 5 times, scrape at once: the exporter reads
  INFO at scrape time, so `redis_commands_total{cmd="incr"}` shows all 5 in the next scrape.

Prints a table and writes bench/results/exporter-sidecar.json (or --output). Bounded: --scrapes
rounds over the exporters, one request at a time; every process is stopped by pid at the end.
Everything listens on and dials 127.0.0.0/8 only.

    nice python bench/exporter_sidecar.py [--instances 1,20] [--scrapes 100] [--image REF]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from controllers.cluster.render.exporter import EXPORTER_RULES
from controllers.cluster.render.exporter import FLAGS as SIDECAR_FLAGS
from valkey_operator.api.resources import EXPORTER_USER
from valkey_testbed import images, processes, redisexporter, versions
from valkey_testbed.kubelet.ipam import listening_ipv4_addresses
from valkey_testbed.valkeyproc import (
    ValkeyServer,
    form_cluster,
    server_base_dir,
    start_server,
    stop_servers,
)

PASSWORD = "exporter-sidecar-bench-admin"
EXPORTER_PASSWORD = "exporter-sidecar-bench-exporter"
RESULTS = Path(__file__).resolve().parent / "results" / "exporter-sidecar.json"
TICKS = os.sysconf("SC_CLK_TCK")
FRESHNESS_INCRS = 5
EXPECTED_DENIAL = "slowlog|get"
"""Left out of the exporter's rules on purpose (render/exporter.py): the one denial a node logs."""


def cpu_seconds(pid: int) -> float:
    """user + sys of a process (every thread, exited ones too), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def free_hosts(count: int) -> list[str]:
    """count addresses 127.77.K.10+ with no listener yet (K random: two runs rarely collide)."""
    taken = listening_ipv4_addresses()
    third = random.randrange(1, 250)
    hosts = [f"127.77.{third}.{10 + index}" for index in range(count)]
    clash = [host for host in hosts if host in taken]
    if clash:
        raise SystemExit(f"addresses already listening: {clash}; run again")
    return hosts


@attrs.define
class Pod:
    """One Valkey and its exporter on one address."""

    valkey: ValkeyServer
    exporter: processes.ProcessRecord | None = None

    @property
    def listen(self) -> tuple[str, int]:
        return self.valkey.host, redisexporter.PORT


@contextlib.contextmanager
def pods(image: images.ImageEntry, exporter: images.ImageEntry, count: int) -> Iterator[list[Pod]]:
    base = server_base_dir()
    hosts = free_hosts(count)
    started: list[ValkeyServer] = []
    records: list[processes.ProcessRecord] = []
    try:
        for host in hosts:
            started.append(start_server(image, host, base_dir=base, cluster=True, password=PASSWORD))
        primaries = started[: max(1, count // 2)]
        form_cluster(primaries, started[len(primaries) :], timeout=180)
        rules = ("reset", "on", f">{EXPORTER_PASSWORD}", *EXPORTER_RULES)
        for server in started:
            reply = server.command("ACL", "SETUSER", EXPORTER_USER, *rules)
            if reply != b"OK":
                raise SystemExit(f"ACL SETUSER on {server.host}: {reply!r}")
            server.command("ACL", "LOG", "RESET")
        result = [Pod(server) for server in started]
        for pod in result:
            pod.exporter = redisexporter.start_exporter(
                exporter,
                pod.valkey.address,
                pod.listen,
                base / f"exporter-{pod.valkey.host}.log",
                username=EXPORTER_USER,
                password=EXPORTER_PASSWORD,
                flags=SIDECAR_FLAGS,
            )
            records.append(pod.exporter)
        yield result
    finally:
        processes.stop(records, grace=5)
        stop_servers(started, grace=5)
        shutil.rmtree(base, ignore_errors=True)


def exporter_pid(pod: Pod) -> int:
    assert pod.exporter is not None
    return pod.exporter.pid


def series_by_prefix(samples: dict[str, float]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for series in samples:
        family = series.split("{", 1)[0]
        prefix = family.split("_", 1)[0] + "_"
        if family.startswith("redis_exporter_"):
            prefix = "redis_exporter_"
        counts[prefix] = counts.get(prefix, 0) + 1
    return dict(sorted(counts.items()))


def families(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.startswith("# TYPE "))


def key_on(server: ValkeyServer) -> str:
    """A key whose slot the server owns (asks CLUSTER KEYSLOT and the node's own slot ranges)."""
    nodes = server.command("CLUSTER", "NODES")
    assert isinstance(nodes, bytes), nodes
    myself = next(line for line in nodes.decode().splitlines() if "myself" in line)
    ranges = [tuple(map(int, part.split("-"))) for part in myself.split()[8:] if "-" in part]
    for index in range(100000):
        key = f"fresh:{index}"
        slot = server.command("CLUSTER", "KEYSLOT", key)
        if any(low <= int(slot) <= high for low, high in ranges):  # type: ignore[arg-type]
            return key
    raise SystemExit(f"no key found for {server.host}")


def freshness(pod: Pod) -> dict[str, Any]:
    """A counter change is visible at the very next scrape (the exporter reads INFO then)."""
    series = 'redis_commands_total{cmd="incr"}'
    key = key_on(pod.valkey)
    before = redisexporter.scrape(pod.listen).samples().get(series, 0.0)
    for _ in range(FRESHNESS_INCRS):
        pod.valkey.command("INCR", key)
    written = time.perf_counter()
    after_scrape = redisexporter.scrape(pod.listen)
    visible_after = time.perf_counter() - written
    after = after_scrape.samples().get(series, 0.0)
    return {
        "series": series,
        "before": before,
        "incrs": FRESHNESS_INCRS,
        "after": after,
        "visible_in_next_scrape": after - before == FRESHNESS_INCRS,
        "seconds_from_last_write_to_scrape_body": round(visible_after, 4),
    }


def acl_denials(pods_: Sequence[Pod]) -> list[str]:
    """Commands the nodes refused the exporter (ACL LOG), as `object (reason)`, one per kind."""
    denied: set[str] = set()
    for pod in pods_:
        reply = pod.valkey.command("ACL", "LOG")
        for entry in reply if isinstance(reply, list) else []:
            fields = dict(zip(entry[::2], entry[1::2], strict=False))  # type: ignore[index]
            denied.add(f"{fields.get(b'object', b'').decode()} ({fields.get(b'reason', b'').decode()})")
    return sorted(denied)


def series_with_upstream_defaults(exporter: images.ImageEntry, pod: Pod) -> int:
    """Series of one scrape by an exporter with upstream's default flags (Go runtime series, CONFIG)
    on the same node, as the admin user (CONFIG GET needs it), to show what SIDECAR_FLAGS save."""
    listen = (pod.valkey.host, redisexporter.PORT + 1)
    with tempfile.TemporaryDirectory() as tmp:
        record = redisexporter.start_exporter(
            exporter, pod.valkey.address, listen, Path(tmp) / "log", password=PASSWORD, flags=()
        )
        try:
            return len(redisexporter.scrape(listen).samples())
        finally:
            processes.stop([record], grace=5)


def quantiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "median": round(statistics.median(ordered), 3),
        "p95": round(p95, 3),
        "max": round(ordered[-1], 3),
    }


def measure(
    image: images.ImageEntry, exporter: images.ImageEntry, count: int, scrapes: int, idle: float
) -> dict[str, Any]:
    with pods(image, exporter, count) as started:
        print(f"  {count} pod(s) up; idle {idle:.0f} s, then {scrapes} scrapes each", flush=True)
        # Idle rates first (gossip, cron, the exporter's runtime), so a scrape's share can be separated.
        idle_start = {p.valkey.record.pid: cpu_seconds(p.valkey.record.pid) for p in started}
        idle_exp = {exporter_pid(p): cpu_seconds(exporter_pid(p)) for p in started}
        rss_before = [memory_mib(exporter_pid(p))[0] for p in started]
        time.sleep(idle)
        valkey_idle_rate = {pid: (cpu_seconds(pid) - value) / idle for pid, value in idle_start.items()}
        exporter_idle_rate = {pid: (cpu_seconds(pid) - value) / idle for pid, value in idle_exp.items()}
        for _ in range(3):
            for pod in started:
                redisexporter.scrape(pod.listen)
        valkey_cpu = {p.valkey.record.pid: cpu_seconds(p.valkey.record.pid) for p in started}
        exporter_cpu = {exporter_pid(p): cpu_seconds(exporter_pid(p)) for p in started}
        durations: list[float] = []
        sizes: list[int] = []
        began = time.monotonic()
        for _ in range(scrapes):
            for pod in started:
                result = redisexporter.scrape(pod.listen)
                durations.append(result.seconds * 1000)
                sizes.append(len(result.body))
        elapsed = time.monotonic() - began
        exporter_per_scrape = [
            (cpu_seconds(pid) - value - exporter_idle_rate[pid] * elapsed) / scrapes * 1000
            for pid, value in exporter_cpu.items()
        ]
        valkey_per_scrape = [
            (cpu_seconds(pid) - value - valkey_idle_rate[pid] * elapsed) / scrapes * 1000
            for pid, value in valkey_cpu.items()
        ]
        memory = [memory_mib(exporter_pid(p)) for p in started]
        sample = redisexporter.scrape(started[0].listen)
        zipped = [len(redisexporter.scrape(p.listen, gzip_body=True).body) for p in started]
        samples = sample.samples()
        fresh = freshness(started[0])
        denied = acl_denials(started)
        default_series = series_with_upstream_defaults(exporter, started[0])
        return {
            "instances": count,
            "topology": "1 primary" if count == 1 else f"{count // 2} primaries x 1 replica",
            "scrapes_per_instance": scrapes,
            "rss_mib_after_start": quantiles(rss_before),
            "rss_mib": quantiles([rss for rss, _ in memory]),
            "peak_rss_mib": quantiles([hwm for _, hwm in memory]),
            "rss_mib_all_exporters": round(sum(rss for rss, _ in memory), 1),
            "exporter_cpu_ms_per_scrape": quantiles(exporter_per_scrape),
            "exporter_idle_cpu_ms_per_s": round(statistics.median(exporter_idle_rate.values()) * 1000, 3),
            "valkey_cpu_ms_per_scrape": quantiles(valkey_per_scrape),
            "scrape_ms": quantiles(durations),
            "body_bytes": quantiles([float(size) for size in sizes]),
            "gzip_bytes": quantiles([float(size) for size in zipped]),
            "series": len(samples),
            "families": families(sample.text),
            "series_by_prefix": series_by_prefix(samples),
            "series_with_upstream_default_flags": default_series,
            "redis_up": samples.get("redis_up"),
            "last_scrape_error": samples.get("redis_exporter_last_scrape_error"),
            "freshness": fresh,
            "acl_denials": denied,
        }


def table(runs: Sequence[dict[str, Any]]) -> str:
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("instances", lambda r: str(r["instances"])),
        (
            "RSS per exporter, MiB (median / max)",
            lambda r: f"{r['rss_mib']['median']} / {r['rss_mib']['max']}",
        ),
        ("peak RSS (VmHWM), MiB (max)", lambda r: str(r["peak_rss_mib"]["max"])),
        ("exporter CPU per scrape, ms (median)", lambda r: str(r["exporter_cpu_ms_per_scrape"]["median"])),
        ("valkey-server CPU per scrape, ms (median)", lambda r: str(r["valkey_cpu_ms_per_scrape"]["median"])),
        ("exporter idle CPU, ms/s", lambda r: str(r["exporter_idle_cpu_ms_per_s"])),
        ("scrape time, ms (median / p95)", lambda r: f"{r['scrape_ms']['median']} / {r['scrape_ms']['p95']}"),
        ("body, bytes (median)", lambda r: str(int(r["body_bytes"]["median"]))),
        ("gzip body, bytes (median)", lambda r: str(int(r["gzip_bytes"]["median"]))),
        ("series per instance", lambda r: str(r["series"])),
        ("metric families", lambda r: str(r["families"])),
        ("series with upstream's default flags", lambda r: str(r["series_with_upstream_default_flags"])),
        ("freshness: +5 INCR in next scrape", lambda r: str(r["freshness"]["visible_in_next_scrape"])),
        ("ACL denials", lambda r: ", ".join(r["acl_denials"]) or "none"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  " + "  ".join(f"{cell(r):>14}" for r in runs) for name, cell in rows)


def markdown(record: dict[str, Any]) -> str:
    """The table docs/metrics.md shows (tests/unit/test_exporter_sidecar_bench.py keeps them equal)."""
    runs = record["runs"]

    def row(name: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return f"| {name} | " + " | ".join(cell(run) for run in runs) + " |"

    lines = [
        "| per pod | " + " | ".join(f"{run['instances']} pod(s)" for run in runs) + " |",
        "|---|" + "---|" * len(runs),
        row(
            "exporter RSS, MiB (median; max)",
            lambda r: f"{r['rss_mib']['median']:.1f}; {r['rss_mib']['max']:.1f}",
        ),
        row(
            "exporter CPU per scrape, ms (median)",
            lambda r: f"{r['exporter_cpu_ms_per_scrape']['median']:.1f}",
        ),
        row(
            "valkey-server CPU per scrape, ms (median)",
            lambda r: f"{r['valkey_cpu_ms_per_scrape']['median']:.1f}",
        ),
        row(
            "scrape time, ms (median; p95)",
            lambda r: f"{r['scrape_ms']['median']:.1f}; {r['scrape_ms']['p95']:.1f}",
        ),
        row(
            "body, KB (plain; gzip)",
            lambda r: f"{r['body_bytes']['median'] / 1000:.1f}; {r['gzip_bytes']['median'] / 1000:.1f}",
        ),
        row(
            "series (upstream's default flags)",
            lambda r: f"{r['series']} ({r['series_with_upstream_default_flags']})",
        ),
        row(
            "+5 INCR seen by the next scrape",
            lambda r: "yes" if r["freshness"]["visible_in_next_scrape"] else "no",
        ),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--instances", default="1,20", help="comma-separated pod counts (default 1,20)")
    parser.add_argument("--scrapes", type=int, default=100, help="scrapes per exporter (default 100)")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="idle window for CPU baselines")
    parser.add_argument("--image", help="Valkey image of the catalog (default: the newest)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    image = images.resolve_image(args.image or images.newest_image())
    exporter = images.resolve_image(images.EXPORTER_IMAGE)
    if image is None or exporter is None:
        print("images missing: run python -m valkey_testbed build", file=sys.stderr)
        return 1
    counts = [int(part) for part in args.instances.split(",")]
    runs = []
    for count in counts:
        print(f"measuring {count} instance(s)...", flush=True)
        runs.append(measure(image, exporter, count, args.scrapes, args.idle_seconds))
    print(table(runs))
    print()
    record = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "redis_exporter": versions.REDIS_EXPORTER,
        "valkey_image": image.reference,
        "flags": list(SIDECAR_FLAGS),
        "acl_user": EXPORTER_USER,
        "acl_rules": list(EXPORTER_RULES),
        "machine": f"{os.cpu_count()} cores, shared",
        "runs": runs,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2) + "\n")
    print(markdown(record))
    print(f"recorded in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
