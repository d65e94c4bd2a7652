"""bench/persistence.py without a server: its arguments and pure helpers, and the docs' numbers.

The benchmark itself is a documented command, not part of the test run. What
is cheap to check here: the servers it starts per mode get the directives the
operator renders for that mode; the key counts it expects per shard add up;
and docs/performance.md quotes exactly the record in
bench/results/persistence.json (one source for the numbers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench_support import load_bench

from valkey_operator.valkey.slots import even_ranges
from valkey_testbed.datachecker import SLOTS, key_slot

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "bench" / "results" / "persistence.json"

bench = load_bench("persistence")


def test_the_defaults_measure_every_mode_and_both_recoveries() -> None:
    args = bench.parse_args([])
    assert args.parts == ["throughput", "recovery"]
    assert args.modes == ["none", "rdb", "aof-everysec", "aof-always"]
    assert args.recover == ["aof-everysec", "rdb"]
    assert args.data_mb == 256


def test_gb_asks_for_one_gigabyte() -> None:
    assert bench.parse_args(["--gb"]).data_mb == 1024
    assert bench.parse_args(["--data-mb", "64"]).data_mb == 64


@pytest.mark.parametrize(
    "argv",
    [
        ["--modes", "none,aof"],
        ["--parts", "restore"],
        ["--recover", "none"],
        ["--ops", "0"],
        ["--value-size", "8"],
    ],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(argv)


def test_each_server_gets_the_directives_the_operator_renders_for_its_mode() -> None:
    directives = {mode: dict(bench.mode_directives(mode)) for mode in bench.MODES}
    assert directives["none"]["save"] == "" and directives["none"]["appendonly"] == "no"
    assert directives["rdb"]["save"] == "3600 1 300 100 60 10000" and directives["rdb"]["appendonly"] == "no"
    assert directives["aof-everysec"]["appendonly"] == "yes"
    assert directives["aof-everysec"]["appendfsync"] == "everysec"
    assert directives["aof-always"]["appendfsync"] == "always"
    # the paths are the hand-started server's own directory on disk, not the pod's mount
    assert not any({"dir", "cluster-config-file"} & set(found) for found in directives.values())
    assert bench.server_config("none")["save"] == '""'
    assert bench.server_config("rdb")["save"] == '"3600 1 300 100 60 10000"'


def test_the_keys_expected_per_shard_add_up_to_every_key_written() -> None:
    count = 5000
    per_slot = bench.keys_per_slot(count)
    assert len(per_slot) == SLOTS and sum(per_slot) == count
    assert bench.keys_per_slot(1)[key_slot(bench.key_of(0))] == 1
    shards = [bench.expected_keys(per_slot, [ranged]) for ranged in even_ranges(3)]
    assert sum(shards) == count and all(shard > count // 4 for shard in shards)
    assert bench.key_count(256 * 1024 * 1024, 1024) == 262144


def test_values_name_their_key_and_have_the_size_asked() -> None:
    assert bench.value_of(42, 64).startswith(b"42:") and len(bench.value_of(42, 64)) == 64
    assert bench.value_of(42, 64) != bench.value_of(43, 64)


def test_ratios_are_to_none() -> None:
    assert bench.ratios({"none": 100.0, "aof-always": 25.0}) == {"none": 1.0, "aof-always": 0.25}
    assert bench.ratios({"rdb": 1.0}) == {}


def record() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(RECORD.read_text())
    return found


def claims() -> list[str]:
    """What docs/performance.md must say, from the bench record."""
    data = record()
    throughput, recovery = data["throughput"], data["recovery"]
    args = data["args"]
    lines = [
        f"{data['measured']}, {data['cpus']} cores, load average {data['load_average'][0]:.1f} at the end",
        f"{args['ops']:,} SETs of {args['value_size']} B from {args['clients']} connections, "
        f"each pipelining {args['pipeline']}, median of {args['rounds']} rounds",
    ]
    for mode, ops in throughput["ops_per_s"].items():
        lines.append(f"| {mode} | {ops:,.0f} | {throughput['ratio_to_none'][mode]:.2f}x |")
    lines.append(f"{recovery['data_mb']} MB of values ({recovery['keys']:,} keys of {args['value_size']} B)")
    for mode, measured in recovery["modes"].items():
        lines.append(
            f"| {mode} | {measured['load_s']:.1f} s | {measured['down_s']:.1f} s "
            f"| {measured['served_s']:.1f} s | {measured['active_s']:.1f} s "
            f"| {recovery['served_over_rewrite'][mode]:.2f}x | {recovery['served_over_cache'][mode]:.2f}x |"
        )
    cache = recovery["cache"]
    lines.append(
        f"| none (a cache) | {cache['load_s']:.1f} s | {cache['back_empty_s']:.1f} s "
        f"| {cache['rewrite_s']:.1f} s | {cache['back_empty_s'] + cache['rewrite_s']:.1f} s |"
    )
    return lines


def test_persistence_numbers_in_the_docs_are_the_bench_record() -> None:
    text = " ".join((ROOT / "docs" / "performance.md").read_text().split())
    missing = [claim for claim in claims() if claim not in text]
    assert not missing, "write these as bench/results/persistence.json says:\n" + "\n".join(missing)
