"""bench/fleet.py without a server: its pure helpers, its peer side, and the docs' fleet tables
equal to its records.

The benchmark itself is a documented command (35 to 55 minutes on the shared
machine), not part of the test run. docs/performance.md quotes its rows exactly
as the records in bench/results/fleet-*.json (RECORDS) hold them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench_support import load_bench

ROOT = Path(__file__).resolve().parents[2]
RECORDS = [
    ROOT / "bench" / "results" / f"fleet-{when}.json"
    for when in ("before", "after", "after-cycle", "peer", "peer-50")
]

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


def test_commands_of_others_than_the_operator_are_left_out_with_the_benchs_own() -> None:
    """The peer's exec probes send AUTH and PING; the bench's AUTH is then among the AUTHs."""
    before, after = _stats(100, auth=10), _stats(150, auth=25)
    assert bench.operator_commands(before, after, ours=1, others=("auth",)) == 50 - 15 - 1


def test_the_calls_of_every_command_in_between() -> None:
    before = {**_stats(1, replconf=1), "cmdstat_hello": "calls=2,usec=1"}
    after = {**_stats(9, replconf=4, auth=1), "cmdstat_hello": "calls=2,usec=1", "cmdstat_info": "calls=3"}
    assert bench.command_deltas(before, after) == {"replconf": 3, "auth": 1, "info": 3}


def test_the_peer_is_settled_by_its_ready_condition_for_the_current_generation() -> None:
    side = bench.Peer(bench.peer.Peer(Path("/bin/true"), Path("/")))

    def cluster(
        generation: int, observed: int, status: str = "True", state: str = "Ready"
    ) -> dict[str, object]:
        ready = {"type": "Ready", "status": status, "observedGeneration": observed}
        return {"metadata": {"generation": generation}, "status": {"state": state, "conditions": [ready]}}

    assert side.settled(cluster(2, 2))
    assert not side.settled(cluster(2, 1)), "an older generation's Ready"
    assert not side.settled(cluster(2, 2, status="False"))
    assert not side.settled(cluster(2, 2, state="Reconciling"))
    assert not side.settled({"metadata": {"generation": 1}})
    obj = {"spec": {"shards": 2, "replicas": 1}}
    assert side.shape_of(obj) == bench.Shape(2, 1) and side.edit(obj) == {"spec": {"replicas": 2}}
    body = side.body("c001", "ns", bench.Shape(1, 0))
    assert body["spec"]["podSecurityContext"]["runAsNonRoot"] is True, "the fleet's namespaces are restricted"
    assert side.selector("c001") == "valkey.io/cluster=c001"


def test_a_side_may_have_sizes_of_its_own() -> None:
    args = argparse.Namespace(sizes=[1, 10, 100], sizes_of=["peer=10,1"])
    assert bench.sizes_of("peer", args) == [1, 10] and bench.sizes_of("ours", args) == [1, 10, 100]


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
