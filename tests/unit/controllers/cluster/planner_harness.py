"""Drive the pure planner against the simulator, checking SPEC 5's invariants after every step.

One pass: observe the simulated world (some nodes may not answer) -> plan ->
check the plan against the world's ground truth -> act (perhaps only partly,
or twice, as an operator that restarts mid-act would) -> time passes. Part 2
(scaling, repair, rolling updates) extends `check_step` and `Chaos`.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Collection, Mapping, Sequence

import attrs
from simulate import Outcome, SimNode, SimSettings, SimulatedCluster

from controllers.cluster.decision import spread
from controllers.cluster.decision.actions import (
    AssignSlots,
    DeletePod,
    Failover,
    Failure,
    Forget,
    MarkMember,
    Meet,
    MigrateSlots,
    PatchPodMetadata,
    Promote,
    Replicate,
    SetConfig,
    SyncAcl,
)
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.memory import Refusals, live_refusals, remember_refusals
from controllers.cluster.decision.plan import Plan, plan
from controllers.cluster.decision.rebalance import quotas
from controllers.cluster.decision.refusals import classified
from controllers.cluster.decision.report import Reason
from controllers.cluster.decision.view import MAX_IN_SYNC_LAG_BYTES, View
from controllers.shared.observation import Observation, PodPhase
from controllers.shared.versions import meets_floor
from valkey_operator.api.cluster import ClusterState, NodeRole
from valkey_operator.api.tunables import desired_runtime, operator_runtime
from valkey_operator.valkey.acl import normal_form
from valkey_operator.valkey.slots import ALL_SLOTS, coverage, format_slot_ranges, slot_count, subtract, union


class Act(enum.Enum):
    """How the operator acts on a pass's plan."""

    ALL = "all"
    CRASH = "crash"
    """Apply only a prefix of the actions, then restart (no memory survives)."""
    TWICE = "twice"
    """Apply the actions twice: a restart after acting, replaying from a cache that has not caught up."""
    LOSE_STATUS = "lose-status"
    """Act, but the status write is lost: the next pass sees the previously recorded state."""


@attrs.frozen
class Chaos:
    """What goes wrong, per pass; the default is a calm world."""

    acts: Sequence[tuple[Act, int]] = ()
    """Per pass (index): how the operator acts, and for CRASH how many actions get through."""
    unreachable: Collection[tuple[int, int]] = frozenset()
    """(pass, pod sequence number): that pod's server does not answer the operator in that pass."""
    deletions: Collection[tuple[int, int]] = frozenset()
    """(pass, pod sequence number): someone deletes that pod (only while its server owns no slots)."""
    paused: Collection[int] = frozenset()
    """Passes during which the cluster carries the paused annotation."""
    specs: Mapping[int, tuple[int, int]] = attrs.field(factory=dict)
    """Pass -> (shards, replicasPerShard) the user sets from that pass on (scaling, reverting)."""
    kills: Collection[tuple[int, int]] = frozenset()
    """(pass, pod sequence number): someone deletes that pod, whatever it holds."""
    crashes: Collection[tuple[int, int]] = frozenset()
    """(pass, pod sequence number): that pod's server is SIGKILLed; the pod ends Failed."""
    reboots: Collection[tuple[int, int]] = frozenset()
    """(pass, pod sequence number): that pod's node reboots: new identity, new IP, no data."""
    unread: Collection[tuple[int, int]] = frozenset()
    """(pass, pod sequence number): that pod's server answers the topology reads, but its migration
    log, CONFIG GET, ACL LIST and COMMAND INFO fail (unknown facts)."""
    tampers: Collection[tuple[int, int]] = frozenset()
    """(pass, pod sequence number): someone changes that server by hand: a runtime setting, an ACL
    user's rules, and a user nobody asked for."""
    edits: Mapping[int, Desired] = attrs.field(factory=dict)
    """Pass -> the whole desired state from that pass on (a config, role or annotation edit)."""

    def act(self, index: int) -> tuple[Act, int]:
        return self.acts[index] if index < len(self.acts) else (Act.ALL, 0)


@attrs.define
class Run:
    sim: SimulatedCluster
    desired: Desired
    plans: list[Plan] = attrs.field(factory=list)
    recorded: ClusterState | None = None
    recorded_hash: str | None = None
    recorded_image: str | None = None
    lost: list[Forget] = attrs.field(factory=list)
    """Forgets that gave up slots with no copy left (only after a loss the chaos caused)."""
    refusals: Refusals = attrs.field(factory=Refusals)
    """CONFIG SETs the world refused, fed to the next pass as the reconciler does."""

    @property
    def last(self) -> Plan:
        return self.plans[-1]

    @property
    def passes(self) -> int:
        return len(self.plans)


def run(
    desired: Desired,
    *,
    settings: SimSettings | None = None,
    chaos: Chaos | None = None,
    max_passes: int = 60,
    until: Callable[[Plan], bool] = lambda plan: plan.status.state is ClusterState.ACTIVE,
    sim: SimulatedCluster | None = None,
) -> Run:
    """Reconcile until `until(plan)` holds (checked after the plan's actions are applied) or max_passes."""
    chaos = chaos or Chaos()
    world = sim or SimulatedCluster(settings)
    result = Run(world, desired)
    for index in range(max_passes):
        one_pass(result, index, chaos)
        if until(result.last):
            return result
    return result


def one_pass(result: Run, index: int, chaos: Chaos) -> Plan:
    sim = result.sim
    if index in chaos.edits:
        result.desired = chaos.edits[index]
    if index in chaos.specs:
        shards, replicas = chaos.specs[index]
        result.desired = attrs.evolve(result.desired, shards=shards, replicas_per_shard=replicas)
    sim.template_hash = (
        result.desired.template_hash
    )  # the operator renders new pods from the desired template
    sim.shape_hash = result.desired.shape_hash or None
    for pass_index, seq in sorted(chaos.tampers):
        pod = next((pod for pod in sim.pods.values() if pod.seq == seq), None)
        if pass_index == index and pod is not None and sim.node_of(pod.name) is not None:
            tamper(sim, pod.name, result.desired)
    for pass_index, seq in sorted(chaos.deletions):
        if pass_index == index:
            _external_delete(sim, seq)
    for events, hit in (
        (chaos.kills, sim.delete_pod),
        (chaos.crashes, sim.crash_pod),
        (chaos.reboots, sim.reboot_pod),
    ):
        for pass_index, seq in sorted(events):
            pod = next((pod for pod in sim.pods.values() if pod.seq == seq), None)
            if pass_index == index and pod is not None and sim.node_of(pod.name) is not None:
                hit(pod.name)
    unreachable = {pod.name for pod in sim.pods.values() if (index, pod.seq) in chaos.unreachable}
    unread = {pod.name for pod in sim.pods.values() if (index, pod.seq) in chaos.unread}
    observation = sim.observe(
        unreachable,
        unread=unread,
        commands=sorted({c for user in result.desired.acl.users for _, c in user.commands}),
    )
    context = sim.context(
        recorded_state=result.recorded,
        recorded_config_hash=result.recorded_hash,
        recorded_image=result.recorded_image,
        refusals=live_refusals(result.refusals, sim.pods),
    )
    desired = attrs.evolve(result.desired, paused=True) if index in chaos.paused else result.desired
    planned = plan(observation, desired, context)
    check_step(sim, observation, planned, desired, unreachable)
    act, through = chaos.act(index)
    actions = planned.actions[:through] if act is Act.CRASH else planned.actions
    outcomes = sim.apply(actions, unreachable)
    errors = [outcome for outcome in outcomes if outcome.error is not None and not _refusal(outcome, sim)]
    assert not errors, f"the world refused planned actions: {errors}"
    result.refusals = remember_refusals(result.refusals, actions, failures_of(outcomes))
    if act is Act.TWICE:
        sim.apply(actions, unreachable)  # errors allowed: a stale replay, the next pass re-observes
    if act is not Act.LOSE_STATUS and act is not Act.CRASH:
        result.recorded = planned.status.state
        result.recorded_hash = planned.status.config_hash
        result.recorded_image = planned.status.current_image
    result.plans.append(planned)
    result.lost += [action for action in actions if isinstance(action, Forget) and action.lost]
    check_world(sim)
    sim.advance()
    return planned


def failures_of(outcomes: Sequence[Outcome]) -> list[Failure]:
    """The simulator's errors as the actor reports them (a CONFIG SET answered with an error), then
    classified as decide classifies them (refusals.py)."""
    return [
        classified(
            Failure(outcome.action, outcome.error, command_error=isinstance(outcome.action, SetConfig))
        )
        for outcome in outcomes
        if outcome.error is not None
    ]


CLUSTER = "ns/vk"


def _refusal(outcome: Outcome, sim: SimulatedCluster) -> bool:
    """A value the world is set up to refuse (SimSettings.refused): the status reports it."""
    return isinstance(outcome.action, SetConfig) and bool(sim.settings.refused)


TAMPERED_SETTING = ("maxmemory-samples", "9")
TAMPERED_RULES = ("reset", "on", "nopass", "~*", "+@all")


def tamper(sim: SimulatedCluster, pod: str, desired: Desired) -> None:
    """Someone changes the server by hand: a setting, a spec user's rules, and an extra user."""
    sim.tamper_config(pod, *TAMPERED_SETTING)
    for user in desired.acl.users[:1]:
        sim.tamper_acl(pod, user.user.username, TAMPERED_RULES)
    sim.tamper_acl(pod, "intruder", TAMPERED_RULES)


def _external_delete(sim: SimulatedCluster, seq: int) -> None:
    for pod in list(sim.pods.values()):
        node = sim.node_of(pod.name)
        if pod.seq == seq and (node is None or not node.slots):
            sim.delete_pod(pod.name)


# --- invariants ----------------------------------------------------------------------------------


def check_step(
    sim: SimulatedCluster, observation: Observation, planned: Plan, desired: Desired, unreachable: set[str]
) -> None:
    """SPEC 5, checked against ground truth before the plan is acted on."""
    check_deterministic(observation, planned, desired)
    if desired.paused:
        assert planned.actions == ()
    check_one_disruption(observation, planned)
    check_spread_caps(observation, planned, desired)
    check_deletions(sim, planned)
    check_forgets(sim, planned)
    check_version_floor(sim, planned)
    check_migrations(sim, planned, desired)
    check_promotions(sim, planned)
    check_failovers(sim, planned)
    check_reachable_targets(planned, unreachable)
    check_known_facts(observation, planned)
    check_status(sim, observation, planned, desired)
    check_members(sim, planned, desired)


def check_deterministic(observation: Observation, planned: Plan, desired: Desired) -> None:
    """Re-planning from the same observation (a restarted operator) yields the same plan, in any order."""
    assert plan(observation, desired, planned.view.context) == planned
    shuffled = list(observation.pods)
    random.Random(len(shuffled)).shuffle(shuffled)
    reordered = attrs.evolve(
        observation,
        pods=tuple(reversed(shuffled)),
        nodes=dict(reversed(list(observation.nodes.items()))),
    )
    assert plan(reordered, desired, planned.view.context) == planned


def check_one_disruption(observation: Observation, planned: Plan) -> None:
    assert len(planned.disruptive) <= 1, planned.disruptive
    if any(pod.deleting for pod in observation.pods):
        assert planned.disruptive == (), "a disruptive step while another is in flight"


def check_spread_caps(observation: Observation, planned: Plan, desired: Desired) -> None:
    """The spread chooses its moves together and sends the first: the set (spread.next_moves) has
    at most one move per shard and, counted after all of them, takes no target's Kubernetes node
    beyond its share (or beyond where its count already was) and no zone beyond its share; a pass
    without a roll sends no failover but that set's first (or none, while other steps come first)."""
    view = View(observation, desired, planned.view.context)
    moves = spread.next_moves(view)
    sent = [action for action in planned.actions if isinstance(action, Failover)]
    if not planned.rolling.outdated and not desired.paused:
        assert sent in ([], [move for move, _ in moves[:1]]), (sent, moves)
    if not moves:
        return
    facts = spread.spread(view)
    assert facts is not None
    zone = view.node_zones.get
    after = facts
    shards = []
    for move, _ in moves:
        target = next(node for node in view.members.values() if node.pod.name == move.node)
        source = next(node for node in view.members.values() if target in view.followers(node))
        shards.append(source.pod.shard)
        after = after.moved(
            source.pod.node_name or "",
            zone(source.pod.node_name or ""),
            target.pod.node_name or "",
            zone(target.pod.node_name or ""),
        )
    assert len(shards) == len(set(shards)), moves
    for move, _ in moves:
        target = next(node for node in view.members.values() if node.pod.name == move.node)
        host = target.pod.node_name or ""
        assert after.per_node[host] <= max(facts.node_cap, facts.per_node[host]), (host, after, facts)
        if (zone_name := zone(host)) is not None:
            assert after.per_zone[zone_name] <= facts.zone_cap, (zone_name, after, facts)


def check_deletions(sim: SimulatedCluster, planned: Plan) -> None:
    """Never delete a pod whose node owns slots or is the only up-to-date copy of its shard."""
    for action in planned.actions:
        if not isinstance(action, DeletePod):
            continue
        node = sim.node_of(action.pod)
        if node is None:
            continue
        assert not node.slots, f"deleting {action.pod}, which owns slots"
        assert not _migrating(sim, node.node_id), f"deleting {action.pod}, which takes part in a migration"
        if node.role is NodeRole.REPLICA:
            primary = sim.nodes.get(node.primary_id or "")
            assert primary is not None, f"deleting {action.pod}, the last copy"
            assert primary.alive or not primary.slots, f"deleting {action.pod}, the last copy"


def _migrating(sim: SimulatedCluster, node_id: str) -> bool:
    return any(job.state == "syncing" and node_id in {job.source_id, job.target_id} for job in sim.migrations)


def check_migrations(sim: SimulatedCluster, planned: Plan, desired: Desired) -> None:
    """One job per source at a time, only slots the source serves, only into a shard in spec."""
    sources = [action.node for action in planned.actions if isinstance(action, MigrateSlots)]
    assert len(sources) == len(set(sources)), f"two jobs from one source: {sources}"
    for action in planned.actions:
        if not isinstance(action, MigrateSlots):
            continue
        source = sim.node_of(action.node)
        target = sim.nodes[action.target_id]
        assert source is not None and not subtract(action.slots, source.slots), action
        assert not any(
            job.state == "syncing" and job.source_id == source.node_id for job in sim.migrations
        ), f"second job from {action.node}"
        assert target.alive and sim.pods[target.pod].shard < desired.shards, action


def check_failovers(sim: SimulatedCluster, planned: Plan) -> None:
    """A planned failover goes to a replica that has every write of a live primary, and only when
    every live member knows it; never alongside another disruptive step."""
    for action in planned.actions:
        if isinstance(action, Failover):
            node = sim.node_of(action.node)
            assert node is not None and node.role is NodeRole.REPLICA, action
            primary = sim.nodes[node.primary_id or ""]
            assert primary.alive and node.link_up, action
            assert primary.repl_offset - node.repl_offset <= MAX_IN_SYNC_LAG_BYTES, action
            assert all(
                node.node_id in other.known
                for other in sim.nodes.values()
                if other.alive and other.known and other is not node
            ), action


def check_promotions(sim: SimulatedCluster, planned: Plan) -> None:
    """TAKEOVER only for a replica whose primary is dead for good (its pod runs no server with that id)."""
    for action in planned.actions:
        if isinstance(action, Promote):
            assert action.departed not in sim.pod_ids() or not sim.nodes[action.departed].alive, action
            node = sim.node_of(action.node)
            assert node is not None and node.primary_id == action.departed, action


def check_forgets(sim: SimulatedCluster, planned: Plan) -> None:
    """Never forget a node id while its server lives; never ask a replica to forget its primary; give
    up slots only when no live replica holds a copy."""
    for action in planned.actions:
        if not isinstance(action, Forget):
            continue
        ghost = sim.nodes.get(action.node_id)
        assert ghost is None or not ghost.alive, f"forgetting {action.node_id}, whose server lives"
        if action.lost:
            assert not any(node.alive and node.primary_id == action.node_id for node in sim.nodes.values()), (
                f"giving up {action.node_id}'s slots while a replica holds them"
            )
        for pod in action.on:
            node = sim.node_of(pod)
            assert node is not None and node.primary_id != action.node_id


def check_version_floor(sim: SimulatedCluster, planned: Plan) -> None:
    """A node below the floor is never met, given slots or replicated, and no node knows it."""
    rejected = {node.node_id: node for node in sim.nodes.values() if not meets_floor(node.version)}
    rejected_pods = {node.pod for node in rejected.values()}
    for action in planned.actions:
        match action:
            case Meet():
                assert {action.node, action.peer}.isdisjoint(rejected_pods), action
            case AssignSlots() | Replicate():
                assert action.node not in rejected_pods, action
        if isinstance(action, Replicate):
            assert action.primary_id not in rejected, action
    for node_id, node in rejected.items():
        assert not sim.members_known_by(node_id), f"{node.pod} below the floor joined"
        assert not node.known and not node.slots


def check_reachable_targets(planned: Plan, unreachable: set[str]) -> None:
    """Unreachable is a fact to plan around: nothing is sent to a node that did not answer."""
    for action in planned.actions:
        targets: tuple[str, ...] = ()
        match action:
            case Meet(node=node, peer=peer):
                targets = (node, peer)
            case AssignSlots(node=node) | Replicate(node=node) | SetConfig(node=node) | SyncAcl(node=node):
                targets = (node,)
            case Forget(on=on):
                targets = on
        assert unreachable.isdisjoint(targets), action


def check_known_facts(observation: Observation, planned: Plan) -> None:
    """No config, ACL or metadata action is decided from a fact the pass could not read."""
    pods = {pod.name: pod for pod in observation.pods}
    for action in planned.actions:
        match action:
            case SetConfig(node=node):
                known = observation.nodes.get(node)
                assert known is not None and known.config is not None, action
            case SyncAcl(node=node):
                known = observation.nodes.get(node)
                assert known is not None and known.acl is not None, action
            case PatchPodMetadata(pod=pod, uid=uid):
                assert pod in pods and pods[pod].live and pods[pod].uid == uid, action


def check_status(sim: SimulatedCluster, observation: Observation, planned: Plan, desired: Desired) -> None:
    """Active only when it is true; otherwise the status says which slots are not served and why."""
    status = planned.status
    if status.state is ClusterState.ACTIVE:
        check_active_truth(sim, desired)
        assert status.uncovered == ()
        assert status.ready_shards == desired.shards
        assert status.condition("Ready").status
    elif status.state is ClusterState.UPDATING:
        # SPEC 1.8: Ready while every slot is served (scaling, rolling, settings, spread moves).
        assert status.condition("Ready").status == (not status.uncovered and not _primary_down(observation))
    else:
        assert not status.condition("Ready").status
    assert status.condition("Stalled").status == (status.state is ClusterState.FAILED)
    if status.uncovered:
        named = {Reason.ASSIGNING_SLOTS, Reason.SLOTS_UNCOVERED}
        first = format_slot_ranges(status.uncovered[:1]).split("-")[0]
        assert any(f.reason in named and first in f.message for f in status.findings), status.findings
    assert len(status.nodes) == sum(1 for pod in observation.pods if pod.shard is not None and not pod.ended)


def _primary_down(observation: Observation) -> bool:
    """A primary serving slots reports cluster_state fail (its clients get CLUSTERDOWN)."""
    return any(
        node.role is NodeRole.PRIMARY and node.slots and node.cluster_ok is False
        for node in observation.nodes.values()
    )


def check_members(sim: SimulatedCluster, planned: Plan, desired: Desired) -> None:
    """The client Service's label: only on serving members, off a pod before it is deleted, and on
    every live pod of an Active cluster once the pass acted. Only running pods that are not being
    deleted count: the Service drops every other pod by itself (not Ready, or terminating)."""
    live = {
        name for name, pod in sim.pods.items() if pod.deleting_since is None and pod.phase is PodPhase.RUNNING
    }
    labelled = {name for name in live if sim.pods[name].member}
    for action in planned.actions:
        if isinstance(action, MarkMember) and action.member:
            node = sim.node_of(action.pod)
            assert node is not None and node.alive and sim.cluster_ok(node), action
            if node.role is NodeRole.PRIMARY:
                assert node.slots, f"{action.pod}: an empty primary handed to clients"
            else:
                primary = sim.nodes.get(node.primary_id or "")
                assert node.link_up and primary is not None and primary.slots, f"{action.pod}: not in sync"
        if isinstance(action, MarkMember) and action.pod in live:
            (labelled.add if action.member else labelled.discard)(action.pod)
        if isinstance(action, DeletePod):
            assert action.pod not in labelled, f"{action.pod} deleted while still handed to clients"
    if planned.status.state is ClusterState.ACTIVE and not desired.paused:
        assert live <= labelled, f"Active, but not handed to clients: {sorted(live - labelled)}"


def check_active_truth(sim: SimulatedCluster, desired: Desired) -> None:
    """Ground truth of Active: each slot served by exactly one live primary, every replica in sync."""
    served = sim.served()
    assert coverage(served.values()).complete, format_slot_ranges(
        subtract(ALL_SLOTS, union(*served.values()))
    )
    primaries = [sim.nodes[node_id] for node_id in served]
    assert sorted(sim.pods[node.pod].shard for node in primaries) == list(range(desired.shards))
    for node in primaries:
        expected = quotas(desired.shards)[sim.pods[node.pod].shard]
        assert slot_count(node.slots) == expected, f"{node.pod} serves {slot_count(node.slots)} slots"
    for primary in primaries:
        replicas = _replicas_of(sim, primary)
        assert len(replicas) == desired.replicas_per_shard
        for replica in replicas:
            assert replica.link_up and replica.repl_offset == primary.repl_offset
            assert sim.pods[replica.pod].shard == sim.pods[primary.pod].shard
    running = [pod for pod in sim.pods.values() if pod.phase is not PodPhase.FAILED]
    assert len(running) == desired.shards * desired.pods_per_shard
    live = [node for node in sim.nodes.values() if node.alive]
    assert all(sim.cluster_ok(node) for node in live)
    ids = {node.node_id for node in live}
    assert all(node.known == ids - {node.node_id} for node in live), "members do not all know each other"
    check_upkeep_truth(sim, desired)


def check_upkeep_truth(sim: SimulatedCluster, desired: Desired) -> None:
    """Ground truth of Active, day 2: every server runs the desired settings and exactly the users
    the decision names; every live pod carries the annotations; every owned object exists."""
    for node in sim.nodes.values():
        if not node.alive:
            continue
        owned = operator_runtime(desired.replicas_per_shard)
        wanted = {**desired_runtime(desired.runtime, node.version).values, **owned}
        if desired.backup_running:  # a backup lowers the sync delay for a moment: left alone meanwhile
            wanted.update((name, node.config.get(name, value)) for name, value in owned.items())
        assert node.config == wanted, f"{node.pod} runs {node.config}"
        if desired.acl.internal:
            listed = {user.username for user in desired.acl.internal} | {
                user.user.username for user in desired.acl.users
            }
            assert set(node.acl) <= listed, f"{node.pod} has users nobody asked for: {set(node.acl) - listed}"
            for user in desired.acl.internal:
                assert node.acl[user.username] == normal_form(user.rules), user.username
            for spec_user in desired.acl.users:
                if not any(command in sim.settings.unknown_commands for _, command in spec_user.commands):
                    wanted_user = normal_form(spec_user.user.rules)
                    assert node.acl.get(spec_user.user.username) == wanted_user, spec_user.user.username
    for pod in sim.pods.values():
        if pod.deleting_since is None and pod.phase is not PodPhase.FAILED:
            assert desired.pod_annotations.items() <= pod.annotations.items(), pod.name
    for owned in desired.objects:
        assert owned.key in sim.objects, owned.key


def _replicas_of(sim: SimulatedCluster, primary: SimNode) -> list[SimNode]:
    return [
        node
        for node in sim.nodes.values()
        if node.alive and node.role is NodeRole.REPLICA and node.primary_id == primary.node_id
    ]


def check_world(sim: SimulatedCluster) -> None:
    """After every step: no slot is served by two live primaries."""
    assert not coverage(sim.served().values()).contested
