"""Rolling updates in the planner: replicas first, then a coordinated failover, one shard at a time.

The simulator runs pods of two templates; the harness checks after every pass
that no slot loses its server, no step is taken from an unknown fact, a
failover only goes to an in-sync replica, and Active means every pod runs the
desired template.
"""

from __future__ import annotations

import itertools
from collections import Counter

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_harness import Act, Chaos, Run, one_pass, run
from simulate import SimSettings, SimulatedCluster

from controllers.cluster.decision.actions import DeletePod, Failover, NewPod, PatchPodMetadata, Promote
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import Plan, plan
from controllers.cluster.decision.report import Reason
from controllers.cluster.decision.rollout import (
    DEMOTED_GRACE_S,
    FAILOVER_ANNOTATION,
    FAILOVER_TIMEOUT_S,
    FailoverRequest,
)
from controllers.shared.observation import Observation
from valkey_operator.api.cluster import ClusterState

OLD, NEW = "valkey/valkey:9.1.0", "valkey/valkey:9.1.2"


def desired(shards: int, replicas: int, template: str = "t1", image: str = OLD) -> Desired:
    return Desired(
        shards=shards, replicas_per_shard=replicas, template_hash=template, image=image, config_hash=template
    )


def active(shards: int, replicas: int, world: SimSettings | None = None) -> Run:
    result = run(desired(shards, replicas), settings=world)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    return result


def roll(result: Run, *, chaos: Chaos | None = None, passes: int = 200, template: str = "t2") -> Run:
    """Edit the template at the next pass and reconcile until Active again (or passes run out)."""
    start = result.passes
    wanted = attrs.evolve(result.desired, template_hash=template, image=NEW, config_hash=template)
    chaos = attrs.evolve(chaos or Chaos(), edits={start: wanted, **(chaos.edits if chaos else {})})
    for index in range(start, start + passes):
        one_pass(result, index, chaos)
        if index > start and result.last.status.state is ClusterState.ACTIVE:
            break
    return result


def actions_since(result: Run, start: int) -> Counter[str]:
    return Counter(type(action).__name__ for planned in result.plans[start:] for action in planned.actions)


def planned_now(result: Run, wanted: Desired) -> tuple[Observation, Context, Plan]:
    """What the planner makes of the simulator's world on the new template right now (without acting)."""
    result.sim.template_hash = wanted.template_hash
    observation = result.sim.observe()
    context = result.sim.context(
        recorded_state=result.recorded,
        recorded_config_hash=result.recorded_hash,
        recorded_image=result.recorded_image,
    )
    return observation, context, plan(observation, wanted, context)


def first_deletion_after_failover(result: Run, wanted: Desired) -> tuple[Observation, Context, list[str]]:
    """Roll to `wanted` pass by pass until the planner first deletes a pod after a failover (the old
    primary): the world it planned that on, and the pods it deleted (no pass acted on yet)."""
    start = result.passes
    failed_over = False
    for index in range(start, start + 200):
        observation, context, planned = planned_now(result, wanted)
        deleted = [action.pod for action in planned.actions if isinstance(action, DeletePod)]
        if failed_over and deleted:
            return observation, context, deleted
        failed_over = failed_over or any(isinstance(action, Failover) for action in planned.actions)
        one_pass(result, index, Chaos(edits={start: wanted}))
    raise AssertionError("no old primary deleted after the failover")


def mixed_shards(result: Run) -> set[int]:
    """Shards that have pods of both templates right now."""
    templates: dict[int, set[str]] = {}
    for pod in result.sim.pods.values():
        if pod.deleting_since is None:
            templates.setdefault(pod.shard, set()).add(pod.template_hash)
    return {shard for shard, found in templates.items() if len(found) > 1}


@given(shards=st.integers(1, 3), replicas=st.integers(0, 2))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_pod_is_replaced_shard_by_shard_with_one_coordinated_failover_each(
    shards: int, replicas: int
) -> None:
    result = active(shards, replicas, SimSettings(ready_delays=(1, 2), sync_delay=2))
    start = result.passes
    roll(result)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert {pod.template_hash for pod in result.sim.pods.values()} == {"t2"}
    done = actions_since(result, start)
    assert done["Failover"] == shards, done
    assert done["Promote"] == 0  # a planned roll never takes over
    assert done["DeletePod"] == shards * (replicas + 1)
    assert done["NewPod"] == shards * (replicas + 1)
    assert result.last.status.current_image == NEW


def test_shards_roll_one_at_a_time_and_the_status_says_where_it_is() -> None:
    result = active(3, 1)
    start = result.passes
    wanted = attrs.evolve(result.desired, template_hash="t2", image=NEW)
    seen_messages = []
    for index in range(start, start + 200):
        one_pass(result, index, Chaos(edits={start: wanted}))
        assert len(mixed_shards(result)) <= 1, mixed_shards(result)
        seen_messages.append(result.last.status.message)
        if result.last.status.state is ClusterState.ACTIVE and index > start:
            break
    assert result.last.status.state is ClusterState.ACTIVE
    assert any("rolling update: 1 of 3 shard(s) current" in message for message in seen_messages)
    assert any("failing over to" in message for message in seen_messages)
    updating = [p.status.state for p in result.plans[start:-1]]
    assert set(updating) == {ClusterState.UPDATING}
    # SPEC 1.8: the cluster serves every slot throughout, so Ready stays True while Progressing says why.
    assert all(p.status.condition("Ready").status for p in result.plans[start:])
    assert all(p.status.condition("Progressing").status for p in result.plans[start:-1])


def test_a_replica_less_shard_hands_over_to_a_surge_replica() -> None:
    result = active(2, 0)
    start = result.passes
    roll(result)
    plans = result.plans[start:]
    surge = [p for p in plans if sum(isinstance(a, NewPod) for a in p.actions) == 1]
    assert surge, "no surge pod"
    failovers = [a for p in plans for a in p.actions if isinstance(a, Failover)]
    assert len(failovers) == 2
    assert result.last.status.state is ClusterState.ACTIVE
    assert len(result.sim.pods) == 2


def test_the_failover_request_is_recorded_on_the_pod_before_it_is_sent() -> None:
    result = active(1, 1)
    start = result.passes
    roll(result)
    plan = next(p for p in result.plans[start:] if any(isinstance(a, Failover) for a in p.actions))
    names = [type(a).__name__ for a in plan.actions]
    patch = next(a for a in plan.actions if isinstance(a, PatchPodMetadata))
    failover = next(a for a in plan.actions if isinstance(a, Failover))
    assert names.index("PatchPodMetadata") < names.index("Failover")
    assert patch.pod == failover.node and dict(patch.annotations)[FAILOVER_ANNOTATION].endswith(",1")


def test_a_failover_that_does_not_happen_is_reported_and_retried_with_backoff_never_forced() -> None:
    result = active(1, 1, SimSettings(failing_failovers=frozenset({0, 1})))
    start = result.passes
    roll(result, passes=300)
    plans = result.plans[start:]
    failovers = [(index, a) for index, p in enumerate(plans) for a in p.actions if isinstance(a, Failover)]
    assert len(failovers) == 3, failovers  # two that timed out, then the one that worked
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(failovers)]
    assert gaps[1] > gaps[0] >= FAILOVER_TIMEOUT_S  # a pass is a second of simulated time
    assert any(f.reason is Reason.FAILOVER_FAILED for p in plans for f in p.status.findings)
    assert not any(isinstance(a, Promote) for p in plans for a in p.actions)
    assert result.last.status.state is ClusterState.ACTIVE


def test_a_new_binary_below_the_floor_stops_at_the_surge_pod_and_a_revert_resumes() -> None:
    world = SimSettings(versions={"t2": (9, 0, 0)})
    result = active(2, 1, world)
    start = result.passes
    roll(result, passes=20)
    # The old pods keep serving: not Failed (SPEC 1.8); the roll stops and says why.
    status = result.last.status
    assert status.state is ClusterState.UPDATING
    assert "below the supported version floor" in status.message
    assert status.condition("Ready").status and not status.condition("Stalled").status
    progressing, degraded = status.condition("Progressing"), status.condition("Degraded")
    assert not progressing.status and progressing.reason == Reason.VERSION_BELOW_FLOOR
    assert degraded.status and degraded.reason == Reason.VERSION_BELOW_FLOOR
    assert actions_since(result, start)["Failover"] == 0
    old_pods = [pod for pod in result.sim.pods.values() if pod.template_hash == "t1"]
    assert len(old_pods) == 4 and all(result.sim.node_of(pod.name) is not None for pod in old_pods)
    roll(result, template="t1", passes=60)  # the revert
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert {pod.template_hash for pod in result.sim.pods.values()} == {"t1"}


def test_a_restart_mid_roll_never_fails_over_a_shard_twice() -> None:
    result = active(2, 1)
    start = result.passes
    replays = [(Act.TWICE, 0)] * 200  # every pass's actions replayed by a restarted operator
    roll(result, chaos=Chaos(acts=[(Act.ALL, 0)] * start + replays))
    assert result.last.status.state is ClusterState.ACTIVE
    assert actions_since(result, start)["Failover"] == 2


def test_a_scale_during_a_roll_uses_the_new_template() -> None:
    result = active(2, 1)
    start = result.passes
    roll(result, chaos=Chaos(specs={start + 3: (3, 1)}), passes=300)
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert {pod.template_hash for pod in result.sim.pods.values()} == {"t2"}
    assert len(result.sim.pods) == 6


@given(
    shards=st.integers(1, 3),
    replicas=st.integers(0, 2),
    unreachable=st.frozensets(st.tuples(st.integers(0, 40), st.integers(0, 12)), max_size=4),
    kills=st.frozensets(st.tuples(st.integers(0, 40), st.integers(0, 12)), max_size=1),
    edit_at=st.integers(0, 20),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_roll_with_faults_ends_active_on_the_new_template(
    shards: int,
    replicas: int,
    unreachable: frozenset[tuple[int, int]],
    kills: frozenset[tuple[int, int]],
    edit_at: int,
) -> None:
    wanted = desired(shards, replicas)
    chaos = Chaos(
        unreachable=unreachable,
        kills=kills,
        edits={edit_at: attrs.evolve(wanted, template_hash="t2", image=NEW, config_hash="t2")},
    )
    result = run(
        wanted,
        settings=SimSettings(ready_delays=(1, 2), sync_delay=1),
        chaos=chaos,
        max_passes=60,
        until=lambda p: False,
    )
    for index in range(60, 400):
        one_pass(result, index, Chaos())
        if result.last.status.state is ClusterState.ACTIVE:
            break
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert {pod.template_hash for pod in result.sim.pods.values()} == {"t2"}


def kinds(planned: Plan) -> Counter[str]:
    return Counter(type(action).__name__ for action in planned.actions)


def test_a_surge_pod_is_not_taken_as_a_surplus() -> None:
    result = active(1, 1)
    start = result.passes
    wanted = attrs.evolve(result.desired, template_hash="t2", image=NEW)
    one_pass(result, start, Chaos(edits={start: wanted}))
    assert kinds(result.last)["NewPod"] == 1
    for index in range(start + 1, start + 4):
        one_pass(result, index, Chaos())
        deleted = [a.pod for a in result.last.actions if isinstance(a, DeletePod)]
        templates = {pod.name: pod.template_hash for pod in result.sim.pods.values()}
        assert all(templates.get(name) != "t2" for name in deleted), deleted
    assert SimulatedCluster  # the world type used throughout


def test_a_cluster_without_a_rollout_slot_waits_and_says_so() -> None:
    result = active(1, 1)
    start = result.passes
    wanted = attrs.evolve(result.desired, template_hash="t2", image=NEW)
    sim = result.sim
    sim.template_hash = "t2"
    from controllers.cluster.decision.plan import REQUEUE_QUEUED, plan

    planned = plan(sim.observe(), wanted, sim.context(recorded_state=ClusterState.ACTIVE, may_roll=False))
    assert not any(isinstance(a, NewPod | DeletePod | Failover) for a in planned.actions)
    assert "waiting for a rollout slot" in planned.status.message
    assert planned.status.rollout is None and planned.requeue_after == REQUEUE_QUEUED
    assert start == result.passes


def test_a_revert_mid_roll_replaces_only_the_new_pods() -> None:
    result = active(3, 1)
    originals = set(result.sim.pods)
    start = result.passes
    wanted = attrs.evolve(result.desired, template_hash="t2", image=NEW, config_hash="t2")
    for index in range(start, start + 200):
        one_pass(result, index, Chaos(edits={start: wanted}))
        if sum(pod.template_hash == "t2" for pod in result.sim.pods.values()) >= 2:
            break
    assert result.last.status.state is ClusterState.UPDATING
    reverted_at = result.passes
    roll(result, template="t1")
    assert result.last.status.state is ClusterState.ACTIVE, result.last.status.message
    assert {pod.template_hash for pod in result.sim.pods.values()} == {"t1"}
    assert len(originals & set(result.sim.pods)) >= 4  # the shards not yet rolled were left alone
    assert actions_since(result, reverted_at)["Failover"] <= 1


def test_the_old_primary_goes_only_once_every_member_replicas_too_sees_its_successor_serving() -> None:
    """A client bootstraps from any member the endpoint hands out: one still naming the old primary
    sends it to a server that is stopping (seen as `Connection closed by server` mid-roll)."""
    result = active(2, 1)
    wanted = attrs.evolve(result.desired, template_hash="t2", image=NEW, config_hash="t2")
    observation, context, deleted = first_deletion_after_failover(result, wanted)
    sim = result.sim
    old_primary = sim.nodes[sim.pods[deleted[0]].node_id or ""]
    successor = sim.nodes[old_primary.primary_id or ""]
    bystander = next(
        name
        for name, node in observation.nodes.items()
        if node.primary_id not in {None, successor.node_id} and name != deleted[0]
    )  # a replica of the other shard
    stale = observation.nodes[bystander]
    unheard = tuple(
        attrs.evolve(known, slots=()) if known.node_id == successor.node_id else known
        for known in stale.known_nodes
    )
    hidden = attrs.evolve(
        observation, nodes={**observation.nodes, bystander: attrs.evolve(stale, known_nodes=unheard)}
    )
    assert not any(isinstance(action, DeletePod) for action in plan(hidden, wanted, context).actions)


def test_a_replica_takes_over_only_once_it_has_a_link_to_every_member() -> None:
    """The new primary announces a takeover over its own links. A member it has no link to yet
    hears it from the old primary first, while still holding the new primary for that primary's
    replica; Valkey 9.1.2 then loops for ever on that cycle (a fresh surge replica spinning in
    updateShardId, seen in CI right after a roll's failover)."""
    result = active(1, 1)
    start = result.passes
    wanted = attrs.evolve(result.desired, template_hash="t2", image=NEW, config_hash="t2")
    for index in range(start, start + 200):
        observation, context, planned = planned_now(result, wanted)
        failover = next((action for action in planned.actions if isinstance(action, Failover)), None)
        if failover is not None:
            break
        one_pass(result, index, Chaos(edits={start: wanted}))
    else:
        raise AssertionError("the roll never failed over")
    target = observation.nodes[failover.node]
    member = next(
        node.node_id for name, node in observation.nodes.items() if name != failover.node and node.primary_id
    )  # another replica of the shard: the old primary's other follower
    unlinked = tuple(
        attrs.evolve(known, connected=False) if known.node_id == member else known
        for known in target.known_nodes
    )
    hidden = attrs.evolve(
        observation, nodes={**observation.nodes, failover.node: attrs.evolve(target, known_nodes=unlinked)}
    )
    assert not any(isinstance(action, Failover) for action in plan(hidden, wanted, context).actions)


def test_the_old_primary_keeps_running_for_a_grace_after_its_failover_was_asked_for() -> None:
    """A client that read the slot map just before the failover dials the old primary a moment
    later: a replica redirects it, a stopping server resets the connection (seen in CI as
    `Connection reset by peer` from a pod deleted 0.1 s after its failover)."""
    result = active(1, 1)
    wanted = attrs.evolve(result.desired, template_hash="t2", image=NEW, config_hash="t2")
    observation, context, deleted = first_deletion_after_failover(result, wanted)
    successor = next(
        pod for pod in observation.pods if FailoverRequest.of(pod) is not None and pod.name != deleted[0]
    )
    request = FailoverRequest.of(successor)
    assert request is not None and context.now >= request.at + DEMOTED_GRACE_S, (context.now, request)
    early = attrs.evolve(context, now=request.at + DEMOTED_GRACE_S - 0.6)
    replanned = plan(observation, wanted, early)
    assert not any(isinstance(action, DeletePod) for action in replanned.actions)
    # The next pass comes when the grace ends: no watch event announces it.
    assert abs(replanned.requeue_after - 0.6) < 1e-6, replanned.requeue_after
