"""Rolling update (pure): replacing pods of an outdated template, one shard at a time (SPEC 1.4, 5).

A pod whose template-hash label differs from the desired hash is outdated.
Progress is read from the world only: the labels, Valkey's roles and offsets,
and one annotation the operator writes on the replica it asks to take over.
So an operator restarted at any step resumes where the cluster is.

The rolling shard is the lowest in-spec shard with an outdated pod; the others
wait. In it, with R = replicasPerShard:
1. surge: while the shard has an outdated pod and exactly 1 + R pods, one
   more pod (of the new template) is created; it joins and replicates the
   shard's primary like any new member, and must pass the version check;
2. replicas first: an outdated replica goes once the shard has its surge and
   R other replicas in sync without it;
3. then the primary: once no outdated replica is left and R + 1 replicas of
   the new template are in sync, and every member knows the best of them, it
   gets a coordinated `CLUSTER FAILOVER` (default mode: the primary pauses
   writes until the replica has all of them). The replica's pod is annotated
   first with the time and attempt number; a failover that has not happened
   FAILOVER_TIMEOUT_S later is retried with backoff and reported, never
   escalated to FORCE or TAKEOVER;
4. the old primary, now a replica, goes once every other member (replicas
   too: clients bootstrap from any of them) sees the new one serving the
   shard's slots, and DEMOTED_GRACE_S after the failover was asked for: a
   client that read the slot map just before the failover dials the old
   primary a moment later, and a replica answers it with a redirect where a
   stopping server resets the connection.
Every disruptive step waits until the cluster is settled: every slot served by
one reachable primary, no migration, no pod going away, every pod answering,
no departed id left to forget, every member reporting cluster_state ok.

A pod that differs from the template only in its container's resources is not
replaced but resized in place (resize.py), paced as the roll is and only once
the roll has nothing left to replace (`plan_resize`): one pod at a time, shard
by shard, replicas before their primary, each resize sent only when the
cluster is settled and no other resize is still being applied. A pod whose
memory shrinks is resized only once its node runs the lower maxmemory.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from controllers.cluster.decision import resize
from controllers.cluster.decision.actions import DeletePod, Failover, PatchPodMetadata, ResizePod
from controllers.cluster.decision.resize import Stage
from controllers.cluster.decision.view import Node, View, outdated_pods, rolls
from controllers.shared.names import SHAPE_HASH_LABEL, TEMPLATE_HASH_LABEL
from controllers.shared.observation import PodObservation
from valkey_operator.api.cluster import NodeRole
from valkey_operator.api.resources import GROUP

FAILOVER_ANNOTATION = f"{GROUP}/failover-requested"
"""On the replica asked to take over: '<unix seconds, to 0.1 s>,<attempt>' of the latest request, and ',done'
once a pass has seen that replica primary (`mark_fulfilled`)."""
FULFILLED = "done"
FAILOVER_TIMEOUT_S = 15.0
"""How long a coordinated failover may take before it counts as failed (Valkey gives up after 5 s)."""
FAILOVER_BACKOFF_S = 5.0
DEMOTED_GRACE_S = 2.0
FAILOVER_BACKOFF_MAX_S = 120.0


@attrs.frozen
class FailoverRequest:
    pod: str
    at: float
    attempt: int
    done: bool = False
    """A pass saw the replica primary after the request: it happened. Without the mark, a pod moved
    back to replica within the retry window (a failover by hand, by Valkey, or a spread move back)
    looked like a request still in flight and held every spread move until the retry time."""

    @classmethod
    def of(cls, pod: PodObservation) -> FailoverRequest | None:
        text = pod.annotations.get(FAILOVER_ANNOTATION, "")
        at, _, rest = text.partition(",")
        attempt, _, mark = rest.partition(",")
        try:
            return cls(pod.name, float(at), int(attempt or "1"), done=mark == FULFILLED)
        except ValueError:
            return None

    def pending(self, now: float) -> bool:
        """Not seen done and not yet to be retried: a new request to this replica waits."""
        return not self.done and now < self.retry_at()

    def stale(self, now: float) -> bool:
        """Long past any retry: left on a pod that became a replica again later (a spread move back)."""
        return now - self.at > FAILOVER_TIMEOUT_S + FAILOVER_BACKOFF_MAX_S + 30.0

    def retry_at(self) -> float:
        backoff = min(FAILOVER_BACKOFF_S * 2.0 ** (self.attempt - 1), FAILOVER_BACKOFF_MAX_S)
        return self.at + FAILOVER_TIMEOUT_S + backoff


@attrs.frozen(kw_only=True)
class Resizing:
    """Where the in-place resizes stand this pass (all empty when no pod has one to take)."""

    pods: tuple[str, ...] = ()
    """Live pods whose resources change in place (resize.stage is not None)."""
    step: ResizePod | None = None
    """The resize to send now, if any."""
    labels: tuple[PatchPodMetadata, ...] = ()
    """The template-hash label of each pod whose resize the kubelet reported and whose node runs
    the maxmemory that follows it (the pod is then current), and the shape label of each pod of
    the current template made without one (`_adopt`)."""
    waiting: str = ""
    """What the next resize waits for (for the status), when none is sent."""


@attrs.frozen(kw_only=True)
class Rollout:
    """Where the rolling update stands this pass (all empty when every pod runs the template)."""

    outdated: tuple[str, ...]
    """Live pods of in-spec shards whose template is outdated."""
    shard: int | None
    """The shard rolling now: the lowest in-spec shard with an outdated pod."""
    shards_current: int
    """In-spec shards whose every live pod runs the current template."""
    surge: bool = False
    """The rolling shard should have one pod more than 1 + replicasPerShard."""
    step: DeletePod | Failover | None = None
    """The disruptive step to take now, if any."""
    failover: FailoverRequest | None = None
    """The latest failover request in the rolling shard that has not happened yet."""
    handover_until: float | None = None
    """Unix seconds until which the rolling shard's demoted primary keeps running (`demoted_grace`)."""
    failover_failed: bool = False
    """That request timed out (it is retried after a backoff)."""
    queued: bool = False
    """Outdated pods wait for a rollout slot (maxConcurrentRollouts)."""
    resize: Resizing = Resizing()
    """The pods resized in place instead (`plan_resize`)."""


def outdated(view: View, pod: PodObservation) -> bool:
    """The roll replaces pod (an outdated pod it cannot resize in place)."""
    return rolls(pod, view.desired, view.now)


def plan_rollout(view: View) -> Rollout:
    """Where the roll stands (computed once per pass: plan() hands it to the report)."""
    stale = view.outdated
    shards = sorted({pod.shard for pod in stale if pod.shard is not None})
    behind = {pod.shard for pod in outdated_pods(view.pods, view.desired)}
    current = sum(1 for shard in range(view.desired.shards) if shard not in behind)
    resizing = plan_resize(view, rolling=bool(shards))
    if not shards:
        queued = bool(resizing.pods) and not view.context.may_roll
        return Rollout(outdated=(), shard=None, shards_current=current, resize=resizing, queued=queued)
    if not view.context.may_roll:
        return Rollout(
            outdated=tuple(pod.name for pod in stale),
            shard=None,
            shards_current=current,
            queued=True,
            resize=resizing,
        )
    shard = shards[0]
    pods = view.shard_pods(shard)
    request = _pending_failover(view, shard)
    failed = request is not None and view.now - request.at > FAILOVER_TIMEOUT_S
    return Rollout(
        outdated=tuple(pod.name for pod in stale),
        shard=shard,
        shards_current=current,
        surge=len(pods) == view.desired.pods_per_shard and not view.rejected,
        step=_step(view, shard, request),
        failover=request,
        handover_until=_handover_until(view, shard),
        failover_failed=failed,
        resize=resizing,
    )


def plan_resize(view: View, rolling: bool) -> Resizing:
    """The in-place resizes of this pass (resize.py): every reported one's label, and at most one
    resize to send, only while the roll replaces nothing (`rolling`) and may take steps, no other
    resize is being applied, and the cluster is `settled_for_a_step`; the lowest shard first,
    replicas before their primary. A shrinking pod's resize also waits until its node runs the
    lower maxmemory (resize.node_maxmemory, applied by upkeep.set_config the same pass)."""
    desired = view.desired
    adopted = tuple(_adopt(view))
    found = {pod.name: resize.stage(pod, desired, view.now) for pod in view.pods}
    stages = {name: stage for name, stage in found.items() if stage is not None}
    if not stages:
        return Resizing(labels=adopted)
    pods = [pod for pod in view.pods if pod.name in stages]
    label = ((TEMPLATE_HASH_LABEL, desired.template_hash),)
    labels = adopted + tuple(
        PatchPodMetadata(pod.name, pod.uid, (), labels=label)
        for pod in pods
        if stages[pod.name] is Stage.REPORTED and _maxmemory_follows(view, pod)
    )
    names = tuple(pod.name for pod in pods)
    applying = [pod.name for pod in pods if stages[pod.name] is Stage.WAITING]
    asking = sorted(
        (pod for pod in pods if stages[pod.name] is Stage.ASK),
        key=lambda pod: (pod.shard, _is_primary(view, pod), pod.order),
    )
    if applying:
        waiting = f"the kubelet to apply the resize of {applying[0]}"
        return Resizing(pods=names, labels=labels, waiting=waiting)
    if not asking:
        return Resizing(pods=names, labels=labels, waiting="the nodes' maxmemory to follow their new limits")
    if rolling or not view.context.may_roll:
        return Resizing(pods=names, labels=labels, waiting="the rolling update")
    if not settled_for_a_step(view):
        return Resizing(pods=names, labels=labels, waiting="the cluster to settle")
    first, resources = asking[0], desired.resources
    if resources is None:  # resize.stage is None without them: never here
        return Resizing(pods=names, labels=labels)
    if resize.shrinks_memory(first, desired) and not _maxmemory_follows(view, first):
        return Resizing(pods=names, labels=labels, waiting=f"{first.name} to run the lower maxmemory first")
    return Resizing(pods=names, labels=labels, step=ResizePod(first.name, first.uid, resources))


def _adopt(view: View) -> Iterable[PatchPodMetadata]:
    """The shape label onto each live pod of the current template that lacks it (made by an
    operator before the label existed): the same inputs make the same shape, so a later resources
    change is resized in place instead of rolling it."""
    shape = view.desired.shape_hash
    for pod in view.pods:
        if shape and pod.live and pod.template_hash == view.desired.template_hash and pod.shape_hash != shape:
            yield PatchPodMetadata(pod.name, pod.uid, (), labels=((SHAPE_HASH_LABEL, shape),))


def _is_primary(view: View, pod: PodObservation) -> bool:
    """A primary, or a pod whose role is unknown (it goes last)."""
    node = view.nodes.get(pod.name)
    return node is None or node.is_primary


def _maxmemory_follows(view: View, pod: PodObservation) -> bool:
    """The pod's node runs the maxmemory that follows its pod's memory limit (CONFIG GET confirmed),
    or the config chain sets maxmemory (it follows no limit)."""
    if not view.desired.maxmemory_derived:
        return True
    changes = view.runtime_changes.get(pod.name)
    return changes is not None and "maxmemory" not in changes


def _pending_failover(view: View, shard: int) -> FailoverRequest | None:
    """The newest failover request on a pod of the shard whose node is still a replica."""
    requests: list[FailoverRequest] = []
    for pod in view.shard_pods(shard):
        request = FailoverRequest.of(pod)
        node = view.nodes.get(pod.name)
        if request is None or request.done or request.stale(view.now) or node is None:
            continue
        if node.obs.role is NodeRole.REPLICA:
            requests.append(request)
    return max(requests, key=lambda request: request.at, default=None)


def settled_for_a_step(view: View) -> bool:
    """Nothing else in flight and nothing unknown: the only time a pod may go or a primary move."""
    return (
        not view.context.awaiting
        and not view.rejected
        and not view.unreachable
        and not view.unidentified
        and not any(pod.deleting for pod in view.pods)
        and not view.migrations_active()
        and view.settled
        and not view.ghosts()
        and all(node.obs.cluster_ok is True for node in view.members.values())
    )


def _step(view: View, shard: int, request: FailoverRequest | None) -> DeletePod | Failover | None:
    primary = view.primary(shard)
    if primary is None or not settled_for_a_step(view):
        return None
    pods = view.shard_pods(shard)
    surge_present = len(pods) > view.desired.pods_per_shard
    # An outdated pod that runs no server yet holds nothing: it goes first.
    for pod in pods:
        if outdated(view, pod) and pod.never_started and surge_present:
            return DeletePod(pod.name, f"shard {shard} rolls: an outdated pod that never started", pod.uid)
    replicas = view.followers(primary)
    stale_replicas = [node for node in replicas if outdated(view, node.pod)]
    if stale_replicas:
        if not surge_present:
            return None
        victim = min(stale_replicas, key=lambda node: (view.in_sync(node, primary), node.pod.order))
        others = [node for node in replicas if node is not victim and view.in_sync(node, primary)]
        handed_over = _handover_seen(view, primary) and _handover_until(view, shard) is None
        if len(others) >= view.desired.replicas_per_shard and handed_over:
            return DeletePod(
                victim.pod.name, f"shard {shard} rolls: replica of an outdated template", victim.pod.uid
            )
        return None
    if outdated(view, primary.pod):
        fresh = [node for node in replicas if view.in_sync(node, primary)]
        if len(fresh) < view.desired.replicas_per_shard + 1:
            return None
        if request is not None and view.now < request.retry_at():
            return None  # a request in flight, or its backoff not over yet
        target = min(fresh, key=lambda node: (-node.obs.repl_offset, node.pod.order))
        return Failover(target.pod.name) if may_take_over(view, target) else None
    # The primary is current: what is left outdated is a former primary (now a replica) or a stray.
    for pod in pods:
        node = view.nodes.get(pod.name)
        stray = node is not None and node not in replicas and not node.obs.slots and not view.followers(node)
        if outdated(view, pod) and stray and surge_present:
            return DeletePod(pod.name, f"shard {shard} rolls: an outdated pod outside the shard", pod.uid)
    return None


def knows(member: Node, target: Node) -> bool:
    """member has target in its view, and does not suspect it."""
    known = member.obs.knows(target.node_id)
    return known is not None and not known.failed and not known.suspected


def may_take_over(view: View, target: Node) -> bool:
    """Every other member knows target, and target has a live link to each of them.

    A takeover is announced by the new primary's broadcast over its own links. A member it has no
    link to yet hears of it second-hand, from the old primary ("now a replica of target"), while
    it still holds target for that primary's replica: a cycle in its view, which Valkey 9.1.2
    follows for ever when that member is a replica (the server spins in updateShardId and never
    answers again). Fresh replicas often lack a link to each other for a moment after their
    join; waiting for the links costs a pass.
    """
    for member in view.members.values():
        if member is target:
            continue
        link = target.obs.knows(member.node_id)
        if not knows(member, target) or link is None or not link.connected:
            return False
    return True


def _handover_seen(view: View, primary: Node) -> bool:
    """Every other member sees the shard's primary serving the slots it serves.

    Replicas too: a client bootstraps from any node the endpoint hands out, and one whose view
    still names the old primary sends the client there, to a server about to stop (a new primary's
    announcement can miss a node it has no bus link to yet; gossip brings it a moment later).
    """
    for member in view.members.values():
        if member is primary:
            continue
        known = member.obs.knows(primary.node_id)
        if known is None or known.slots != primary.obs.slots:
            return False
    return True


def _handover_until(view: View, shard: int) -> float | None:
    """While the shard's primary took over on a request less than DEMOTED_GRACE_S ago: when the
    demoted primary may go (None once it may)."""
    primary = view.primary(shard)
    request = FailoverRequest.of(primary.pod) if primary is not None else None
    if request is None or view.now >= request.at + DEMOTED_GRACE_S:
        return None
    return request.at + DEMOTED_GRACE_S


def failover_request(view: View, target: str, previous: FailoverRequest | None) -> PatchPodMetadata:
    """The annotation recorded on the replica before it is asked to take over."""
    pod = next(pod for pod in view.pods if pod.name == target)
    attempt = previous.attempt + 1 if previous is not None and not previous.done else 1
    return PatchPodMetadata(pod.name, pod.uid, ((FAILOVER_ANNOTATION, f"{view.now:.1f},{attempt}"),))


def mark_fulfilled(view: View) -> Iterable[PatchPodMetadata]:
    """The request annotation of each replica that has since been seen primary, marked done: it is
    then never taken for a request in flight, whatever role the pod has later."""
    for node in view.members.values():
        request = FailoverRequest.of(node.pod)
        if request is None or request.done or not node.is_primary or not node.pod.live:
            continue
        value = f"{request.at:.1f},{request.attempt},{FULFILLED}"
        yield PatchPodMetadata(node.pod.name, node.pod.uid, ((FAILOVER_ANNOTATION, value),))
