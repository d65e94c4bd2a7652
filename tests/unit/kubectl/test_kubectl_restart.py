"""When `restart --wait` calls a rolling restart done: every pod from before it gone, and the
cluster Current again (no rollout, Active, latest generation observed, Ready)."""

from __future__ import annotations

from typing import Any

from valkey_operator.kubectl.restart import settled


def cluster(generation: int = 2, **status: Any) -> dict[str, Any]:
    ready = [{"type": "Ready", "status": "True"}]
    base = {"state": "Active", "observedGeneration": 2, "conditions": ready}
    return {"metadata": {"generation": generation}, "status": {**base, **status}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": name + "-uid"}}


OLD = {"cache-0-a-uid", "cache-0-b-uid"}


def test_done_once_every_old_pod_is_gone_and_the_cluster_is_current() -> None:
    assert settled(cluster(), OLD, [pod("cache-0-c"), pod("cache-0-d")]) is None


def test_not_done_while_an_old_pod_is_left_even_if_the_status_looks_settled() -> None:
    """Before the operator starts rolling, the status is still Active with no rollout."""
    assert settled(cluster(), OLD, [pod("cache-0-a"), pod("cache-0-c")]) == (
        "1 pod(s) from before the restart left: cache-0-a"
    )


def test_not_done_while_rolling_updating_unobserved_or_not_ready() -> None:
    new = [pod("cache-0-c")]
    assert settled(cluster(rollout={"shard": 0}), OLD, new) == "rollout under way"
    assert settled(cluster(state="Updating"), OLD, new) == "state Updating"
    assert settled(cluster(generation=3), OLD, new) == "latest generation not yet observed"
    assert settled(cluster(conditions=[{"type": "Ready", "status": "False"}]), OLD, new) == "not Ready"
