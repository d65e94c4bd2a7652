"""decide() on the day-2 requests: the switchover annotation, the restartedAt annotation, replica sync."""

from __future__ import annotations

import attrs
import pytest
from decide_harness import World, run, step, world
from render_support import context
from simulate import SimSettings

from controllers.cluster.decision.actions import DeletePod, Failover
from controllers.cluster.decision.switchover import (
    FAILED,
    REFUSED,
    STARTED,
    SUCCEEDED,
)
from controllers.cluster.render.template import template_hash, template_inputs
from valkey_operator.api.cluster import NodeRole
from valkey_operator.api.resources import PAUSED_ANNOTATION, RESTARTED_AT_ANNOTATION, SWITCHOVER_ANNOTATION
from valkey_operator.api.switchover import Request, parse

NODES = (("a", "z1"), ("b", "z2"), ("c", "z3"))


def active(shards: int = 2, replicas: int = 1, k8s_nodes: object = NODES, **sim: object) -> World:
    found = run(world(shards, replicas, SimSettings(cluster="vk", k8s_nodes=k8s_nodes, **sim)), passes=150)  # type: ignore[arg-type]
    assert found.state == "Active", found.status.get("message")
    return found


def primary_of(found: World, shard: int) -> str:
    (name,) = [
        name
        for name, pod in found.sim.pods.items()
        if pod.shard == shard and (node := found.sim.node_of(name)) is not None and node.slots
    ]
    return name


def replicas_of(found: World, shard: int) -> list[str]:
    return sorted(
        name
        for name, pod in found.sim.pods.items()
        if pod.shard == shard
        and (node := found.sim.node_of(name)) is not None
        and node.role is NodeRole.REPLICA
    )


def ask(found: World, value: str, **more: str) -> None:
    found.annotate({SWITCHOVER_ANNOTATION: value, **more})


def switchover(found: World) -> dict[str, object]:
    return dict(found.status.get("switchover") or {})


def finished(found: World) -> bool:
    return switchover(found).get("phase") not in {None, "Running"}


def reasons(found: World, since: int = 0) -> list[str]:
    return [event.reason for decision in found.decisions[since:] for event in decision.events]


def failovers(found: World, since: int = 0) -> list[str]:
    return [
        action.node
        for decision in found.decisions[since:]
        for action in decision.actions
        if isinstance(action, Failover)
    ]


# ---- the value ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("0", Request(0)),
        ("12", Request(12)),
        (" 3 ", Request(3)),
        ("1/vk-1-abcde", Request(1, "vk-1-abcde")),
        ("1@20261203T132000Z", Request(1, None, "20261203T132000Z")),
        ("2/vk-2-x@a@b", Request(2, "vk-2-x", "a@b")),
        ("0@", Request(0, None, "")),
    ],
)
def test_a_value_names_a_shard_a_pod_and_a_token(value: str, parsed: Request) -> None:
    assert parse(value) == parsed


@pytest.mark.parametrize("value", ["", "x", "-1", "1/", "1/Pod", "1/vk_1", "one/vk-1", "1 /vk", "12345"])
def test_a_bad_value_names_the_expected_format(value: str) -> None:
    message = parse(value)
    assert isinstance(message, str) and "<shard>[/<pod>][@<token>]" in message


# ---- carried out ------------------------------------------------------------------------------------


def test_a_switchover_hands_the_shard_over_once_to_its_in_sync_replica() -> None:
    found = active()
    before, (replica,) = primary_of(found, 1), replicas_of(found, 1)
    other = primary_of(found, 0)
    start = len(found.decisions)
    ask(found, "1@t1")
    step(found)
    assert switchover(found)["phase"] == "Running" and failovers(found, start) == [], "recorded before acting"
    run(found, passes=40, until=finished)
    status = switchover(found)
    assert status["phase"] == "Succeeded", status
    assert (status["request"], status["from"], status["to"]) == ("1@t1", before, replica)
    assert status["startedAt"] and status["finishedAt"]
    assert primary_of(found, 1) == replica and primary_of(found, 0) == other
    assert failovers(found, start) == [replica]
    assert reasons(found, start).count(STARTED) == 1 and reasons(found, start).count(SUCCEEDED) == 1
    # The same value again, the operator restarted (the status is all it remembers): nothing.
    done = len(found.decisions)
    run(found, passes=20, until=lambda w: False)
    assert switchover(found) == status
    # The spread may even the Kubernetes nodes out around it, moving shard 0 only.
    assert not set(failovers(found, done)) & {before, replica}
    assert not {STARTED, SUCCEEDED, REFUSED, FAILED} & set(reasons(found, done))
    assert primary_of(found, 1) == replica, "the spread must not undo a requested switchover"
    # A new token is a new request: the shard goes back.
    ask(found, "1@t2")
    run(found, passes=40, until=finished)
    assert switchover(found)["phase"] == "Succeeded" and primary_of(found, 1) == before


def test_a_named_replica_takes_over() -> None:
    found = active(1, 2)
    target = replicas_of(found, 0)[1]
    ask(found, f"0/{target}@x")
    run(found, passes=40, until=finished)
    assert switchover(found)["phase"] == "Succeeded" and primary_of(found, 0) == target


def test_a_failover_that_never_happens_fails_the_request_and_the_old_primary_stays() -> None:
    found = active(1, 1)
    before = primary_of(found, 0)
    start = len(found.decisions)
    found.sim.settings = attrs.evolve(found.sim.settings, failing_failovers=frozenset(range(100)))
    ask(found, "0")
    run(found, passes=120, until=finished)
    status = switchover(found)
    assert status["phase"] == "Failed" and "did not take over" in str(status["message"]), status
    assert primary_of(found, 0) == before
    assert len(failovers(found, start)) >= 2, "retried with the rollout's backoff before failing"
    assert reasons(found, start).count(FAILED) == 1


# ---- refused ------------------------------------------------------------------------------------


def refused(found: World, value: str, **more: str) -> str:
    start = len(found.decisions)
    ask(found, value, **more)
    step(found)
    status = switchover(found)
    assert status["phase"] == "Refused" and status["request"] == value, status
    assert failovers(found, start) == []
    run(found, passes=5, until=lambda w: False)
    assert failovers(found, start) == [] and reasons(found, start).count(REFUSED) == 1
    return str(status["message"])


def test_refusals_name_what_is_wrong_and_change_nothing() -> None:
    found = active()
    primaries = (primary_of(found, 0), primary_of(found, 1))
    assert "<shard>[/<pod>][@<token>]" in refused(found, "first")
    assert "shard 5 does not exist" in refused(found, "5")
    other = replicas_of(found, 0)[0]
    assert f"pod {other} is not a replica of shard 1" in refused(found, f"1/{other}@a")
    assert "already the primary" in refused(found, f"1/{primaries[1]}@b")
    assert "paused" in refused(found, "1@c", **{PAUSED_ANNOTATION: "true"})
    assert (primary_of(found, 0), primary_of(found, 1)) == primaries


def test_a_shard_without_replicas_or_without_one_in_sync_is_refused() -> None:
    assert "no replica" in refused(active(1, 0), "0")
    found = active(1, 1)
    (replica,) = replicas_of(found, 0)
    _lag(found, replica)
    assert f"pod {replica} is not in sync" in refused(found, f"0/{replica}")
    assert "no replica of shard 0 is in sync" in refused(found, "0@again")


def _lag(found: World, replica: str) -> None:
    """The replica's link goes down and stays down (a full sync that does not end)."""
    node = found.sim.node_of(replica)
    assert node is not None
    node.link_up, node.sync_left = False, 10_000


def test_a_rolling_update_refuses_a_switchover() -> None:
    found = active(1, 1)
    found.annotate({RESTARTED_AT_ANNOTATION: "2026-12-03T13:20:00Z"})
    step(found)
    assert "rollout" in found.status
    found.annotate({RESTARTED_AT_ANNOTATION: "2026-12-03T13:20:00Z", SWITCHOVER_ANNOTATION: "0"})
    step(found)
    assert switchover(found)["phase"] == "Refused"
    assert "rolling update" in str(switchover(found)["message"])


# ---- restart ------------------------------------------------------------------------------------


def test_restarted_at_is_in_the_template_only_when_set() -> None:
    plain = context()
    assert "restartedAt" not in template_inputs(plain)
    assert template_hash(plain) == "68c4f487d83dacc8", "an upgrade must not roll clusters without it"
    restarted = context(name="cache")
    annotated = attrs.evolve(
        restarted,
        cluster=attrs.evolve(
            restarted.cluster,
            metadata=attrs.evolve(
                restarted.cluster.metadata, annotations={RESTARTED_AT_ANNOTATION: "2026-12-03T13:20:00Z"}
            ),
        ),
    )
    assert template_inputs(annotated)["restartedAt"] == "2026-12-03T13:20:00Z"
    assert template_hash(annotated) != template_hash(plain)


def test_a_new_restarted_at_rolls_every_pod_once() -> None:
    found = active(2, 1)
    old = set(found.sim.pods)
    start = len(found.decisions)
    found.annotate({RESTARTED_AT_ANNOTATION: "2026-12-03T13:20:00Z"})
    run(found, passes=200, until=lambda w: w.state == "Active" and "rollout" not in w.status)
    live = {name for name, pod in found.sim.pods.items() if pod.shard is not None}
    assert found.state == "Active" and not live & old
    deleted = [a for d in found.decisions[start:] for a in d.actions if isinstance(a, DeletePod)]
    assert {a.pod for a in deleted} >= old
    assert reasons(found, start).count("RolloutStarted") == 1
    done = len(found.decisions)
    run(found, passes=10, until=lambda w: False)
    assert not [a for d in found.decisions[done:] for a in d.actions if isinstance(a, DeletePod)]


# ---- inSync ------------------------------------------------------------------------------------


def test_status_nodes_say_whether_each_replica_is_in_sync() -> None:
    found = active(1, 1)
    nodes = {node["pod"]: node for node in found.status["nodes"]}
    (replica,) = replicas_of(found, 0)
    assert nodes[replica]["inSync"] is True
    assert "inSync" not in nodes[primary_of(found, 0)]
    _lag(found, replica)
    step(found)
    assert {node["pod"]: node for node in found.status["nodes"]}[replica]["inSync"] is False


@pytest.mark.parametrize("shard", [0, 1])
def test_the_spread_never_moves_a_requested_primary_back(shard: int) -> None:
    """Two Kubernetes nodes, one primary each: a switchover puts two on one node, and the spread
    evens them out by moving the other shard's primary, never the one asked for."""
    found = active(2, 1, k8s_nodes=NODES[:2])
    (replica,) = replicas_of(found, shard)
    ask(found, f"{shard}")
    run(found, passes=40, until=finished)
    assert switchover(found)["phase"] == "Succeeded" and primary_of(found, shard) == replica
    run(found, passes=40, until=lambda w: False)
    assert primary_of(found, shard) == replica
    assert found.status["maxPrimariesPerNode"] == 1, "the other shard's primary moved instead"
