"""Protection decisions (pure) and role summaries."""

from __future__ import annotations

from controllers.protection import protection_action
from controllers.role import desired_status, summary
from controllers.status import status_patch

FINALIZER = "valkey.gomomento.com/image-protection"


def obj(finalizers: list[str] | None = None, deleting: bool = False) -> dict[str, object]:
    metadata: dict[str, object] = {"name": "x", "finalizers": finalizers or []}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata}


def test_finalizer_follows_references() -> None:
    assert protection_action(obj(), FINALIZER, referenced=True) == "add"
    assert protection_action(obj([FINALIZER]), FINALIZER, referenced=True) == "none"
    assert protection_action(obj([FINALIZER]), FINALIZER, referenced=False) == "remove"
    assert protection_action(obj(), FINALIZER, referenced=False) == "none"
    # A finalizer cannot be added once deletion started; an unprotected object just goes.
    assert protection_action(obj(deleting=True), FINALIZER, referenced=True) == "none"
    assert protection_action(obj([FINALIZER], deleting=True), FINALIZER, referenced=False) == "remove"


def test_role_summary() -> None:
    role = {
        "spec": {
            "categories": [{"name": "read", "access": "allow"}, {"name": "dangerous", "access": "deny"}],
            "commands": [{"name": "flushall", "access": "deny"}],
        }
    }
    assert summary(role) == "+@read -@dangerous (1 command rule)"


def test_status_patch_only_when_changed_and_nulls_removed_keys() -> None:
    assert status_patch({"a": 1}, {"a": 1}) is None
    assert status_patch({"a": 1, "b": 2}, {"a": 3}) == {"status": {"a": 3, "b": None}}


def test_role_in_use_names_at_most_five_clusters_and_keeps_its_transition_time() -> None:
    role = {"metadata": {"name": "reader", "generation": 3}, "spec": {"categories": [{"name": "read"}]}}
    clusters = [f"ns/c{index}" for index in range(7)]
    status = desired_status(role, clusters)
    condition, ready = status["conditions"]
    assert (ready["type"], ready["status"], ready["observedGeneration"]) == ("Ready", "True", 3)
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "InUse",
        "True",
        "UsedByClusters",
    )
    assert condition["message"] == (
        "used by 7 clusters: ns/c0, ns/c1, ns/c2, ns/c3, ns/c4 and 2 more; a delete waits until none uses it"
    )
    assert condition["observedGeneration"] == status["observedGeneration"] == 3
    again = desired_status({**role, "status": status}, clusters[:1])
    assert again["conditions"][0]["lastTransitionTime"] == condition["lastTransitionTime"]
    unused = desired_status({**role, "status": again}, [])["conditions"][0]
    assert (unused["status"], unused["reason"], unused["message"]) == (
        "False",
        "Unused",
        "no cluster uses this role",
    )
