"""The status a pass writes (pure): planned from the report, or blocked with the reason.

Both are `ValkeyClusterStatus` models built from the recorded one; the reconciler renders the
model to a dict once, where it writes it. Conditions keep their lastTransitionTime while their
status stays; a change is stamped with the pass's `now` (RFC 3339), never the real clock, so the
same facts give the same status.
"""

from __future__ import annotations

import attrs

from controllers.cluster.decision.report import PlannedStatus
from controllers.cluster.decision.stalled import blocked_advice
from controllers.shared import layout, names
from valkey_operator.api.cluster import (
    DEGRADED,
    PROGRESSING,
    READY,
    STALLED,
    ClientAuth,
    ClusterState,
    RolloutStatus,
    TlsStatus,
    ValkeyClusterStatus,
)
from valkey_operator.api.meta import ConditionStatus, find_condition, set_condition


def endpoint(cluster: str, namespace: str, domain: str) -> str:
    """The client Service's name: it resolves to serving members only (membership.py)."""
    return f"{names.client_service_name(cluster)}.{namespace}.svc.{domain}:{layout.VALKEY_PORT}"


def planned_status(
    current: ValkeyClusterStatus,
    generation: int | None,
    status: PlannedStatus,
    endpoint_text: str,
    now: str,
) -> ValkeyClusterStatus:
    """The status to store for a planned pass (pure); conditions keep their transition times, a
    rolling update its start time (`now`, RFC 3339: a transition or a roll beginning is stamped
    with the pass's time, never the real clock). restore, lastBackup and switchover are the
    caller's (decide.py): absent here."""
    conditions = current.conditions
    for condition in status.conditions:
        conditions = set_condition(
            conditions, condition.type, condition.status, condition.reason, condition.message, generation, now
        )
    rollout = None
    if status.rollout is not None:
        progress = status.rollout
        rollout = RolloutStatus(
            shards_updated=progress.shards_updated,
            shards=progress.shards,
            shard=progress.shard,
            step=progress.step,
            started_at=(current.rollout.started_at if current.rollout is not None else None) or now,
        )
    tls = None
    if status.tls is not None:
        seen = status.tls
        tls = TlsStatus(
            secret_hash=seen.secret_hash,
            changed_at=seen.changed_at,
            client_auth=ClientAuth.REQUIRED if seen.client_certificates else ClientAuth.OPTIONAL,
            not_after=seen.not_after,
        )
    return ValkeyClusterStatus(
        state=status.state,
        message=status.message,
        endpoint=endpoint_text,
        observed_generation=generation,
        shards=status.shards,
        ready_shards=status.ready_shards,
        ready_nodes=status.ready_nodes,
        ready=f"{status.ready_nodes}/{status.desired_nodes}",
        current_image=status.current_image or None,
        config_hash=status.config_hash or None,
        nodes=status.nodes,
        rollout=rollout,
        max_primaries_per_node=status.max_primaries_per_node,
        tls=tls,
        external_endpoints=status.external_endpoints,
        conditions=conditions,
    )


def blocked_status(
    current: ValkeyClusterStatus,
    generation: int | None,
    reason: str,
    message: str,
    endpoint_text: str,
    now: str,
) -> ValkeyClusterStatus:
    """The cluster cannot progress (nothing is created or changed): say why (pure).

    Nothing is observed, so what the last pass observed stays as recorded (shards, nodes, the
    image and config hash, a rollout, TLS, the primary spread, a switchover), and Ready keeps
    what it saw: a cluster that served keeps serving on its pods (Ready stays True, kstatus
    Current); one that never served is not Ready. Not Stalled when what blocks it (a
    ValkeyConfig, image, role, Secret or backup) may appear or complete at any time; Stalled
    (kstatus Failed, serving or not) when only a human can lift it (stalled.BLOCKED: an operator
    flag, a Failed backup), the message saying what to do. restore and lastBackup are the
    caller's (decide.py): absent here."""
    conditions = current.conditions
    ready = find_condition(conditions, READY)
    if ready is not None and ready.status is ConditionStatus.TRUE:
        conditions = set_condition(conditions, READY, True, ready.reason, ready.message, generation, now)
    else:
        conditions = set_condition(conditions, READY, False, reason, message, generation, now)
    conditions = set_condition(conditions, PROGRESSING, False, reason, message, generation, now)
    conditions = set_condition(conditions, DEGRADED, True, reason, message, generation, now)
    advice = blocked_advice(reason)
    if advice is None:
        conditions = set_condition(conditions, STALLED, False, "AsExpected", "", generation, now)
    else:
        conditions = set_condition(conditions, STALLED, True, reason, f"{message}; {advice}", generation, now)
    return attrs.evolve(
        current,
        state=current.state or ClusterState.CREATING,
        message=f"{reason}: {message}",
        endpoint=endpoint_text,
        observed_generation=generation,
        conditions=conditions,
        restore=None,
        last_backup=None,
    )
