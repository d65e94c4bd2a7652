"""`status` as data and as text: one document from the ValkeyCluster and its pods, rendered as a
table a person reads at a glance or printed as JSON. Pure: "now" is passed in.

The document is what `-o json` prints; the table shows the same facts.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from valkey_operator.api.resources import PAUSED_ANNOTATION, RESTARTED_AT_ANNOTATION, SWITCHOVER_ANNOTATION
from valkey_operator.kubectl.requests import CLUSTER_LABEL

Obj = dict[str, Any]
SHARD_LABEL = CLUSTER_LABEL.rsplit("/", 1)[0] + "/shard"
NONE = "-"


def parse_time(text: str | None) -> datetime.datetime | None:
    """An RFC 3339 time as Kubernetes writes it; None when absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kubectl's short ages (HumanDuration): 45s, 5m30s, 42m, 5h10m, 20h, 3d4h, 12d, 2y30d."""
    seconds = max(0, int(seconds))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"


def age(text: str | None, now: datetime.datetime) -> str | None:
    when = parse_time(text)
    return None if when is None else human_duration((now - when).total_seconds())


def _node_row(node: Obj, pod: Obj | None) -> Obj:
    """One Valkey node: what the operator recorded, plus the Kubernetes node and phase of its pod."""
    pod_status = (pod or {}).get("status") or {}
    return {
        "pod": node.get("pod"),
        "role": node.get("role"),
        "node": ((pod or {}).get("spec") or {}).get("nodeName"),
        "ip": node.get("ip") or pod_status.get("podIP"),
        "version": node.get("version"),
        "slots": node.get("slots"),
        "inSync": node.get("inSync"),
        "nodeId": node.get("nodeId"),
        "podPhase": pod_status.get("phase") if pod is not None else "Missing",
    }


def _shard_of(pod: Obj) -> int | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(SHARD_LABEL, "")
    return int(value) if value.isdigit() else None


def _order(row: Obj) -> tuple[int, str]:
    return (0 if row.get("role") == "primary" else 1, str(row.get("pod") or ""))


def summarize(cluster: Obj, pods: Sequence[Obj], now: datetime.datetime) -> Obj:
    """The status document of one ValkeyCluster: cluster line, shards with their nodes, conditions,
    rollout and switchover. Pods the status does not list yet (a surge or new pod) are included with
    what the Pod says."""
    meta, spec, status = cluster.get("metadata") or {}, cluster.get("spec") or {}, cluster.get("status") or {}
    annotations = meta.get("annotations") or {}
    by_name = {pod["metadata"]["name"]: pod for pod in pods}
    shards: dict[int, list[Obj]] = {}
    listed = set()
    for node in status.get("nodes") or []:
        listed.add(node.get("pod"))
        shards.setdefault(int(node.get("shard", -1)), []).append(
            _node_row(node, by_name.get(node.get("pod")))
        )
    for name, pod in sorted(by_name.items()):
        if name not in listed:
            shard = _shard_of(pod)
            row = _node_row({"pod": name}, pod)
            shards.setdefault(-1 if shard is None else shard, []).append(row)
    versions = sorted({str(row["version"]) for rows in shards.values() for row in rows if row.get("version")})
    return {
        "cluster": {
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "phase": status.get("state"),
            "message": status.get("message") or None,
            "ready": status.get("ready"),
            "shards": spec.get("shards"),
            "replicasPerShard": spec.get("replicasPerShard"),
            "configRef": spec.get("configRef"),
            "image": status.get("currentImage"),
            "versions": versions,
            "endpoint": status.get("endpoint"),
            "paused": annotations.get(PAUSED_ANNOTATION) == "true",
            "restartedAt": annotations.get(RESTARTED_AT_ANNOTATION),
            "switchoverRequest": annotations.get(SWITCHOVER_ANNOTATION),
            "generation": meta.get("generation"),
            "observedGeneration": status.get("observedGeneration"),
            "createdAt": meta.get("creationTimestamp"),
            "age": age(meta.get("creationTimestamp"), now),
        },
        "shards": [
            {"shard": shard, "nodes": sorted(rows, key=_order)} for shard, rows in sorted(shards.items())
        ],
        "conditions": [
            {
                "type": condition.get("type"),
                "status": condition.get("status"),
                "reason": condition.get("reason"),
                "message": condition.get("message"),
                "lastTransitionTime": condition.get("lastTransitionTime"),
            }
            for condition in status.get("conditions") or []
        ],
        "rollout": status.get("rollout") or None,
        "switchover": status.get("switchover") or None,
        "pointInTime": status.get("pointInTime") or None,
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded as kubectl pads them: left-aligned, three spaces apart, no trailing blanks."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    return [
        "   ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip()
        for row in (headers, *rows)
    ]


def _text(value: Any) -> str:
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _plural(count: Any, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def cluster_line(cluster: Obj) -> str:
    """e.g. `shop/cache: Active, ready 6/6, 3 shards x 1 replica, valkey/valkey:9.1.2 (9.1.2), age 2d`."""
    versions = ", ".join(cluster["versions"]) or "version unknown"
    parts = [
        _text(cluster["phase"] or "Unknown"),
        f"ready {_text(cluster['ready'])}",
        f"{_plural(cluster['shards'], 'shard')} x {_plural(cluster['replicasPerShard'], 'replica')}",
        f"{_text(cluster['image'])} ({versions})",
        f"age {_text(cluster['age'])}",
    ]
    if cluster["paused"]:
        parts.append("PAUSED")
    return f"{cluster['namespace']}/{cluster['name']}: " + ", ".join(parts)


def _shard_rows(shards: Sequence[Obj]) -> list[list[str]]:
    rows = []
    for shard in shards:
        for index, node in enumerate(shard["nodes"]):
            role = node["role"] or (NONE if node["podPhase"] == "Running" else node["podPhase"])
            in_sync = NONE if node["role"] == "primary" else _text(node["inSync"])
            label = (str(shard["shard"]) if shard["shard"] >= 0 else "?") if index == 0 else ""
            rows.append(
                [
                    label,
                    _text(role),
                    _text(node["pod"]) + (" (gone)" if node["podPhase"] == "Missing" else ""),
                    _text(node["node"]),
                    _text(node["ip"]),
                    _text(node["version"]),
                    _text(node["slots"]),
                    in_sync,
                ]
            )
    return rows


def rollout_line(rollout: Obj | None, now: datetime.datetime | None) -> str:
    """The rollout in one line; with now None, without its age (a line that changes only with it)."""
    if not rollout:
        return "Rollout: none"
    started = age(rollout.get("startedAt"), now) if now is not None else None
    line = (
        f"Rollout: {rollout.get('shardsUpdated', 0)}/{rollout.get('shards', 0)} shards updated, "
        f"shard {rollout.get('shard', 0)} rolling"
    )
    if rollout.get("step"):
        line += f": {rollout['step']}"
    return line + (f" (started {started} ago)" if started else "")


def switchover_line(switchover: Obj | None, now: datetime.datetime) -> str | None:
    if not switchover:
        return None
    moved = f"{_text(switchover.get('from'))} -> {_text(switchover.get('to'))}"
    line = f"Switchover {switchover.get('request')}: {_text(switchover.get('phase'))}, {moved}"
    if switchover.get("message"):
        line += f": {switchover['message']}"
    finished = age(switchover.get("finishedAt"), now)
    return line + (f" (finished {finished} ago)" if finished else "")


def archive_line(point_in_time: Obj | None, now: datetime.datetime) -> str | None:
    """spec.backup.pointInTime's archive in one line: how far behind, and why not whole."""
    if not point_in_time:
        return None
    until = point_in_time.get("archivedUntil")
    line = f"Archived until: {until} ({age(until, now)} behind)" if until else "Archived until: -"
    if point_in_time.get("reason"):
        line += f"; {point_in_time['reason']}: {_text(point_in_time.get('message'))}"
    return line


def render(document: Obj, now: datetime.datetime) -> str:
    """The status table: cluster line, nodes per shard, conditions, rollout, switchover, archive."""
    cluster = document["cluster"]
    lines = [cluster_line(cluster)]
    if cluster["endpoint"]:
        lines.append(f"Endpoint: {cluster['endpoint']}")
    if cluster["message"] and cluster["message"] not in {c["message"] for c in document["conditions"]}:
        lines.append(f"Message: {cluster['message']}")
    if cluster["generation"] is not None and cluster["observedGeneration"] != cluster["generation"]:
        lines.append(
            f"Generation {cluster['generation']} not yet observed by the operator "
            f"(status describes {_text(cluster['observedGeneration'])})"
        )
    lines.append("")
    headers = ["SHARD", "ROLE", "POD", "NODE", "IP", "VERSION", "SLOTS", "IN-SYNC"]
    rows = _shard_rows(document["shards"])
    lines.extend(table(headers, rows) if rows else ["No nodes yet."])
    lines.append("")
    conditions = [
        [_text(c["type"]), _text(c["status"]), _text(c["reason"]), _text(c["message"])]
        for c in document["conditions"]
    ]
    if conditions:
        lines.extend(table(["CONDITION", "STATUS", "REASON", "MESSAGE"], conditions))
    else:
        lines.append("No conditions yet.")
    lines.append("")
    lines.append(rollout_line(document["rollout"], now))
    switchover = switchover_line(document["switchover"], now)
    if switchover:
        lines.append(switchover)
    archive = archive_line(document.get("pointInTime"), now)
    if archive:
        lines.append(archive)
    return "\n".join(lines)
