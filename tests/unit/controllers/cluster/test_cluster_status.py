"""The cluster reconciler's status documents (pure): planned and blocked."""

from __future__ import annotations

from status_support import blocked_document, planned_document

from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import plan
from controllers.cluster.decision.status_document import endpoint
from controllers.shared.observation import Observation

NOW = "2026-12-01T09:00:00Z"

DESIRED = Desired(
    shards=1, replicas_per_shard=0, template_hash="h1", image="valkey/valkey:9.1.2", config_hash="abc"
)


def test_a_fresh_cluster_is_creating_with_its_endpoint_and_generation() -> None:
    planned = plan(Observation(pods=()), DESIRED, Context())
    status = planned_document({}, 3, planned.status, endpoint("c", "ns", "cluster.local"), NOW)
    assert status["state"] == "Creating"
    assert status["endpoint"] == "c-client.ns.svc.cluster.local:6379"
    assert status["observedGeneration"] == 3
    assert {c["type"] for c in status["conditions"]} == {"Ready", "Progressing", "Degraded", "Stalled"}
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])
    assert status["currentImage"] == "valkey/valkey:9.1.2" and status["configHash"] == "abc"


def test_conditions_keep_their_transition_time_when_status_does_not_change() -> None:
    planned = plan(Observation(pods=()), DESIRED, Context())
    first = planned_document({}, 1, planned.status, "e", NOW)
    for condition in first["conditions"]:
        condition["lastTransitionTime"] = "2020-01-01T00:00:00Z"
    second = planned_document(first, 1, planned.status, "e", "2026-12-01T09:30:00Z")
    assert second == first


def test_blocked_status_says_why_and_keeps_the_recorded_state() -> None:
    status = blocked_document({}, 2, "ImageNotFound", "ValkeyImage v9 not found", "e", NOW)
    assert status["state"] == "Creating"
    assert status["message"] == "ImageNotFound: ValkeyImage v9 not found"
    progressing = next(c for c in status["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "ImageNotFound")
    assert (
        blocked_document({"state": "Active", "shards": 3}, 2, "BaseNotFound", "m", "e", NOW)["state"]
        == "Active"
    )
    assert blocked_document({"state": "Active", "shards": 3}, 2, "BaseNotFound", "m", "e", NOW)["shards"] == 3


def test_every_condition_reason_is_documented() -> None:
    from pathlib import Path

    from controllers.cluster.decision.report import Reason

    page = (Path(__file__).parents[4] / "docs" / "reference" / "valkeycluster.md").read_text()
    internal = {Reason.READY, Reason.RECONCILED, Reason.PAUSED, Reason.AS_EXPECTED}
    missing = [
        reason.value for reason in Reason if reason not in internal and f"`{reason.value}`" not in page
    ]
    assert not missing, f"reasons missing from docs/reference/valkeycluster.md: {missing}"


def test_a_rolling_update_keeps_its_start_time_in_status() -> None:
    import attrs

    from controllers.cluster.decision.report import RolloutProgress

    planned = plan(Observation(pods=()), DESIRED, Context())
    progress = RolloutProgress(shards_updated=1, shards=3, shard=1, step="creating a surge pod")
    status = attrs.evolve(planned.status, rollout=progress)
    first = planned_document({}, 1, status, "e", "2026-12-01T10:00:00Z")
    assert first["rollout"] == {
        "shardsUpdated": 1,
        "shards": 3,
        "shard": 1,
        "step": "creating a surge pod",
        "startedAt": "2026-12-01T10:00:00Z",
    }
    later = planned_document(first, 1, status, "e", "2026-12-01T10:05:00Z")
    assert later["rollout"]["startedAt"] == "2026-12-01T10:00:00Z"
    assert "rollout" not in planned_document(later, 1, planned.status, "e", "2026-12-01T10:06:00Z")
