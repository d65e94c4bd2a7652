"""bench/fleet.py without a server: its pure helpers, and the docs' fleet tables equal to its records.

The benchmark itself is a documented command (35 minutes on the shared machine),
not part of the test run. docs/performance.md quotes its rows exactly as the
records in bench/results/fleet-before.json and fleet-after.json hold them.
"""

from __future__ import annotations

from pathlib import Path

from bench_support import load_bench

ROOT = Path(__file__).resolve().parents[2]
RECORDS = [ROOT / "bench" / "results" / f"fleet-{when}.json" for when in ("before", "after", "after-cycle")]

bench = load_bench("fleet")


def _stats(total: int, replconf: int = 0, auth: int = 0) -> dict[str, str]:
    return {
        "total_commands_processed": str(total),
        "cmdstat_replconf": f"calls={replconf},usec=10,usec_per_call=1.00",
        "cmdstat_auth": f"calls={auth},usec=3,usec_per_call=1.00",
    }


def test_the_operators_commands_leave_out_replication_and_the_benchs_own_info() -> None:
    before, after = _stats(100, replconf=10), _stats(160, replconf=40)
    assert bench.operator_commands(before, after, ours=1) == 60 - 30 - 1


def test_a_command_never_called_counts_zero() -> None:
    assert bench.calls({"total_commands_processed": "5"}, "auth") == 0
    assert bench.calls(_stats(5, auth=7), "auth") == 7


def test_shapes_and_their_pods() -> None:
    shape = bench.Shape.parse("2x1")
    assert (shape.shards, shape.replicas, shape.pods, str(shape)) == (2, 1, 4, "2x1")


def test_the_docs_quote_every_row_of_both_records() -> None:
    performance = (ROOT / "docs" / "performance.md").read_text()
    for record in RECORDS:
        rows = bench.read_rows(record)
        assert rows, record
        for row in rows:
            assert bench.format_row(row) in performance, (record.name, bench.format_row(row))
