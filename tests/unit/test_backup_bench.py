"""bench/backup.py without a test bed: its arguments and pure helpers.

The benchmark is a documented command, not part of the test run. What is
cheap to check: its values do not compress (a compressed RDB would make the
MB/s meaningless), the status times and write gaps are read as the bench
reports them, and the defaults are the documented ones.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from bench_support import load_bench

from valkey_testbed.datachecker import WriterReport

ROOT = Path(__file__).resolve().parents[2]

bench = load_bench("backup")


def test_the_defaults_are_one_gigabyte_and_three_rounds() -> None:
    args = bench.parse_args([])
    assert (args.gigabytes, args.rounds, args.value_size) == (1.0, 3, 1024)
    with pytest.raises(SystemExit):
        bench.parse_args(["--gigabytes", "0"])


def test_values_name_their_key_and_do_not_compress() -> None:
    values = [bench.value_of(index, 1024) for index in range(2000)]
    assert all(len(value) == 1024 for value in values)
    assert values[17].startswith(b"17:")
    blob = b"".join(values)
    assert len(zlib.compress(blob)) > 0.99 * len(blob)


def test_rates_and_status_seconds() -> None:
    status = {"startedAt": "2026-12-03T07:00:00Z", "completedAt": "2026-12-03T07:00:20Z"}
    assert bench.status_seconds(status) == 20.0
    assert bench.rate(100_000_000, 20.0) == 5.0
    assert bench.rate(1, 0.0) == 0.0


def test_gaps_are_listed_in_slot_order() -> None:
    gaps = {"10923-16383": 0.3, "0-5460": 0.1, "5461-10922": 0.2}
    report = WriterReport(
        attempted=3,
        acknowledged=3,
        unacknowledged=0,
        failed=0,
        seconds=1.0,
        longest_gap=0.3,
        longest_gap_ended_at=1.0,
        gaps_by_slots=gaps,
        errors={},
    )
    assert bench.shard_gaps(report) == [0.1, 0.2, 0.3]
