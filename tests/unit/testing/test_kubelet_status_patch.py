"""The test-bed kubelet's status write (kubelet/pods.py status_patch): what a real kubelet sends.

A real kubelet's status manager patches pod status with a strategic merge
patch computed from the copy it read, so it only ever sends conditions it
owns; a condition another writer set (a readiness gate's, the disruption
controller's) survives even when the kubelet's own copy of the pod is stale.
"""

from __future__ import annotations

from valkey_testbed.kubelet.pods import status_patch


def desired(*conditions: dict[str, object]) -> dict[str, object]:
    return {
        "phase": "Running",
        "conditions": list(conditions),
        "podIP": "127.1.0.9",
        "podIPs": [{"ip": "127.1.0.9"}],
        "hostIPs": [{"ip": "127.0.0.1"}],
        "containerStatuses": [],
    }


def test_only_the_kubelets_own_conditions_are_sent() -> None:
    ready = {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": "t"}
    stale_gate = {"type": "example.com/member", "status": "False", "lastTransitionTime": "t"}
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": "t"}
    patch = status_patch(desired(ready, stale_gate, scheduled))
    assert [c["type"] for c in patch["conditions"]] == ["Ready"]


def test_a_reason_a_condition_no_longer_has_is_removed() -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "t"}
    [sent] = status_patch(desired(ready))["conditions"]
    assert sent["reason"] is None and sent["message"] is None and sent["status"] == "True"
    unready = {**ready, "status": "False", "reason": "ContainersNotReady", "message": "m"}
    [sent] = status_patch(desired(unready))["conditions"]
    assert (sent["reason"], sent["message"]) == ("ContainersNotReady", "m")


def test_the_ip_lists_are_replaced_whole_not_merged() -> None:
    patch = status_patch(desired())
    assert patch["podIPs"] == [{"ip": "127.1.0.9"}, {"$patch": "replace"}]
    assert patch["hostIPs"] == [{"ip": "127.0.0.1"}, {"$patch": "replace"}]
    assert patch["podIP"] == "127.1.0.9" and patch["containerStatuses"] == []
