"""bench/scale.py without a test bed: where ours spends a scale-out, read from the operator's log.

The phases the bench prints for ours come from the operator's structured log
lines (created pod, cluster step Meet / MigrateSlots); a change of those events
or of the log format must show here, not as a bench that silently prints fewer
phases.
"""

from __future__ import annotations

import json

import pytest
from bench_support import ROOT, load_bench

bench = load_bench("scale")

CLUSTER = "ns-1/bench"


def entry(at: str, event: str, cluster: str = CLUSTER, **fields: object) -> str:
    return json.dumps({**fields, "cluster": cluster, "event": event, "level": "info", "timestamp": at})


def test_the_steps_of_the_new_shard_are_timed_from_the_log() -> None:
    lines = [
        entry("2026-12-04T20:45:00.000Z", "created pod", pod="bench-2-x", shard=2),  # before the patch
        "not json",
        entry("2026-12-04T20:45:03.510Z", "created pod", pod="bench-3-abc", shard=3),
        entry("2026-12-04T20:45:03.600Z", "created pod", pod="bench-3-zzz", shard=3, cluster="other/bench"),
        entry(
            "2026-12-04T20:45:05.595Z",
            "cluster step",
            action="Meet(node='bench-0-l', peer='bench-3-abc', peer_ip='127.1.77.218')",
        ),
        entry("2026-12-04T20:45:11.741Z", "cluster step", action="MigrateSlots(node='bench-2-5', slots=())"),
        entry("2026-12-04T20:45:11.742Z", "cluster step", action="MigrateSlots(node='bench-0-l', slots=())"),
        entry("2026-12-04T20:45:12.817Z", "cluster step", action="MigrateSlots(node='bench-1-7', slots=())"),
        entry("2026-12-04T20:45:13.000Z", "reconciled"),
    ]
    since = bench.log_time("2026-12-04T20:45:03.350Z")
    marks = bench.operator_marks(lines, CLUSTER, 3, since)
    relative = {mark: round(at - since, 3) for mark, at in marks.items()}
    assert relative == {"pod_created": 0.16, "meet": 2.245, "first_migration": 8.391, "last_migration": 9.467}


def test_a_meet_of_another_shard_is_not_the_new_nodes() -> None:
    lines = [entry("2026-12-04T20:45:05Z", "cluster step", action="Meet(node='bench-0-l', peer='bench-1-q')")]
    assert bench.operator_marks(lines, CLUSTER, 3, 0.0) == {}


def test_phases_print_in_order_with_the_floor_among_the_sides() -> None:
    assert bench.SIDES[:2] == ("ours", "floor")
    result = {"round": 1, "seconds": 4.0, "keys": 10, "meet_seconds": 0.5, "pod_created_seconds": 0.1}
    assert bench.report_line("ours", result).index("pod_created") < bench.report_line("ours", result).index(
        "meet"
    )
    medians, ratios = bench.summarize({"ours": [{"seconds": 4.0}], "floor": [{"seconds": 2.0}]})
    assert medians == {"ours": 4.0, "floor": 2.0} and ratios == {"ours/floor": 2.0}


@pytest.mark.parametrize("record", ["scale-before", "scale-after", "scale-before-2", "scale-after-2"])
def test_the_performance_doc_shows_the_records_tables(record: str) -> None:
    """docs/performance.md's ours-against-floor tables are rendered from bench/results (one source)."""
    document = json.loads((ROOT / "bench" / "results" / f"{record}.json").read_text())
    page = (ROOT / "docs" / "performance.md").read_text()
    assert bench.rounds_table(document) in page
    if not record.endswith("-2"):  # the second runs are shown by their rounds only
        assert bench.phases_table(document) in page
    assert f"{document['ratios']['ours/floor']:.2f}x" in page
