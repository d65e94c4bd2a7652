"""Switchover on request (pure): the `valkey.gomomento.com/switchover` annotation (SPEC 1.4, issue 26).

The value is `<shard>[/<pod>][@<token>]`: hand shard's primary over to pod (a
replica of it), or to the best in-sync replica when no pod is named; the token
only makes a request distinct. Each distinct value is handled once:
status.switchover records it, and a value equal to status.switchover.request
is never acted on again (so an operator restart, a re-applied manifest or a
retried plugin call cannot hand a primary over twice).

A new request is Refused, with nothing done, when the value does not parse,
the cluster is paused, a rolling update, a restore, a slot migration or a
scale (slots moving between shards) is under way, the shard does not exist or
has no single serving primary, the named pod is not a replica of that primary,
or the replica (every replica, when none is named) is not in sync. Refused,
not queued: the request names a cluster state that may not hold once the
other work ends, and the caller can ask again (a new token) when it is Active.

An accepted request is recorded Running first, and acted on from the next
pass (so a lost status write can never repeat a failover): it takes the rolling update's own
primary hand-over (rollout.failover_request then a coordinated
`CLUSTER FAILOVER`, default mode, on the in-sync replica; never FORCE or
TAKEOVER), once the cluster is settled for a step and nothing else disruptive
is planned that pass; a failover that did not happen is retried with the
rollout's backoff. Succeeded once the replica serves the shard's slots, Failed
when it has not SWITCHOVER_TIMEOUT_S after it was accepted or the shard's
primary became another pod meanwhile. While one is pending the primary
spread moves nothing, and afterwards it leaves the requested primary where it
is (spread.py): the request was explicit.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from controllers.cluster.decision.actions import Action, Event, Failover, Planned
from controllers.cluster.decision.rollout import (
    FAILOVER_TIMEOUT_S,
    FailoverRequest,
    Rollout,
    failover_request,
    may_take_over,
    settled_for_a_step,
)
from controllers.cluster.decision.view import MAX_IN_SYNC_LAG_BYTES, Node, View
from valkey_operator.api.cluster import SwitchoverPhase, SwitchoverStatus
from valkey_operator.api.switchover import parse, shown
from valkey_operator.core.clock import parse_rfc3339
from valkey_operator.core.events import NORMAL, WARNING

SWITCHOVER_TIMEOUT_S = 60.0
"""How long after acceptance the replica may take to serve the shard (covers the rollout's retries)."""
STARTED = "SwitchoverStarted"
SUCCEEDED = "SwitchoverSucceeded"
REFUSED = "SwitchoverRefused"
FAILED = "SwitchoverFailed"


@attrs.frozen(kw_only=True)
class Outcome:
    status: SwitchoverStatus | None = None
    """status.switchover to store (None: there is none)."""
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()

    @property
    def running(self) -> bool:
        return _phase(self.status) is SwitchoverPhase.RUNNING


def _phase(status: SwitchoverStatus | None) -> SwitchoverPhase | None:
    return status.phase if status is not None else None


def requested(annotations: Mapping[str, str], recorded: SwitchoverStatus | None, key: str) -> str | None:
    """The annotation's value when it is a request not handled yet."""
    value = annotations.get(key)
    if value is None or (recorded is not None and recorded.request == value):
        return None
    return value


def holds_spread(value: str | None, recorded: SwitchoverStatus | None) -> bool:
    """A switchover is new or Running: the primary spread moves nothing meanwhile."""
    return value is not None or _phase(recorded) is SwitchoverPhase.RUNNING


def pinned(recorded: SwitchoverStatus | None) -> str | None:
    """The pod a Succeeded switchover made primary: the spread leaves it primary."""
    if recorded is None or recorded.phase is not SwitchoverPhase.SUCCEEDED:
        return None
    return recorded.to


@attrs.frozen(kw_only=True)
class Situation:
    """What else this pass knows that a switchover depends on."""

    paused: bool = False
    restoring: bool = False
    rolling: Rollout | None = None
    planned: tuple[Planned, ...] = ()
    now: float
    now_text: str


def decide_switchover(
    view: View, value: str | None, recorded: SwitchoverStatus | None, at: Situation
) -> Outcome:
    """status.switchover, the hand-over's actions and Events this pass (value: a new request, or None)."""
    if value is not None:
        return _new(view, value, at)
    if recorded is not None and recorded.phase is SwitchoverPhase.RUNNING:
        return _running(view, recorded, at)
    return Outcome(status=recorded)


def _new(view: View, value: str, at: Situation) -> Outcome:
    parsed = parse(value)
    if isinstance(parsed, str):
        return _refused(value, parsed, at)
    why = _busy(view, at)
    if why is not None:
        return _refused(value, f"{why}; ask again once the cluster is Active", at)
    shard = parsed.shard
    if shard >= view.desired.shards:
        last = view.desired.shards - 1
        return _refused(value, f"shard {shard} does not exist (shards 0 to {last})", at)
    primary = view.primary(shard)
    if primary is None:
        return _refused(value, f"shard {shard} has no single serving primary", at)
    replicas = sorted(view.followers(primary), key=lambda node: node.pod.order)
    synced = [node for node in replicas if view.in_sync(node, primary)]
    if parsed.pod is not None:
        if parsed.pod == primary.pod.name:
            return _refused(value, f"pod {parsed.pod} is already the primary of shard {shard}", at)
        target = next((node for node in replicas if node.pod.name == parsed.pod), None)
        if target is None:
            names = ", ".join(node.pod.name for node in replicas) or "none"
            return _refused(
                value, f"pod {parsed.pod} is not a replica of shard {shard} (its replicas: {names})", at
            )
        if target not in synced:
            return _refused(
                value, f"pod {parsed.pod} is not in sync with {primary.pod.name} ({_sync_rule()})", at
            )
    elif not replicas:
        return _refused(value, f"shard {shard} has no replica to hand its primary over to", at)
    elif not synced:
        return _refused(
            value, f"no replica of shard {shard} is in sync with {primary.pod.name} ({_sync_rule()})", at
        )
    else:
        target = _best(view, synced)
    message = f"handing shard {shard} over from {primary.pod.name} to {target.pod.name}"
    status = SwitchoverStatus(
        request=value,
        phase=SwitchoverPhase.RUNNING,
        from_=primary.pod.name,
        to=target.pod.name,
        message=message,
        started_at=at.now_text,
    )
    # Recorded before anything is done: the pass that acts reads a Running status, so a status write
    # that is lost can only repeat the checks, never a failover already sent.
    return Outcome(status=status, events=(Event(NORMAL, STARTED, f"shard {shard}: {message}"),))


def _running(view: View, status: SwitchoverStatus, at: Situation) -> Outcome:
    parsed = parse(status.request or "")
    source, target = status.from_ or "", status.to or ""
    if isinstance(parsed, str):  # a Running status is written only for a value that parsed
        return _finished(status, SwitchoverPhase.FAILED, parsed, at, FAILED)
    shard = parsed.shard
    node = view.nodes.get(target)
    if node is not None and node.is_primary and node.obs.slots and node.pod.shard == shard:
        message = f"{target} is the primary of shard {shard} (was {source})"
        return _finished(status, SwitchoverPhase.SUCCEEDED, message, at, SUCCEEDED, NORMAL)
    primary = view.primary(shard)
    if primary is not None and primary.pod.name != source:
        message = f"the primary of shard {shard} became {primary.pod.name} meanwhile, not {target}"
        return _finished(status, SwitchoverPhase.FAILED, message, at, FAILED)
    started = _seconds(status.started_at or "", at.now)
    waiting, actions = _step(view, primary, node, at)
    if at.now - started > SWITCHOVER_TIMEOUT_S and not _in_flight(node, at.now):
        message = (
            f"{target} did not take over shard {shard} within {SWITCHOVER_TIMEOUT_S:.0f} s ({waiting}); "
            f"{source} still serves it"
        )
        return _finished(status, SwitchoverPhase.FAILED, message, at, FAILED)
    return Outcome(status=status, actions=actions)


def _step(
    view: View, primary: Node | None, target: Node | None, at: Situation
) -> tuple[str, tuple[Action, ...]]:
    """(what the hand-over waits for, the actions to take now: none, or the annotation and FAILOVER)."""
    if primary is None:
        return "the shard has no single serving primary", ()
    if target is None or target.obs.primary_id != primary.node_id:
        return "the replica is not a member replicating the primary", ()
    if at.paused:
        return "the cluster is paused", ()
    previous = FailoverRequest.of(target.pod)
    if previous is not None and not previous.stale(view.now) and previous.pending(view.now):
        return "the replica was asked to take over and has not yet", ()
    if not settled_for_a_step(view):
        return "the cluster is not settled", ()
    if not view.in_sync(target, primary):
        return f"the replica is not in sync ({_sync_rule()})", ()
    if not may_take_over(view, target):
        return "not every member knows the replica, or it has no link to one yet", ()
    if any(action.disruptive or isinstance(action, Failover) for action in at.planned):
        return "another step of the cluster is under way", ()
    return "", (failover_request(view, target.pod.name, previous), Failover(target.pod.name))


def _in_flight(target: Node | None, now: float) -> bool:
    """The replica was asked to take over less than FAILOVER_TIMEOUT_S ago: it still may."""
    request = FailoverRequest.of(target.pod) if target is not None else None
    return request is not None and not request.done and now - request.at <= FAILOVER_TIMEOUT_S


def _busy(view: View, at: Situation) -> str | None:
    """Why the cluster takes no switchover now (work under way that a hand-over must not cross)."""
    if at.paused:
        return "the cluster is paused (valkey.gomomento.com/paused)"
    if at.restoring or view.desired.restore is not None:
        return "a restore is under way"
    if at.rolling is not None and at.rolling.outdated:
        return f"a rolling update is under way ({len(at.rolling.outdated)} pod(s) to replace)"
    if view.migrations_active():
        return "a slot migration is under way"
    leaving = any(not view.in_spec(pod) for pod in view.pods if pod.live)
    primaries = sum(1 for node in view.members.values() if node.is_primary and node.obs.slots)
    if leaving or view.transfers() or primaries != view.desired.shards:
        return "a scale is under way (slots move between shards)"
    return None


def _best(view: View, synced: list[Node]) -> Node:
    """The in-sync replica on the least busy Kubernetes node (the spread then keeps it), the highest
    offset, the oldest pod."""
    hosts: dict[str, int] = {}
    for node in view.members.values():
        if node.is_primary and node.obs.slots and node.pod.node_name:
            hosts[node.pod.node_name] = hosts.get(node.pod.node_name, 0) + 1
    return min(
        synced,
        key=lambda node: (hosts.get(node.pod.node_name or "", 0), -node.obs.repl_offset, node.pod.order),
    )


def _refused(value: str, message: str, at: Situation) -> Outcome:
    status = SwitchoverStatus(
        request=value, phase=SwitchoverPhase.REFUSED, message=message, finished_at=at.now_text
    )
    return Outcome(
        status=status, events=(Event(WARNING, REFUSED, f"switchover {shown(value)} refused: {message}"),)
    )


def _finished(
    status: SwitchoverStatus,
    phase: SwitchoverPhase,
    message: str,
    at: Situation,
    reason: str,
    kind: str = WARNING,
) -> Outcome:
    done = attrs.evolve(status, phase=phase, message=message, finished_at=at.now_text)
    source, target = status.from_, status.to
    return Outcome(status=done, events=(Event(kind, reason, f"from {source} to {target}: {message}"),))


def _sync_rule() -> str:
    return f"replication link up and at most {MAX_IN_SYNC_LAG_BYTES >> 20} MiB behind"


def _seconds(text: str, default: float) -> float:
    found = parse_rfc3339(text)
    return default if found is None else found
