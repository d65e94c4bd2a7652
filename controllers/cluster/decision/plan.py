"""The cluster planner: (observation, desired, context) -> the next actions and the status they imply.

`plan` is a pure, deterministic function (SPEC 5). It keeps no memory between
passes: progress is read from the world (pods, slot ownership, replication
links, migration logs), so an operator that restarts after any step re-derives
the same next step from what the cluster really is. Waiting is a requeue hint,
never a sleep. The pass's derived facts live in view.py, the steps it may ask
for in actions.py, the status it reports in report.py, the slot arithmetic of
rebalancing in rebalance.py.

Each pass, for the nodes observed in it (docs/cluster-internals.md), in the
order the actor carries the actions out. The pass's label changes come first
(`membership.first`): a pod leaves the client Service before this pass removes
it. Then `_actions`, whose every step is named below in backquotes (a test,
tests/unit/test_docstring_steps.py, keeps the two in step):
1. apply the owned objects (Service, ConfigMap, internal Secret with the
   startup ACL file, PDBs) that drifted from their rendering
   (`upkeep.apply_objects`), delete the retired ones this cluster controls
   (`upkeep.delete_objects`), patch new or changed podAnnotations onto live
   pods (`upkeep.patch_metadata`), and keep the data claims: reported node
   ids recorded, sizes grown, unneeded free claims deleted (`data_claims.upkeep`),
   and mark done the failover request of each replica since seen primary
   (`rollout.mark_fulfilled`), so a later demotion of that pod is no request
   in flight; the template-hash label of each pod whose in-place resize the
   kubelet reported, and whose node runs the maxmemory that follows it, is
   patched to the current hash (Rollout.resize, rollout.plan_resize);
2. create the missing pods (one per shard per replica slot, and the rolling
   shard's surge pod), except for a shard whose pods keep failing before they
   serve (failures.py), and none while the cache has not caught up with this
   operator's own pod writes (`_create_missing`);
3. CONFIG SET the runtime settings each node does not run as desired
   (`upkeep.set_config`), tell a TLS node to load its certificate files again
   when it presents another certificate than the Secret's or has not surely
   loaded its latest content (`certificates.reload_tls`), and ACL
   SETUSER/DELUSER what differs from its ACL LIST (`upkeep.sync_acl`), before
   the node takes part in any topology step below;
4. a node below the version floor (or with none) never joins: the cluster is
   Failed and none of the topology steps 5-10 is planned (view.rejected);
5. one seed node MEETs every eligible node it has not met (`_meet`), and
   again any member whose address changed (`_reintroduce`);
6. each shard's first primary gets the shard's unowned share of the slots
   (`_assign_slots`), chosen among the shard's pods by where they run, so the
   spread (step 11) has nothing to move after a bootstrap;
7. the shard's other nodes replicate its primary (a new shard's replicas
   attach to its empty primary before it gets slots) (`_replicate`); one
   that does not know that primary yet MEETs it itself (`_introduce`);
   steps 5-7 take a starting pod as soon as its server answers, before its
   readiness probe passes (view.Node.joinable);
8. a departed primary's replica is promoted (TAKEOVER) when Valkey's vote
   cannot do it, and so is the replica of a primary every member flags
   failing while no majority of primaries answers (`_promote`);
9. node ids whose pods are gone are forgotten on every node that knows them
   (`_forget`);
10. slots move toward each shard's quota, one migration job per source
   (`_migrate`);
11. with no pod leaving: the roll's coordinated failover, or the next in-place
   resize (sent through pods/resize, only once the roll replaces nothing;
   a refusal by the API server is recorded on the pod, which then rolls:
   resize.record_refusal), or,
   when the pass only keeps things up and nothing is being resized, the
   spread's next move (`spread.next_move`, the first of the moves it chose
   together), each failover recorded on its replica's pod first
   (`failover_request`);
12. old failed pods beyond the newest few of a shard are pruned (`_prune`),
   and at most one pod is removed (surplus replicas, drained leaving shards, a
   rejected pod of an old template, the roll's step), never one holding slots
   or the last copy (`_removal`).
Active once every slot is served by exactly one reachable primary, every
shard holds its quota and has its replicas in sync, every node reports
cluster_state ok and runs the current settings.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

import attrs

from controllers.cluster.decision import (
    certificates,
    data_claims,
    external,
    membership,
    resize,
    rollout,
    spread,
    upkeep,
)
from controllers.cluster.decision.actions import (
    ApplyObject,
    AssignSlots,
    DeleteObject,
    DeletePod,
    Failover,
    Failure,
    Forget,
    Meet,
    MigrateSlots,
    NewPod,
    PatchPodMetadata,
    Planned,
    Promote,
    PruneFailedPod,
    ReloadTls,
    Replicate,
    SetConfig,
    SyncAcl,
)
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired
from controllers.cluster.decision.rebalance import (
    MAX_BATCH_SLOTS,
    highest_slots,
    trouble,
)
from controllers.cluster.decision.report import PlannedStatus, Reason, report
from controllers.cluster.decision.rollout import Rollout, failover_request, plan_rollout
from controllers.cluster.decision.view import Node, View
from controllers.shared.observation import Observation, PodObservation
from controllers.shared.versions import meets_floor
from valkey_operator.api.cluster import ClusterState, NodeRole
from valkey_operator.valkey.replies import NodeFlag
from valkey_operator.valkey.slots import ALL_SLOTS, coverage, subtract

VOTE_GRACE_S = 60.0
"""How long after the last word from a departed primary Valkey's own election may take before the
operator promotes its replica anyway (Valkey elects within about two cluster-node-timeouts)."""

LINK_SLACK_S = 10.0
"""How much earlier than the last word any member had from a silent primary its replica's link may
have dropped, for that replica still to take over (clocks of different hosts, gossip's period)."""

REQUEUE_FAST = 0.25
"""Something ends within a second or two and raises no watch event (`settling`): poll that closely."""
PRIMARY_CHOICE_WAIT_S = 2.0
"""How long a shard's first primary waits for the shard's other scheduled pods to join, so that it
is chosen by where each pod runs (`_siblings_starting`)."""
JOIN_WINDOW_S = 15.0
"""How long after its pod's creation a new node is polled closely: Valkey's writable delay (2 s) and
rejoin delay (at most 5 s) with room to spare; a node still not serving after that is no longer
about to, and waits at the usual cadence."""
REQUEUE_ACTING = 1.0
"""Seconds until the next pass after acting: long enough for the effect to show, short enough to chain."""
REQUEUE_WAITING = 2.0
"""Waiting for the world (pods starting, gossip, replication) that no watch event announces."""
REQUEUE_STEADY = 30.0
"""Active or paused: still re-observe, since Valkey changes raise no Kubernetes events."""
REQUEUE_QUEUED = 10.0
"""Waiting for a rollout slot: another cluster's roll ending is no event of this cluster's."""
REQUEUE_FAILED = 60.0
"""Failed waits for a spec change (which triggers a pass by itself); re-check now and then anyway."""


@attrs.frozen(kw_only=True)
class Plan:
    actions: tuple[Planned, ...]
    status: PlannedStatus
    requeue_after: float
    view: View = attrs.field(eq=False, repr=False)
    """The pass's facts, for `finish` once the actions were carried out."""
    rolling: Rollout = attrs.field(eq=False, repr=False)
    """The roll as computed once this pass (actions and status both read it)."""

    @property
    def disruptive(self) -> tuple[Planned, ...]:
        return tuple(action for action in self.actions if action.disruptive)


def plan(observation: Observation, desired: Desired, context: Context) -> Plan:
    """The next actions toward desired, and the status the observation implies, in the pass's
    context (its time, the stored status, what earlier passes remember: context.py)."""
    return plan_view(View(observation, desired, context))


def plan_view(view: View) -> Plan:
    """plan() for a View already built (decide builds it once, to admit the roll first)."""
    rolling = plan_rollout(view)
    actions = () if view.desired.paused else membership.first(view, _actions(view, rolling))
    status = report(view, actions, rolling)
    return Plan(
        actions=actions,
        status=status,
        requeue_after=_requeue(view, status, actions, rolling),
        view=view,
        rolling=rolling,
    )


REQUEUE_REFUSED = 30.0
"""A pass whose only failed actions were refusals (a value or rule Valkey rejects): the next
attempt fails the same way until the spec changes, which triggers a pass by itself."""


def finish(planned: Plan, failures: Sequence[Failure]) -> Plan:
    """The plan once its actions were carried out: failed ones are findings of its status."""
    if not failures:
        return planned
    status = report(planned.view, planned.actions, planned.rolling, failures)
    refused = [failure.action for failure in failures if failure.refused is not None]
    retried = [
        action
        for action in planned.actions
        if action not in refused and not (isinstance(action, PatchPodMetadata) and action.after in refused)
    ]
    requeue = planned.requeue_after if retried or len(refused) < len(failures) else REQUEUE_REFUSED
    return attrs.evolve(planned, status=status, requeue_after=max(requeue, REQUEUE_WAITING))


def _actions(view: View, rolling: Rollout) -> tuple[Planned, ...]:
    removal = _removal(view, rolling)
    leaving = {removal.pod} if removal is not None else set()
    actions: list[Planned] = [*upkeep.apply_objects(view), *upkeep.delete_objects(view)]
    actions += upkeep.patch_metadata(view)
    actions += external.services(view)
    actions += external.pod_labels(view)
    actions += data_claims.upkeep(view)
    actions += rollout.mark_fulfilled(view)
    actions += rolling.resize.labels
    actions += _create_missing(view, rolling)
    actions += upkeep.set_config(view)
    actions += certificates.reload_tls(view)
    actions += upkeep.sync_acl(view)
    if not view.rejected:
        actions += _meet(view, leaving)
        actions += _reintroduce(view, leaving)
        actions += _assign_slots(view, leaving)
        actions += _replicate(view, leaving)
        actions += _introduce(view, leaving)
        actions += _promote(view)
        actions += _forget(view)
        actions += _migrate(view, leaving)
    quiet = not rolling.outdated and not rolling.resize.pods
    if removal is None and isinstance(rolling.step, Failover):
        actions += [failover_request(view, rolling.step.node, rolling.failover), rolling.step]
    elif removal is None and rolling.resize.step is not None:
        actions += [rolling.resize.step, resize.record_refusal(rolling.resize.step, view.desired)]
    elif removal is None and quiet and all(isinstance(action, _UPKEEP) for action in actions):
        move = spread.next_move(view)
        if move is not None:
            step, previous = move
            actions += [failover_request(view, step.node, previous), step]
    actions += _prune(view)
    if removal is not None:
        actions.append(removal)
    return tuple(actions)


_UPKEEP = (ApplyObject, DeleteObject, PatchPodMetadata, SetConfig, SyncAcl)
"""Actions that leave the topology alone: a primary may move in the same pass."""


def _create_missing(view: View, rolling: Rollout) -> Iterable[NewPod]:
    """One pod per missing member, and the rolling shard's surge pod; none for a shard in a crash
    loop, none while the cache lags. With persistence a missing pod starts on its shard's free
    claim first (a node lost without being planned comes back), else on a new one."""
    if view.context.awaiting:
        return
    annotations = certificates.created_annotations(view)
    for shard in range(view.desired.shards):
        if shard in view.crash_loops.blocked:
            continue
        wanted = view.desired.pods_per_shard + (1 if rolling.surge and shard == rolling.shard else 0)
        missing = max(wanted - len(view.shard_pods(shard)), 0)
        if not view.desired.persistent:
            yield from (NewPod(shard, annotations) for _ in range(missing))
            continue
        free = data_claims.startable(view, shard)
        later = data_claims.returning(view, shard) + data_claims.waiting(view, shard)
        new = max(missing - len(free) - later, 0)
        yield from (NewPod(shard, annotations, claim=claim) for claim in free[:missing])
        yield from (NewPod(shard, annotations) for _ in range(new))


def _prune(view: View) -> Iterable[PruneFailedPod]:
    """Failed pods beyond the newest few of their shard (the newest stay as evidence)."""
    if view.context.awaiting:
        return
    for pod in view.crash_loops.prune:
        yield PruneFailedPod(pod.name, pod.uid)


def _meet(view: View, leaving: set[str]) -> Iterable[Meet]:
    """The seed introduces every eligible node it has not met, Ready or starting (gossip tells the
    rest): met within 2 s of its start, a new primary serves 2 s after it, not 5 s after MEET. The
    seed may be starting itself (a bootstrap, where no pod is Ready yet; a Ready node is the seed
    whenever there is one, View._seed). Not while either is loading its data (a restore): Valkey
    refuses MEET then, which would report a normal restore as a failed action; the pass after the
    load meets them."""
    seed = view.seed
    if seed is None or not seed.joinable or seed.obs.loading or not external.announced(view, seed):
        return
    for node in view.nodes.values():
        if (
            node.pod.name in view.members
            or node.pod.name in leaving
            or not node.joinable
            or not external.announced(view, node)
            or node.obs.loading
            or not view.in_spec(node.pod)
            or not meets_floor(node.obs.version)
            or node.pod.ip is None
            or seed.obs.handshaking_with(node.pod.ip)
        ):
            continue
        yield Meet(node=seed.pod.name, peer=node.pod.name, peer_ip=node.pod.ip)


def _reintroduce(view: View, leaving: set[str]) -> Iterable[Meet]:
    """A member the seed knows at another address (or that knows the seed at another) is met again
    at its pod's IP: after a node recovery or a restart of every pod, gossip alone cannot find it."""
    seed = view.seed
    if seed is None or not seed.active or seed.pod.ip is None:
        return
    for node in view.members.values():
        if node is seed or not node.active or node.pod.ip is None or node.pod.name in leaving:
            continue
        theirs = seed.obs.knows(node.node_id)
        ours = node.obs.knows(seed.node_id)
        moved = (theirs is not None and theirs.ip != node.pod.ip) or (
            ours is not None and ours.ip != seed.pod.ip
        )
        if moved and not seed.obs.handshaking_with(node.pod.ip):
            yield Meet(node=seed.pod.name, peer=node.pod.name, peer_ip=node.pod.ip)


def _assign_slots(view: View, leaving: set[str]) -> Iterable[AssignSlots]:
    """Unowned slots of each shard's share go to its primary, or to its oldest empty member primary.

    Only when every pod that may run a server answered: a slot owner that did not answer this
    pass makes its slots look unowned, and assigning them again would give them two owners. The
    same holds for a durable node away from its claim (view.dormant): it comes back with its slots.
    A starting primary whose server answered takes them (Node.joinable): a bootstrap's slots and
    replicas are in place by the time the readiness probes pass, and Valkey's writable delay and
    the replica's sync delay run from the assignment, not from readiness.
    """
    if view.unidentified or view.dormant:
        return
    restore = view.restore_progress
    if restore is not None and not restore.all_loaded:
        return  # a restoring node takes the slots it loaded keys for at start (restore.py)
    shards = [
        shard
        for shard in range(view.desired.shards)
        if subtract(view.layout[shard], view.claimed)
        and view.shard_identified(shard)
        and len(view.primaries(shard)) <= 1
    ]
    chosen = _first_primaries(
        view,
        [s for s in shards if view.primary(s) is None and not _siblings_starting(view, s, leaving)],
        leaving,
    )
    for shard in shards:
        primary = view.primary(shard) or chosen.get(shard)
        if (
            primary is not None
            and primary.joinable
            and primary.pod.name not in leaving
            and external.announced(view, primary)  # clients are sent to a node's slots at once
        ):
            yield AssignSlots(node=primary.pod.name, slots=subtract(view.layout[shard], view.claimed))


def _siblings_starting(view: View, shard: int, leaving: set[str]) -> bool:
    """A pod of shard placed on a Kubernetes node, created within PRIMARY_CHOICE_WAIT_S, whose
    server has not joined yet: the shard's first primary waits for it, so that it is chosen among
    all of the shard's pods by where they run (`_first_primaries`) rather than by which started
    first. Choosing by start order left two primaries on one node about every other bootstrap, and
    the spread then moved one with a failover right as the cluster became Active. Pods start within
    a fraction of a second of each other; one that does not is not waited for beyond the bound."""
    return any(
        pod.shard == shard
        and pod.live
        and pod.node_name is not None
        and pod.created_at is not None
        and view.now - pod.created_at < PRIMARY_CHOICE_WAIT_S
        and pod.name not in view.members
        and pod.name not in leaving
        and view.in_spec(pod)
        for pod in view.pods
    )


JOINT_CHOICE_LIMIT = 4096
"""The most combinations of candidate primaries weighed together in one pass; beyond that (a large
cluster bootstrapping at once) the shards choose one after another."""


def _first_primaries(view: View, shards: Sequence[int], leaving: set[str]) -> dict[int, Node]:
    """Each shard's first primary, chosen for all the shards together so that the zones and
    Kubernetes nodes hold as few primaries each as they can (`spread.crowding`), then the oldest
    pods. One shard after another could take a node a later shard needed: the spread then moved a
    primary with a failover right as the cluster became Active."""
    options = {shard: found for shard in shards if (found := _empty_primaries(view, shard, leaving))}
    if math.prod(len(found) for found in options.values()) > JOINT_CHOICE_LIMIT:
        chosen: dict[int, Node] = {}
        for shard, found in options.items():
            load = spread.primary_load(view, list(chosen.values()))
            chosen[shard] = min(found, key=lambda node: (load(node), node.pod.order))
        return chosen
    best = min(
        itertools.product(*options.values()),
        key=lambda combo: (spread.crowding(view, combo), tuple(node.pod.order for node in combo)),
    )
    return dict(zip(options, best, strict=True))


def _empty_primaries(view: View, shard: int, leaving: set[str]) -> list[Node]:
    """The shard's empty member primaries that may take its slots: those replicas already follow
    when there are any (an emptied shard scaled back in: they need not move)."""
    candidates = [
        node
        for node in view.members.values()
        if node.pod.shard == shard
        and node.joinable
        and node.pod.name not in leaving
        and node.is_primary
        and not node.obs.slots
    ]
    followed = [node for node in candidates if view.followers(node)]
    return followed or candidates


def _first_empty_primary(view: View, shard: int, leaving: set[str]) -> Node | None:
    """The primary of a shard added to a formed cluster (it gets its replicas first): where the
    zone and Kubernetes node hold the fewest primaries, then the oldest."""
    load = spread.primary_load(view)
    return min(
        _empty_primaries(view, shard, leaving), key=lambda node: (load(node), node.pod.order), default=None
    )


def _shard_primaries(view: View, leaving: set[str]) -> Iterable[tuple[int, Node]]:
    """Each shard's primary its other members replicate: the one serving its slots, or, for a
    shard added to a formed cluster, its oldest empty primary (it gets its replicas first).

    None while that primary's pod is going away. Its server hands its slots to an in-sync replica
    at SIGTERM (`shutdown-on-sigterm failover`), but first waits for every replica attached to it
    to catch up: a replacement pod told to replicate it then (a starting pod joins within half a
    second) needs a full sync, Valkey's diskless sync delay of 5 s and the transfer, and the
    handover waited all that. The replacement replicates the new primary once it has taken over."""
    formed = not subtract(ALL_SLOTS, view.claimed)
    for shard in range(view.desired.shards):
        primary = view.primary(shard)
        if primary is None and formed and not view.primaries(shard) and view.shard_identified(shard):
            primary = _first_empty_primary(view, shard, leaving)
        if primary is not None and not primary.pod.deleting:
            yield shard, primary


def _replicate(view: View, leaving: set[str]) -> Iterable[Replicate]:
    """Each shard's other members replicate its primary; a replica of another shard's primary moves.

    A shard added to a formed cluster gets its replicas before its first slots
    (its oldest empty primary stands as primary), so the data migrated in is
    copied from the start and writes to it can be acknowledged by a replica.
    """
    for shard, primary in _shard_primaries(view, leaving):
        for node in view.members.values():
            if node.pod.shard != shard or node is primary or not node.joinable or node.pod.name in leaving:
                continue
            seen = node.obs.knows(primary.node_id)
            if seen is None or NodeFlag.PRIMARY not in seen.flags:
                continue  # gossip has not told it about its primary (or its promotion) yet
            if _belongs_elsewhere(view, node, shard, primary):
                yield Replicate(node=node.pod.name, primary_id=primary.node_id)


def _introduce(view: View, leaving: set[str]) -> Iterable[Meet]:
    """A member that does not know its shard's primary yet MEETs it directly, so that it can replicate
    it the pass after. The seed's MEETs reach every node, but each node learns about the others
    only through gossip, about one random peer a second: a bootstrap's replica waited a second or
    more for it, then Valkey's diskless sync delay (5 s) on top. A handshake of its own takes a
    tenth of a second. Harmless when gossip was about to tell it anyway: both are members."""
    for shard, primary in _shard_primaries(view, leaving):
        if primary.pod.ip is None or not primary.joinable or primary.pod.name in leaving:
            continue
        for node in view.members.values():
            if (
                node.pod.shard == shard
                and node is not primary
                and node.joinable
                and node.pod.name not in leaving
                and node.obs.knows(primary.node_id) is None
                and not node.obs.handshaking_with(primary.pod.ip)
            ):
                yield Meet(node=node.pod.name, peer=primary.pod.name, peer_ip=primary.pod.ip)


def _belongs_elsewhere(view: View, node: Node, shard: int, primary: Node) -> bool:
    """An empty primary nobody follows, a replica Valkey places in another shard, a replica of a
    replica, or a replica of an empty primary (or of a departed slotless node) while its shard's
    primary is another node."""
    if node.is_primary:
        return not node.obs.slots and not view.followers(node)
    if node.obs.primary_id == primary.node_id:
        return False
    followed = view.by_id.get(node.obs.primary_id or "")
    if followed is not None and followed.obs.role is NodeRole.REPLICA:
        return True  # a chain (its primary became a replica): the shard's primary holds the same data
    if not view.claims.get(node.obs.primary_id or ""):
        if followed is not None and followed.is_primary:
            return True  # it copies an empty primary: nothing to lose by moving
        if followed is None and not view.unidentified:
            return True  # it copies a departed node that served nothing
    return view.valkey_shard(node) not in {None, shard}


def _promote(view: View) -> Iterable[Promote]:
    """A departed primary's most up-to-date replica takes over when Valkey cannot elect one itself.

    Valkey's failover needs a majority of slot-owning primaries to agree the old
    one failed; with that majority alive it is left to Valkey (a voted failover
    never races another), unless nobody has heard from the old primary for
    VOTE_GRACE_S (its replica may be too stale for Valkey to elect it). Without
    that majority (one or two shards) there is no vote to wait for. Either way
    the departed node can never come back (its pod is gone or runs another
    identity), so TAKEOVER cannot race it. Without that majority, a primary
    that is only silent (its pod still listed) is taken over too, once every
    member flags it (`_cut_off`), as Valkey's own election would with one.
    """
    yield from _promote_orphans(view)
    owners = [node_id for node_id, slots in view.claims.items() if slots]
    alive = sum(
        1 for node_id in owners if node_id in view.by_id and view.by_id[node_id].pod.name in view.members
    )
    majority = alive * 2 > len(owners)
    for ghost in view.stranded:
        if majority and view.now - view.last_heard(ghost) < VOTE_GRACE_S:
            continue
        followers = [node for node in view.ghost_followers(ghost) if node.active]
        if followers:
            yield Promote(node=_most_up_to_date(followers).pod.name, departed=ghost)
    if majority:
        return
    for silent in _cut_off(view):
        followers = [
            node
            for node in view.ghost_followers(silent)
            if node.active and _followed_to_the_end(view, node, silent)
        ]
        if followers:
            yield Promote(node=_most_up_to_date(followers).pod.name, departed=silent, unreachable=True)


def _cut_off(view: View) -> list[str]:
    """Slot owners that answer nobody while their pod may still exist (a failed Kubernetes node, a
    frozen process): not answering the operator, flagged failing (PFAIL or FAIL: silent for
    cluster-node-timeout) by every member, their slots served by no member.

    Without a majority of slot-owning primaries Valkey elects nobody, so such a shard waited for
    the node to come back (in the chaos run, 40-46 s for a node that held two primaries of four).
    The takeover is what Valkey's own election would do with a majority: the most up-to-date
    replica takes the slots with a newer epoch, and a primary that comes back with the old
    identity finds itself superseded and replicates it. What it accepted meanwhile was never
    replicated (WAIT would not have returned), and a primary that cannot reach a majority stops
    taking writes after cluster-node-timeout.
    """
    return sorted(
        node_id
        for node_id, slots in view.claims.items()
        if slots
        and node_id not in view.by_id
        and node_id not in view.stranded
        and subtract(slots, view.served)
        and view.members
        and all(_flags_failing(member, node_id) for member in view.members.values())
    )


def _followed_to_the_end(view: View, replica: Node, silent: str) -> bool:
    """The replica was copying the silent primary until it fell silent: its link is still up (a
    node that lost power sends no FIN) or dropped no earlier than LINK_SLACK_S before the last
    PONG any member got. Not one that never had a link since it started (restarted from its disk
    while the primary was away: it lacks what the primary took since), nor one whose link broke
    long before (Valkey's own election refuses such a stale replica too)."""
    if replica.obs.link_up:
        return True
    down = replica.obs.link_down_seconds
    if down is None or down < 0:
        return False
    heard = view.last_heard(silent)
    return heard == 0 or down <= view.now - heard + LINK_SLACK_S


def _flags_failing(member: Node, node_id: str) -> bool:
    known = member.obs.knows(node_id)
    return known is not None and (known.failed or known.suspected) and not known.connected


def _most_up_to_date(replicas: list[Node]) -> Node:
    """The replica to take over: the highest replication offset, then the oldest pod."""
    return min(replicas, key=lambda node: (-node.obs.repl_offset, node.pod.order))


def _promote_orphans(view: View) -> Iterable[Promote]:
    """A shard with no primary whose replica follows a departed node that served no slots (its
    primary left before it got any): Valkey never elects for a slotless primary, and the id cannot be
    forgotten while a replica follows it, so the replica takes over (nothing to lose or race)."""
    if view.unidentified:
        return
    for ghost in view.ghosts():
        if view.claims.get(ghost):
            continue  # a slot owner: _promote's rules
        orphans = [
            node
            for node in view.ghost_followers(ghost)
            if node.active and node.pod.shard is not None and not view.primaries(node.pod.shard)
        ]
        if orphans:
            yield Promote(node=_most_up_to_date(orphans).pod.name, departed=ghost)


def _forget(view: View) -> Iterable[Forget]:
    """Forget ids whose pods are gone, on every node knowing them at once (the 60 s forget window).

    Only when every pod that may run a server answered: a node that merely
    does not answer looks exactly like a dead one. A departed node that still
    owns slots is forgotten only when no replica follows it (Valkey or
    `_promote` fails over first): then no copy of those slots is left, and
    forgetting lets them be served again, empty (`Forget.lost`).
    """
    if view.unidentified:
        return
    stranded = view.stranded
    for ghost in view.ghosts():
        if any(node.obs.primary_id == ghost for node in view.nodes.values()):
            continue  # a replica still follows it: it takes over first
        on = tuple(node.pod.name for node in view.members.values() if node.obs.knows(ghost) is not None)
        if on:
            yield Forget(node_id=ghost, on=on, lost=stranded.get(ghost, ()))


def _migrate(view: View, leaving: set[str]) -> Iterable[MigrateSlots]:
    """Move slots toward each shard's quota: at most one job per source, none while anything is unsettled.

    Only when every slot is served by exactly one reachable primary and no shard
    has two primaries; a source whose last jobs failed waits out its backoff. A restore moves
    nothing before it is verified: each shard's keys were counted where they were loaded.
    """
    if not view.settled or view.desired.restore is not None or view.desired.backup_running:
        return
    if coverage(node.obs.slots for node in view.members.values() if node.is_primary).contested:
        return
    shards = {node.pod.shard for node in view.members.values() if node.pod.shard is not None}
    if any(len(view.primaries(shard)) > 1 for shard in shards):
        return
    busy: set[str] = set()
    for move in view.transfers():
        source = view.primary(move.source)
        target = view.primary(move.target) or _first_empty_primary(view, move.target, leaving)
        if source is None or target is None or not source.active or not target.active:
            continue
        if source.node_id in busy or view.exporting(source):
            continue
        seen_by_target = target.obs.knows(source.node_id)
        if source.obs.knows(target.node_id) is None or seen_by_target is None:
            continue
        stuck = trouble(source.obs.jobs)
        if stuck is not None and view.now < stuck.retry_at:
            continue
        slots = highest_slots(source.obs.slots, min(move.count, MAX_BATCH_SLOTS))
        if subtract(slots, seen_by_target.slots) or target.obs.cluster_ok is not True:
            continue  # a new node that has not learned who serves the slots yet refuses the job
        synced = [node for node in view.followers(target) if view.in_sync(node, target)]
        if len(synced) < view.desired.replicas_per_shard:
            continue  # a new shard takes data only once its replicas copy it
        busy.add(source.node_id)
        yield MigrateSlots(node=source.pod.name, target_id=target.node_id, slots=slots)


def _removal(view: View, rolling: Rollout) -> DeletePod | None:
    """At most one pod removal, and none while another pod is still going away (one step in flight).

    The rolling shard's pods go only by the rolling update's rules (rollout.py): its surge pod is
    not a surplus.
    """
    if view.context.awaiting or any(pod.deleting for pod in view.pods) or view.migrations_active():
        return None
    for node in view.rejected:
        if node.pod.template_hash != view.desired.template_hash and _holds_nothing(node):
            return DeletePod(
                node.pod.name,
                "runs a Valkey below the version floor from an outdated pod template",
                node.pod.uid,
            )
    if isinstance(rolling.step, DeletePod):
        return rolling.step
    for shard in range(view.desired.shards):
        if shard == rolling.shard:
            continue
        pods = view.shard_pods(shard)
        if len(pods) > view.desired.pods_per_shard:
            victim = _surplus_victim(view, pods)
            if victim is not None:
                return DeletePod(
                    victim.name, f"shard {shard} has more than {view.desired.pods_per_shard} pods", victim.uid
                )
    for pod in view.pods:
        if pod.shard is not None and not view.in_spec(pod) and not pod.deleting and _drained(view, pod):
            return DeletePod(pod.name, f"shard {pod.shard} is beyond spec.shards and holds no slots", pod.uid)
    return None


def _drained(view: View, pod: PodObservation) -> bool:
    """A pod of a leaving shard that may go: its shard serves no slots, and it is followed by nobody.

    Replicas go first (the shard's primary keeps its replicas while it still
    owns slots), the emptied primary last.
    """
    if not view.shard_identified(pod.shard or 0) or any(
        node.obs.slots for node in view.members.values() if node.pod.shard == pod.shard
    ):
        return False
    node = view.nodes.get(pod.name)
    if node is None:
        return pod.never_started or pod.ended
    holds_copy = node.obs.role is NodeRole.REPLICA and bool(view.claims.get(node.obs.primary_id or ""))
    return not node.obs.slots and not view.followers(node) and not view.migrating(node) and not holds_copy


def _holds_nothing(node: Node) -> bool:
    return not node.obs.slots and not node.obs.peers


def _surplus_victim(view: View, pods: Sequence[PodObservation]) -> PodObservation | None:
    """The safest pod to remove, newest first among equals; None when no pod is safe to remove."""
    ranked = [(rank, pod) for pod in pods if (rank := _removal_rank(view, pod)) is not None]
    if not ranked:
        return None
    best = min(rank for rank, _ in ranked)
    return max((pod for rank, pod in ranked if rank == best), key=lambda pod: pod.order)


def _removal_rank(view: View, pod: PodObservation) -> int | None:
    """0 never started, 1 empty and not in the cluster, 2 empty member or lagging replica, 3 in-sync replica.

    None (never removed): a pod that may run a server nobody could ask, a node
    owning slots or followed by replicas, or a replica whose primary is not
    seen serving: it may be the last copy of its shard's data.
    """
    node = view.nodes.get(pod.name)
    if node is None:
        return 0 if pod.never_started else None
    if node.obs.slots or view.followers(node):
        return None
    if node.is_primary:
        return 1 if node.pod.name not in view.members else 2
    primary = view.by_id.get(node.obs.primary_id or "")
    if node.obs.role is not NodeRole.REPLICA or primary is None or not primary.is_primary:
        return None
    if primary.pod.name not in view.members:
        return None
    if not primary.obs.slots:
        return None if view.claims.get(primary.node_id) else 1  # an emptied primary: nothing to copy
    return 3 if view.in_sync(node, primary) else 2


def settling(view: View) -> bool:
    """What the next fraction of a second changes without a watch event, so the next pass should
    come in REQUEUE_FAST, not at the usual cadence: a starting pod's server about to answer (it is
    MET as soon as it does), a new member waiting out Valkey's writable or rejoin delay (slots
    move to an empty primary, and a bootstrap is Active, as soon as it reports cluster_state ok),
    a new replica waiting for its first sync (Valkey's diskless sync delay, then the transfer:
    its shard is in sync as soon as the link is up), a restored node still loading its data (it
    is MET once loaded), a slot migration job under way (the next batch goes as soon as it
    ends). New pods count only within JOIN_WINDOW_S of their creation, so a pod that never gets
    there, or a load that takes minutes, costs no more than the usual cadence."""

    def young(pod: PodObservation) -> bool:
        return pod.created_at is not None and view.now - pod.created_at < JOIN_WINDOW_S

    if view.desired.paused:
        return False
    if any(pod.starting and young(pod) for pod in view.pods):
        return True
    if any(
        young(node.pod)
        and (
            node.obs.cluster_ok is not True
            or (node.obs.role is NodeRole.REPLICA and node.obs.link_up is not True)
        )
        for node in view.members.values()
    ):
        return True
    if any(node.obs.loading and young(node.pod) for node in view.nodes.values()):
        return True
    return any(job.active for node in view.nodes.values() for job in node.obs.jobs)


def _requeue(view: View, status: PlannedStatus, actions: Sequence[Planned], rolling: Rollout) -> float:
    requeue = _requeue_hint(view, status, actions)
    if settling(view) or any(isinstance(action, MigrateSlots) for action in actions):
        requeue = min(requeue, REQUEUE_FAST)  # a job just started is under way from the next pass
    if _spreading(view, actions, rolling):
        requeue = min(requeue, spread.REQUEUE_MOVING)
    if rolling.handover_until is not None:  # the demoted primary may go then: no event says so
        requeue = min(requeue, max(rolling.handover_until - view.now, REQUEUE_FAST))
    retry = view.crash_loops.retry_after
    if retry is None:
        return requeue
    # A shard in a crash loop may try again once its oldest failure leaves the window.
    return max(retry, 1.0) if not actions else min(requeue, max(retry, 1.0))


def _spreading(view: View, actions: Sequence[Planned], rolling: Rollout) -> bool:
    """The spread's move sent this pass or still under way: the next move is due once the replica
    reports itself primary, which no watch event announces (without a roll, a Failover is the
    spread's; a paused cluster plans nothing, so it waits at its usual cadence)."""
    if rolling.outdated or rolling.resize.pods or view.desired.paused:
        return False
    return any(isinstance(action, Failover) for action in actions) or spread.moving(view)


def _requeue_hint(view: View, status: PlannedStatus, actions: Sequence[Planned]) -> float:
    if actions and all(isinstance(action, ReloadTls) and action.confirm is None for action in actions):
        return certificates.RELOAD_RETRY_S  # files the kubelet has not updated yet: ask again soon
    if actions:
        return REQUEUE_ACTING
    if view.context.awaiting:
        return REQUEUE_ACTING  # the cache shows the operator's own pod writes within a moment
    if any(finding.reason is Reason.CONFIG_REJECTED for finding in status.findings):
        return REQUEUE_REFUSED  # what is left waits for a spec change, which triggers a pass itself
    if not view.context.may_roll:
        return REQUEUE_QUEUED
    if status.state is ClusterState.ACTIVE and not view.desired.paused and spread.fragile(view):
        return spread.FRAGILE_PROBE_S
    if view.desired.paused or status.state is ClusterState.ACTIVE:
        return REQUEUE_STEADY
    if status.state is ClusterState.FAILED:
        return REQUEUE_FAILED
    if view.migrations_active() or any(f.reason is Reason.REBALANCING_SLOTS for f in status.findings):
        return REQUEUE_ACTING  # a job takes well under a second: look again soon
    waiting = [f for f in status.findings if not f.problem]
    if waiting and all(f.reason is Reason.RELOADING_TLS for f in waiting):
        return certificates.until_settled(view, REQUEUE_STEADY)
    return REQUEUE_WAITING
