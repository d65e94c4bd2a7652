"""The reference page's table of reasons and kstatus verdicts, asked of the real kstatus library.

docs/reference/valkeycluster.md lists every reason a ValkeyCluster's conditions can carry, whether
it is Stalled, and what kstatus says once the cluster served and before it first served. For each
row this test writes the status document the operator would store for that reason (through the
same pure functions: report.conditions, planned_status, blocked_status) and runs kstatus
(sigs.k8s.io/cli-utils, testing/kstatus) on it, so the table cannot drift from the code.

A pass reason's state is the one report() gives it: Updating once served, Creating before, Failed
for a new cluster stopped by VersionBelowFloor or PodsFailing; SlotsUncovered and ClusterStateFail
are the client impact that makes Ready False (report._client_impact). The scenarios behind those
rules run in test_kstatus_verdicts.py and tests/e2e/test_cluster_kstatus.py.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

import attrs
import pytest
from status_support import blocked_document, planned_document

from controllers.cluster.decision import decide, stalled
from controllers.cluster.decision.report import Finding, PlannedStatus, Reason, conditions
from controllers.cluster.render.acl import AclErrorReason
from controllers.shared.config_resolve import FailureReason
from valkey_operator.api.cluster import ClusterState
from valkey_operator.core.rest import Obj
from valkey_operator.objectstore.errors import Reason as StorageReason
from valkey_testbed.kstatus import compute

PAGE = Path(__file__).parents[4] / "docs" / "reference" / "valkeycluster.md"
GENERATION = 3
NOW = "2026-12-04T12:00:00Z"
INTERNAL = {Reason.READY, Reason.RECONCILED, Reason.PAUSED, Reason.AS_EXPECTED}
"""Reasons of a settled or paused cluster, not of something it waits for."""
IMPACT = {Reason.SLOTS_UNCOVERED, Reason.CLUSTER_STATE_FAIL}
STOPS_A_NEW_CLUSTER = {Reason.VERSION_BELOW_FLOOR, Reason.PODS_FAILING}
BLOCKED = {
    *typing.get_args(FailureReason),
    *typing.get_args(AclErrorReason),
    decide.TLS_SECRET_INVALID,
    decide.INTERNAL_SECRET_DAMAGED,
    decide.NAME_CONFLICT,
    decide.PASSWORD_SECRET_INVALID,
}


@attrs.frozen
class Row:
    reason: str
    seen: str
    stalled: str
    served: str
    new: str


def rows() -> list[Row]:
    text = PAGE.read_text()
    table = text.split("### Reasons and their kstatus verdicts", 1)[1].split("\n\n| Reason |", 1)[1]
    found = []
    for line in table.split("\n\n", 1)[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`(\w+)`", cells[0])
        if match:
            found.append(Row(match.group(1), *cells[1:]))
    return found


ROWS = rows()


def cluster(status: Obj) -> Obj:
    return {
        "apiVersion": "valkey.gomomento.com/v1alpha1",
        "kind": "ValkeyCluster",
        "metadata": {"name": "c", "namespace": "ns", "generation": GENERATION},
        "status": status,
    }


def pass_status(reason: Reason, served: bool) -> Obj:
    finding = Finding(reason, f"what {reason} says", problem=True)
    if served:
        state = ClusterState.UPDATING
    else:
        state = ClusterState.FAILED if reason in STOPS_A_NEW_CLUSTER else ClusterState.CREATING
    planned = conditions(
        state,
        finding.message,
        (finding,),
        finding if reason in IMPACT else None,
        rejected=reason is Reason.VERSION_BELOW_FLOOR,
    )
    status = PlannedStatus(
        state=state,
        message=finding.message,
        shards=1,
        ready_shards=0,
        ready_nodes=0,
        desired_nodes=1,
        nodes=(),
        conditions=planned,
        uncovered=(),
        findings=(finding,),
    )
    return planned_document({}, GENERATION, status, "e", NOW)


SERVED: Obj = {
    "state": "Active",
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "ClusterReady",
            "message": "",
            "observedGeneration": GENERATION - 1,
            "lastTransitionTime": NOW,
        }
    ],
}


def written(row: Row, served: bool) -> Obj:
    if row.seen == "pass":
        return pass_status(Reason(row.reason), served)
    return blocked_document(SERVED if served else {}, GENERATION, row.reason, "why", "e", NOW)


def test_the_table_lists_every_reason_once() -> None:
    names = [row.reason for row in ROWS]
    assert len(names) == len(set(names)), [name for name in names if names.count(name) > 1]
    by_seen = {seen: {row.reason for row in ROWS if row.seen == seen} for seen in ("pass", "blocked")}
    assert by_seen["pass"] == {str(reason) for reason in Reason} - {str(reason) for reason in INTERNAL}
    assert by_seen["blocked"] == BLOCKED
    held = {row.reason for row in ROWS if row.seen == "restore held"}
    assert set(typing.get_args(StorageReason)) <= held
    assert {stalled.RESTORE_IMAGE_UNKNOWN, stalled.BACKUP_FAILED} <= held
    assert {row.seen for row in ROWS} == {"pass", "blocked", "restore held"}


def test_the_stalled_column_is_what_the_code_says() -> None:
    marked = {row.reason for row in ROWS if row.stalled == "yes"}
    assert marked == set(stalled.BLOCKED) | set(stalled.FINDINGS)
    assert {row.reason for row in ROWS if row.stalled == "new cluster only"} == {
        str(reason) for reason in STOPS_A_NEW_CLUSTER
    }


@pytest.mark.parametrize("served", [True, False], ids=["once-served", "before-served"])
def test_each_reason_gets_the_verdict_the_table_gives(served: bool) -> None:
    listed = [row for row in ROWS if (row.served if served else row.new)]
    verdicts = compute([cluster(written(row, served)) for row in listed])
    wrong = {
        row.reason: (verdict.status, verdict.message)
        for row, verdict in zip(listed, verdicts, strict=True)
        if verdict.status != (row.served if served else row.new)
    }
    assert not wrong, f"kstatus disagrees with docs/reference/valkeycluster.md: {wrong}"
    assert {row.reason for row in ROWS if not row.served} == {
        row.reason for row in ROWS if row.seen == "restore held"
    }, "only a restore (before the cluster first served) has no verdict once served"
