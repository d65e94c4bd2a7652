"""The planner's part 2 (SPEC 1.4 scaling and repair, SPEC 5), end to end against the simulator.

Every pass goes through `planner_harness.one_pass`, which checks the
invariants (one migration job per source, never delete a slot owner or a node
in a migration, forget only the dead, give up slots only without a copy, take
over only from a dead primary) before the plan is acted on.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import observed
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_harness import Act, Chaos, Run, one_pass, run
from simulate import SimSettings

from controllers.cluster.decision.actions import DeletePod, Forget, Meet, MigrateSlots, Promote
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.plan import VOTE_GRACE_S, Plan, plan
from controllers.cluster.decision.rebalance import MAX_BATCH_SLOTS, RETRY_BASE_S, quotas
from controllers.cluster.decision.report import Reason
from controllers.shared.observation import NodeObservation, Observation, PodObservation
from valkey_operator.api.cluster import DEGRADED, ClusterState, NodeRole
from valkey_operator.valkey.replies import KnownNode, MigrationOperation, NodeFlag, SlotMigration
from valkey_operator.valkey.slots import SlotRange

IMAGE = "valkey/valkey:9.1.0"
ACTIVE = ClusterState.ACTIVE


def desired(shards: int = 3, replicas: int = 1) -> Desired:
    return Desired(shards=shards, replicas_per_shard=replicas, template_hash="t1", image=IMAGE)


def active(shards: int = 3, replicas: int = 1, settings_: SimSettings | None = None) -> Run:
    result = run(desired(shards, replicas), settings=settings_)
    assert result.last.status.state is ACTIVE, result.last.status.message
    return result


def go_on(
    result: Run,
    *,
    shards: int | None = None,
    replicas: int | None = None,
    chaos: Chaos | None = None,
    max_passes: int = 120,
    until: Callable[[Plan], bool] = lambda planned: planned.status.state is ACTIVE,
) -> Run:
    """Keep reconciling the same world (the recorded status too) after a spec change."""
    result.desired = attrs.evolve(
        result.desired,
        shards=result.desired.shards if shards is None else shards,
        replicas_per_shard=result.desired.replicas_per_shard if replicas is None else replicas,
    )
    start = result.passes
    for index in range(max_passes):
        one_pass(result, index, chaos or Chaos())
        if until(result.last):
            return result
    raise AssertionError(f"not done after {result.passes - start} passes: {result.last.status.message}")


def actions_of(result: Run, kind: type) -> list[object]:
    return [action for planned in result.plans for action in planned.actions if isinstance(action, kind)]


def seq_of(result: Run, shard: int, role: NodeRole) -> int:
    """The sequence number of the pod of shard whose server has role now."""
    for pod in result.sim.pods.values():
        node = result.sim.node_of(pod.name)
        if pod.shard == shard and node is not None and node.role is role:
            return pod.seq
    raise AssertionError(f"no {role} in shard {shard}")


# --- scaling shards --------------------------------------------------------------------------------


def test_scaling_up_moves_each_new_shard_its_quota_with_atomic_jobs() -> None:
    result = active(3, 1)
    go_on(result, shards=5)
    moves = actions_of(result, MigrateSlots)
    assert moves and all(isinstance(move, MigrateSlots) for move in moves)
    assert all(sum(item.size for item in move.slots) <= MAX_BATCH_SLOTS for move in moves)
    assert sum(sum(item.size for item in move.slots) for move in moves) == sum(quotas(5)[3:])
    assert not result.lost
    assert result.last.status.shards == 5


def test_a_scale_shows_updating_with_the_slots_still_to_move() -> None:
    result = active(3, 0)
    go_on(result, shards=4, until=lambda planned: any(isinstance(a, MigrateSlots) for a in planned.actions))
    status = result.last.status
    assert status.state is ClusterState.UPDATING
    assert any(finding.reason is Reason.REBALANCING_SLOTS for finding in status.findings)


def test_scaling_down_drains_the_leaving_shards_then_removes_their_pods() -> None:
    result = active(5, 1)
    go_on(result, shards=2)
    assert sorted(pod.shard for pod in result.sim.pods.values()) == [0, 0, 1, 1]
    deletions = [action for action in actions_of(result, DeletePod) if isinstance(action, DeletePod)]
    assert len(deletions) == 6
    assert not result.lost


def test_three_to_five_to_two_shards_never_leaves_a_slot_unserved() -> None:
    result = active(3, 1)
    for shards in (5, 2):
        go_on(result, shards=shards)
        for planned in result.plans[-5:]:
            assert planned.status.uncovered == ()
    assert not result.lost


def test_reverting_a_scale_midway_converges_without_slotless_shards() -> None:
    result = active(3, 1)
    go_on(result, shards=5, until=lambda planned: any(isinstance(a, MigrateSlots) for a in planned.actions))
    go_on(result, shards=3)
    assert sorted({pod.shard for pod in result.sim.pods.values()}) == [0, 1, 2]
    assert not result.lost


def test_one_job_per_source_at_a_time_even_when_the_operator_replays_its_actions() -> None:
    result = active(2, 0, SimSettings(migration_delay=3))
    chaos = Chaos(acts=[(Act.TWICE, 0)] * 30)
    go_on(result, shards=4, chaos=chaos)  # the harness asserts one job per source on every pass


def test_a_failed_migration_is_degraded_and_retried_after_a_backoff() -> None:
    result = active(1, 0, SimSettings(failing_migrations={0, 1}, migration_delay=1))
    go_on(
        result,
        shards=2,
        until=lambda planned: any(f.reason is Reason.MIGRATION_FAILED for f in planned.status.findings),
    )
    degraded = result.last.status.condition(DEGRADED)
    assert degraded.status and degraded.reason == Reason.MIGRATION_FAILED
    failed_at = result.passes
    go_on(result)
    starts = [
        index
        for index, planned in enumerate(result.plans)
        if any(isinstance(action, MigrateSlots) for action in planned.actions)
    ]
    assert starts[1] >= failed_at - 1 + RETRY_BASE_S, starts  # not re-issued before the backoff
    assert starts[2] - starts[1] >= 2 * RETRY_BASE_S, starts  # the second failure doubles it
    assert len(starts) == 2 + quotas(2)[1] // MAX_BATCH_SLOTS  # two failed jobs, then the batches


def test_rebalance_waits_while_some_slot_is_unserved() -> None:
    result = active(3, 0)
    result.sim.crash_pod(next(pod.name for pod in result.sim.pods.values() if pod.shard == 0))
    result.desired = desired(4, 0)
    observation = result.sim.observe()
    planned = plan(observation, result.desired, result.sim.context(recorded_state=ACTIVE))
    assert not any(isinstance(action, MigrateSlots) for action in planned.actions)


# --- scaling replicas --------------------------------------------------------------------------------


def test_replicas_one_two_zero_one() -> None:
    result = active(2, 1)
    for replicas in (2, 0, 1):
        go_on(result, replicas=replicas)
        assert len(result.sim.pods) == 2 * (1 + replicas)
    assert not actions_of(result, MigrateSlots)
    assert not result.lost


# --- repair ----------------------------------------------------------------------------------------------


def test_a_deleted_primary_pod_is_replaced_and_its_replica_keeps_serving() -> None:
    result = active(3, 1)
    seq = seq_of(result, 0, NodeRole.PRIMARY)
    one_pass(result, 0, Chaos(kills={(0, seq)}))
    go_on(result)
    assert not result.lost
    assert any(isinstance(action, Forget) for action in actions_of(result, Forget))


def test_a_crashed_primary_is_replaced_and_the_failed_pod_blocks_nothing() -> None:
    result = active(3, 1)
    seq = seq_of(result, 1, NodeRole.PRIMARY)
    one_pass(result, 0, Chaos(crashes={(0, seq)}))
    go_on(result)
    assert not result.lost
    assert not actions_of(result, Promote)  # three primaries: Valkey's own vote promotes the replica


def test_a_single_shard_whose_primary_died_is_taken_over_by_its_replica() -> None:
    result = active(1, 1)
    seq = seq_of(result, 0, NodeRole.PRIMARY)
    one_pass(result, 0, Chaos(crashes={(0, seq)}))
    go_on(result)
    assert len(actions_of(result, Promote)) == 1
    assert not result.lost


def pod_of(result: Run, shard: int, role: NodeRole) -> str:
    seq = seq_of(result, shard, role)
    return next(pod.name for pod in result.sim.pods.values() if pod.seq == seq)


def promotions_now(
    result: Run, hidden: Callable[[Observation], Observation] = lambda seen: seen
) -> list[Promote]:
    """The takeovers the planner asks for on the world as it is (observed through `hidden`)."""
    sim = result.sim
    context = sim.context(recorded_state=result.recorded, recorded_config_hash=result.recorded_hash)
    planned = plan(hidden(sim.observe()), result.desired, context)
    return [action for action in planned.actions if isinstance(action, Promote)]


def test_a_failed_node_holding_two_primaries_of_four_has_their_replicas_take_over_at_once() -> None:
    """Two of four primaries silent (their Kubernetes node failed; the pods still show Running): no
    majority is left for Valkey to elect, and the node may take tens of seconds to come back."""
    result = active(4, 1, SimSettings(elections=False))
    silent = [pod_of(result, shard, NodeRole.PRIMARY) for shard in (0, 1)]
    for name in silent:
        result.sim.silence_pod(name)
    promoted = promotions_now(result)
    assert sorted(action.node for action in promoted) == sorted(
        pod_of(result, shard, NodeRole.REPLICA) for shard in (0, 1)
    )
    assert all(action.unreachable for action in promoted)
    one_pass(result, 0, Chaos())  # the harness checks each takeover's primary is dead
    for action in promoted:
        node = result.sim.node_of(action.node)
        assert node is not None and node.role is NodeRole.PRIMARY and node.slots, action


def test_a_silent_primary_is_left_to_valkey_s_vote_while_a_majority_answers() -> None:
    result = active(3, 1, SimSettings(elections=False))
    result.sim.silence_pod(pod_of(result, 0, NodeRole.PRIMARY))
    assert promotions_now(result) == []


def test_a_primary_that_some_member_still_hears_is_never_taken_over() -> None:
    """The operator cannot reach it, but a member can (its line is not flagged): it may be alive and
    serving; only Valkey's own failure detection says it is gone."""
    result = active(2, 1, SimSettings(elections=False))
    silent = pod_of(result, 0, NodeRole.PRIMARY)
    silent_id = result.sim.pods[silent].node_id or ""
    result.sim.silence_pod(silent)
    assert len(promotions_now(result)) == 1
    witness = pod_of(result, 1, NodeRole.PRIMARY)

    def heard(seen: Observation) -> Observation:
        node = seen.nodes[witness]
        lines = tuple(
            attrs.evolve(line, flags=frozenset({NodeFlag.PRIMARY}), connected=True)
            if line.node_id == silent_id
            else line
            for line in node.known_nodes
        )
        return attrs.evolve(seen, nodes={**seen.nodes, witness: attrs.evolve(node, known_nodes=lines)})

    assert promotions_now(result, heard) == []


@pytest.mark.parametrize(("link_down", "promoted"), [(3, True), (-1, False), (120, False)])
def test_only_a_replica_that_followed_the_silent_primary_to_the_end_takes_over(
    link_down: int, promoted: bool
) -> None:
    """-1: it never had a link since it started (restarted from its disk while the primary was
    away: it lacks what the primary took since); 120: its link broke long before the primary fell
    silent (stale). 3: it dropped with the primary."""
    result = active(2, 1, SimSettings(elections=False))
    replica = pod_of(result, 0, NodeRole.REPLICA)
    result.sim.silence_pod(pod_of(result, 0, NodeRole.PRIMARY))

    def down(seen: Observation) -> Observation:
        node = attrs.evolve(seen.nodes[replica], link_up=False, link_down_seconds=link_down)
        return attrs.evolve(seen, nodes={**seen.nodes, replica: node})

    assert bool(promotions_now(result, down)) is promoted


def test_a_replica_valkey_will_not_elect_is_promoted_after_the_vote_grace() -> None:
    result = active(3, 1, SimSettings(elections=False))
    seq = seq_of(result, 0, NodeRole.PRIMARY)
    crashed_at = result.passes
    one_pass(result, 0, Chaos(crashes={(0, seq)}))
    go_on(result, max_passes=int(VOTE_GRACE_S) + 30)
    promotions = [
        index
        for index, planned in enumerate(result.plans)
        if any(isinstance(action, Promote) for action in planned.actions)
    ]
    assert len(promotions) == 1
    assert promotions[0] - crashed_at >= VOTE_GRACE_S, "Valkey's own vote was given its time first"
    assert not result.lost


def test_a_shard_without_replicas_is_rebuilt_empty_and_says_data_was_lost() -> None:
    result = active(3, 0)
    seq = seq_of(result, 2, NodeRole.PRIMARY)
    one_pass(result, 0, Chaos(crashes={(0, seq)}))
    reasons: set[Reason] = set()
    go_on(
        result,
        until=lambda planned: (
            reasons.update(f.reason for f in planned.status.findings) or planned.status.state is ACTIVE
        ),
    )
    assert len(result.lost) == 1
    assert Reason.DATA_LOST in reasons


def test_every_pod_restarting_with_new_identities_and_ips_is_rebuilt() -> None:
    result = active(2, 1)
    reboots = {(0, pod.seq) for pod in result.sim.pods.values()}
    one_pass(result, 0, Chaos(reboots=reboots))
    go_on(result)
    assert result.last.status.state is ACTIVE


def test_a_rebooted_primary_rejoins_as_a_new_node_and_nothing_is_lost() -> None:
    result = active(3, 1)
    seq = seq_of(result, 0, NodeRole.PRIMARY)
    one_pass(result, 0, Chaos(reboots={(0, seq)}))
    go_on(result)
    assert not result.lost


def _pod(name: str, shard: int, ip: str) -> PodObservation:
    return observed.pod(name, shard, ip, created=f"2025-01-01T00:00:0{shard}Z")


def test_a_member_whose_ip_changed_is_met_again_at_its_new_address() -> None:
    slots = (SlotRange(0, 16383),)
    a_line = KnownNode(node_id="a" * 40, ip="10.0.0.1", flags=frozenset({NodeFlag.PRIMARY}), slots=slots)
    b_old = KnownNode(node_id="b" * 40, ip="10.0.0.2", flags=frozenset({NodeFlag.REPLICA}), connected=False)
    a = observed.primary(
        "a" * 40, slots=slots, known=(attrs.evolve(a_line, flags=a_line.flags | {NodeFlag.MYSELF}), b_old)
    )
    b = observed.replica(
        "b" * 40,
        "a" * 40,
        link_up=None,
        cluster_ok=False,
        known_nodes=(attrs.evolve(b_old, ip="10.9.9.9", flags=frozenset({NodeFlag.MYSELF})), a_line),
    )
    observation = Observation(
        pods=(_pod("vk-0-a", 0, "10.0.0.1"), _pod("vk-0-b", 0, "10.9.9.9")),
        nodes={"vk-0-a": a, "vk-0-b": b},
    )
    planned = plan(observation, desired(1, 1), Context())
    assert Meet(node="vk-0-a", peer="vk-0-b", peer_ip="10.9.9.9") in planned.actions


# --- hypothesis: scale, revert, kill and crash at random ---------------------------------------------


@st.composite
def scale_scenarios(draw: st.DrawFn) -> tuple[int, int, Chaos, SimSettings]:
    shards = draw(st.integers(1, 4))
    replicas = draw(st.integers(0, 2))
    passes = st.integers(0, 25)
    specs = draw(st.dictionaries(passes, st.tuples(st.integers(1, 6), st.integers(0, 2)), max_size=3))
    seqs = st.integers(0, 20)
    chaos = Chaos(
        acts=draw(st.lists(st.tuples(st.sampled_from(Act), st.integers(0, 4)), max_size=25)),
        unreachable=draw(st.frozensets(st.tuples(passes, seqs), max_size=8)),
        specs=specs,
        kills=draw(st.frozensets(st.tuples(passes, seqs), max_size=1)),
        crashes=draw(st.frozensets(st.tuples(passes, seqs), max_size=1)),
    )
    settings_ = SimSettings(
        migration_delay=draw(st.integers(0, 3)),
        failing_migrations=draw(st.frozensets(st.integers(0, 6), max_size=2)),
        sync_delay=draw(st.integers(0, 2)),
        ready_delays=tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))),
        readiness_lag=draw(st.integers(0, 2)),  # new pods answer before they are Ready
    )
    return shards, replicas, chaos, settings_


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scale_scenarios())
def test_any_scaling_history_with_faults_settles_active(
    scenario: tuple[int, int, Chaos, SimSettings],
) -> None:
    shards, replicas, chaos, settings_ = scenario
    result = active(shards, replicas, settings_)
    for index in range(30):
        one_pass(result, index, chaos)
    result.sim.settings = attrs.evolve(result.sim.settings, failing_migrations=frozenset())
    go_on(result, max_passes=300)
    assert result.last.actions == ()
    calm = not chaos.kills and not chaos.crashes
    if calm:
        assert not result.lost


def test_a_new_shards_replica_of_a_primary_that_left_empty_takes_over() -> None:
    """Found by the property test above: scaling 1x0 -> 3x2 -> 4x1 -> 5x0 with unreachable pods and
    failing migrations left shard 3's only pod replicating a primary that departed before it served
    a slot. Valkey never elects for a slotless primary and the id cannot be forgotten while a replica
    follows it: without a takeover the shard never got its slots."""
    settings_ = SimSettings(
        ready_delays=(2,), sync_delay=0, termination_delay=1, node_timeout=2, forget_window=30,
        offset_step=100, gossip_every=1, migration_delay=2, failing_migrations=frozenset([5, 1]),
    )  # fmt: skip
    chaos = Chaos(
        acts=[(Act.ALL, 0)] * 5,
        unreachable=frozenset([(0, 15), (0, 11), (22, 10)]),
        specs={12: (3, 2), 14: (4, 1), 17: (5, 0)},
    )
    result = active(1, 0, settings_)
    for index in range(30):
        one_pass(result, index, chaos)
    result.sim.settings = attrs.evolve(result.sim.settings, failing_migrations=frozenset())
    go_on(result, max_passes=300)
    assert result.last.actions == ()
    assert any(isinstance(action, Promote) for action in actions_of(result, Promote))


def _primary(
    node_id: str, other: str, slots: tuple[SlotRange, ...], jobs: tuple[SlotMigration, ...]
) -> NodeObservation:
    known = (observed.line(node_id, None, slots=slots, me=True), observed.line(other, None))
    return observed.primary(node_id, slots=slots, known=known, jobs=jobs)


def test_two_primaries_claiming_slots_is_a_handover_right_after_a_migration_and_a_conflict_later() -> None:
    now = 1_800_000_000.0
    job = SlotMigration(
        name="j", operation=MigrationOperation.EXPORT, slots=(SlotRange(0, 99),), source_id="a" * 40,
        target_id="b" * 40, state="success", last_update_time=int(now) - 5,
    )  # fmt: skip
    a = _primary("a" * 40, "b" * 40, (SlotRange(0, 8191),), (job,))
    b = _primary("b" * 40, "a" * 40, (SlotRange(0, 99), SlotRange(8192, 16383)), ())
    pods = (_pod("vk-0-a", 0, "10.0.0.1"), _pod("vk-1-b", 1, "10.0.0.2"))
    observation = Observation(pods=pods, nodes={"vk-0-a": a, "vk-1-b": b})
    reasons = {
        f.reason: f.problem for f in plan(observation, desired(2, 0), Context(now=now)).status.findings
    }
    assert reasons.get(Reason.MIGRATING_SLOTS) is False and Reason.SLOTS_CONTESTED not in reasons
    later = Context(now=now + 3600)
    reasons = {f.reason: f.problem for f in plan(observation, desired(2, 0), later).status.findings}
    assert reasons.get(Reason.SLOTS_CONTESTED) is True


def test_a_node_that_has_not_heard_of_a_takeover_does_not_make_its_slots_look_lost() -> None:
    slots = (SlotRange(0, 16383),)
    a_id, b_id, ghost = "a" * 40, "b" * 40, "c" * 40
    a_me = KnownNode(
        node_id=a_id, ip="10.0.0.1", flags=frozenset({NodeFlag.MYSELF, NodeFlag.PRIMARY}), slots=slots
    )
    b_view_of_a = KnownNode(node_id=a_id, ip="10.0.0.1", flags=frozenset({NodeFlag.PRIMARY}))
    stale = KnownNode(
        node_id=ghost, ip="10.0.0.3", flags=frozenset({NodeFlag.PRIMARY, NodeFlag.FAIL}), slots=slots
    )
    b_me = KnownNode(node_id=b_id, ip="10.0.0.2", flags=frozenset({NodeFlag.MYSELF, NodeFlag.REPLICA}))
    b_seen = attrs.evolve(b_me, flags=frozenset({NodeFlag.REPLICA}), primary_id=a_id)
    a = observed.primary(a_id, slots=slots, known=(a_me, b_seen))
    b = observed.replica(b_id, a_id, cluster_ok=True, known_nodes=(b_me, b_view_of_a, stale))
    observation = Observation(
        pods=(_pod("vk-0-a", 0, "10.0.0.1"), _pod("vk-0-b", 0, "10.0.0.2")),
        nodes={"vk-0-a": a, "vk-0-b": b},
    )
    planned = plan(observation, desired(1, 1), Context(recorded_state=ACTIVE))
    forgets = [action for action in planned.actions if isinstance(action, Forget)]
    assert forgets == [Forget(node_id=ghost, on=("vk-0-b",), lost=())]
    assert not any(finding.reason is Reason.DATA_LOST for finding in planned.status.findings)


def test_a_node_still_loading_its_data_is_met_once_it_has_loaded() -> None:
    """A restored node reads its RDB for seconds and refuses CLUSTER MEET meanwhile: the planner waits
    for the load instead of sending a MEET that fails (an ActionFailed warning on a normal restore)."""
    slots = (SlotRange(0, 16383),)
    a_line = KnownNode(node_id="a" * 40, ip="10.0.0.1", flags=frozenset({NodeFlag.PRIMARY}), slots=slots)
    b_line = KnownNode(node_id="b" * 40, ip="10.0.0.2", flags=frozenset({NodeFlag.PRIMARY}))
    a = observed.primary(
        "a" * 40, slots=slots, known=(attrs.evolve(a_line, flags=a_line.flags | {NodeFlag.MYSELF}),)
    )
    b = observed.primary(
        "b" * 40, ok=False, known=(attrs.evolve(b_line, flags=b_line.flags | {NodeFlag.MYSELF}),)
    )
    pods = (_pod("vk-0-a", 0, "10.0.0.1"), _pod("vk-0-b", 0, "10.0.0.2"))
    meet = Meet(node="vk-0-a", peer="vk-0-b", peer_ip="10.0.0.2")
    for seed_loading, peer_loading in ((False, True), (True, False)):
        nodes = {
            "vk-0-a": attrs.evolve(a, loading=seed_loading),
            "vk-0-b": attrs.evolve(b, loading=peer_loading),
        }
        waiting = plan(Observation(pods=pods, nodes=nodes), desired(1, 1), Context())
        assert not [action for action in waiting.actions if isinstance(action, Meet)], (
            seed_loading,
            peer_loading,
        )
    loaded = plan(Observation(pods=pods, nodes={"vk-0-a": a, "vk-0-b": b}), desired(1, 1), Context())
    assert meet in loaded.actions
