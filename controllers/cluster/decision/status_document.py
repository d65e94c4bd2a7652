"""The status document a pass writes (pure): planned from the report, or blocked with the reason.

Conditions keep their lastTransitionTime while their status stays; a change is stamped with the
pass's `now` (RFC 3339), never the real clock, so the same facts give the same document.
"""

from __future__ import annotations

from controllers.cluster.decision.report import PlannedStatus
from controllers.cluster.decision.stalled import blocked_advice
from controllers.cluster.render import layout, names
from valkey_operator.api.cluster import DEGRADED, PROGRESSING, READY, STALLED, ClusterState
from valkey_operator.core.conditions import find_condition, set_condition
from valkey_operator.core.rest import Obj


def endpoint(cluster: str, namespace: str, domain: str) -> str:
    """The client Service's name: it resolves to serving members only (membership.py)."""
    return f"{names.client_service_name(cluster)}.{namespace}.svc.{domain}:{layout.VALKEY_PORT}"


def planned_status(
    current: Obj, generation: int | None, status: PlannedStatus, endpoint_text: str, now: str
) -> Obj:
    """The status to store for a planned pass (pure); conditions keep their transition times, a
    rolling update its start time (`now`, RFC 3339: a transition or a roll beginning is stamped
    with the pass's time, never the real clock)."""
    conditions = current.get("conditions")
    for condition in status.conditions:
        conditions = set_condition(
            conditions, condition.type, condition.status, condition.reason, condition.message, generation, now
        )
    result: Obj = {
        "state": status.state.value,
        "message": status.message,
        "endpoint": endpoint_text,
        "observedGeneration": generation,
        "shards": status.shards,
        "readyShards": status.ready_shards,
        "readyNodes": status.ready_nodes,
        "ready": f"{status.ready_nodes}/{status.desired_nodes}",
        "nodes": [node.to_dict() for node in status.nodes],
        "conditions": conditions,
    }
    if status.current_image:
        result["currentImage"] = status.current_image
    if status.config_hash:
        result["configHash"] = status.config_hash
    if status.rollout is not None:
        progress = status.rollout
        result["rollout"] = {
            "shardsUpdated": progress.shards_updated,
            "shards": progress.shards,
            "shard": progress.shard,
            "step": progress.step,
            "startedAt": (current.get("rollout") or {}).get("startedAt") or now,
        }
    if status.max_primaries_per_node is not None:
        result["maxPrimariesPerNode"] = status.max_primaries_per_node
    if status.tls is not None:
        tls = {"secretHash": status.tls.secret_hash, "changedAt": status.tls.changed_at}
        if status.tls.not_after is not None:
            tls["notAfter"] = status.tls.not_after
        result["tls"] = tls
    return result


def blocked_status(
    current: Obj, generation: int | None, reason: str, message: str, endpoint_text: str, now: str
) -> Obj:
    """The cluster cannot progress (nothing is created or changed): say why (pure).

    Nothing is observed, so Ready keeps what the last pass saw: a cluster that served keeps
    serving on its pods (Ready stays True, kstatus Current); one that never served is not Ready.
    Not Stalled when what blocks it (a ValkeyConfig, image, role, Secret or backup) may appear
    or complete at any time; Stalled (kstatus Failed, serving or not) when only a human can lift
    it (stalled.BLOCKED: an operator flag, a Failed backup), the message saying what to do."""
    recorded = current.get("state") or ClusterState.CREATING.value
    conditions = current.get("conditions")
    ready = find_condition(conditions, READY)
    if ready is not None and ready.get("status") == "True":
        conditions = set_condition(
            conditions, READY, True, ready.get("reason", ""), ready.get("message", ""), generation, now
        )
    else:
        conditions = set_condition(conditions, READY, False, reason, message, generation, now)
    conditions = set_condition(conditions, PROGRESSING, False, reason, message, generation, now)
    conditions = set_condition(conditions, DEGRADED, True, reason, message, generation, now)
    advice = blocked_advice(reason)
    if advice is None:
        conditions = set_condition(conditions, STALLED, False, "AsExpected", "", generation, now)
    else:
        conditions = set_condition(conditions, STALLED, True, reason, f"{message}; {advice}", generation, now)
    result = {
        key: value
        for key, value in current.items()
        if key
        in {
            "shards",
            "readyShards",
            "readyNodes",
            "ready",
            "nodes",
            "currentImage",
            "configHash",
            "rollout",
            "tls",
            "maxPrimariesPerNode",
            "switchover",
        }
    }
    result.update(
        {
            "state": recorded,
            "message": f"{reason}: {message}",
            "endpoint": endpoint_text,
            "observedGeneration": generation,
            "conditions": conditions,
        }
    )
    return result
