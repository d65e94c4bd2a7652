"""bench/archive.py without a server: its sides' directives, and the docs' numbers.

The benchmark is a documented command, not part of the test run; docs/performance.md quotes
exactly its record in bench/results/archive.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench_support import load_bench

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "bench" / "results" / "archive.json"

bench = load_bench("archive")


def test_every_side_runs_aof_everysec_as_the_operator_renders_it_and_archiving_adds_timestamps() -> None:
    persistence = load_bench("persistence")
    rendered = persistence.server_config("aof-everysec")
    assert rendered["appendonly"] == "yes" and rendered["appendfsync"] == "everysec"
    for side in bench.SIDES:
        config = bench.config(side)
        assert {key: config[key] for key in rendered} == rendered
        assert (config.get("aof-timestamp-enabled") == "yes") is (side in {"aof+ts", "aof+archive"}), side


def record() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(RECORD.read_text())
    return found


def claims() -> list[str]:
    data = record()
    results, args = data["results"], data["args"]
    lines = [
        f"{data['measured']}, {data['cpus']} cores, load average {data['load_average'][0]:.1f} at the end",
        f"{args['ops']:,} SETs of {args['value_size']} B from {args['clients']} connections, "
        f"each pipelining {args['pipeline']}, median of {args['rounds']} rounds",
    ]
    for side, ops in results["ops_per_s"].items():
        lines.append(f"| {side} | {ops:,.0f} | {results['ratio_to_aof'][side]:.2f}x |")
    lag = results["archive_lag_s"]
    lines.append(f"median {lag['median']:.1f} s, at most {lag['max']:.1f} s")
    return lines


def test_archive_numbers_in_the_docs_are_the_bench_record() -> None:
    text = " ".join((ROOT / "docs" / "performance.md").read_text().split())
    missing = [claim for claim in claims() if claim not in text]
    assert not missing, "write these as bench/results/archive.json says:\n" + "\n".join(missing)
