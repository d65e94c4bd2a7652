"""status.pointInTime (spec.backup.pointInTime): how far the cluster's history is archived (pure).

Every write a primary acknowledged is in its own append-only file before the reply, and its
archiver's progress.json says up to when that file is stored (valkey_operator/archiver/shipper.py).
The cluster's mark is the oldest of the slot-serving primaries' marks: before it, every shard's
acknowledged writes are stored. A replica's history is archived too (a failover hands the shard
to a node whose history is already in the bucket), but a replica's mark says nothing of what its
primary acknowledged, so it is not counted. Without a mark for every primary there is none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from controllers.cluster.render import archiver
from controllers.cluster.render.context import RenderContext
from controllers.shared.observation import Observation
from valkey_operator.api.backup import PointInTimeStatus
from valkey_operator.api.cluster import NodeRole
from valkey_operator.api.config import PersistenceMode
from valkey_operator.core.clock import rfc3339
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.slots import coverage, format_slot_ranges

STATUS_REFRESH_S = 30.0
"""The longest a quiet archiving cluster waits for its next pass: status and metric follow the
archivers at least this often."""


@attrs.frozen
class NodeProgress:
    archived_until: float | None
    gaps: tuple[int, ...] = ()

    @classmethod
    def parse(cls, document: Any) -> NodeProgress | None:
        """progress.json as the archiver writes it; None for anything else (the bucket may be anyone's)."""
        if not isinstance(document, dict):
            return None
        until = document.get("archivedUntil")
        gaps = document.get("gaps") or []
        if until is not None and not isinstance(until, int | float):
            return None
        if not isinstance(gaps, list) or not all(isinstance(seq, int) for seq in gaps):
            return None
        return cls(float(until) if until is not None else None, tuple(gaps))


@attrs.frozen(kw_only=True)
class ArchiveProgress:
    """What was read of the cluster's archivers: node ID -> progress, or why nothing could be read."""

    nodes: Mapping[str, NodeProgress] = attrs.field(factory=dict)
    reason: str | None = None
    message: str | None = None


@attrs.frozen
class ArchiveReport:
    status: PointInTimeStatus | None
    archived_until: float | None
    """The cluster's mark (Unix seconds), for the metric; None: none."""


def archive_report(
    ctx: RenderContext, progress: ArchiveProgress | None, observation: Observation | None
) -> ArchiveReport:
    """status.pointInTime and the metric's value for one pass."""
    if not archiver.asked(ctx):
        return ArchiveReport(None, None)
    if ctx.persistence.mode is not PersistenceMode.AOF:
        return _problem(
            "NeedsAppendOnly",
            f"point-in-time archiving needs persistence mode aof; the config runs {ctx.persistence.mode}: "
            "nothing is archived",
        )
    if not ctx.operator_image:
        return _problem(
            "OperatorImageUnknown",
            "the operator runs without --operator-image: no image for the archiver, nothing is archived",
        )
    if progress is None or observation is None:
        return _problem("ArchiveNotStarted", "the archivers' progress was not read yet")
    if progress.reason is not None:
        return _problem(progress.reason, f"the archivers' progress could not be read: {progress.message}")
    marks: list[float] = []
    unknown: list[str] = []
    gaps: list[str] = []
    for pod, node in sorted(observation.nodes.items()):
        if node.role is not NodeRole.PRIMARY or not node.slots or node.node_id is None:
            continue
        read = progress.nodes.get(node.node_id)
        if read is None or read.archived_until is None:
            unknown.append(pod)
            continue
        marks.append(read.archived_until)
        if read.gaps:
            gaps.append(f"{pod} (files {', '.join(str(seq) for seq in read.gaps)})")
    if unknown or not marks:
        return _problem(
            "ArchiveNotStarted",
            f"no archived history yet from the primary of {', '.join(unknown) or 'any shard'}",
        )
    until = min(marks)
    if gaps:
        message = (
            f"history lost while an archiver was down: {'; '.join(gaps)}; a restore can start only "
            "at the base each of those nodes wrote after it"
        )
        return ArchiveReport(
            PointInTimeStatus(archived_until=rfc3339(until), reason="ArchiveGap", message=message), until
        )
    return ArchiveReport(PointInTimeStatus(archived_until=rfc3339(until)), until)


def topology(ctx: RenderContext, observation: Observation | None) -> Obj | None:
    """Which node served which slots, with its replicas, for the archive's topology record
    (archive_progress.py): a restore to a moment replays the history of each slot range's primary
    at that moment. None unless the archivers run and every slot is served once by a primary whose
    node ID is known (a map caught in the middle of a change is not recorded)."""
    if not archiver.enabled(ctx) or observation is None:
        return None
    primaries = {
        node.node_id: node
        for node in observation.nodes.values()
        if node.role is NodeRole.PRIMARY and node.slots and node.node_id is not None
    }
    if not coverage(node.slots for node in primaries.values()).complete:
        return None
    replicas: dict[str, list[str]] = {}
    for node in observation.nodes.values():
        if node.role is NodeRole.REPLICA and node.node_id and node.primary_id in primaries:
            replicas.setdefault(node.primary_id, []).append(node.node_id)
    shards = [
        {
            "slots": format_slot_ranges(node.slots),
            "primary": node_id,
            "replicas": sorted(replicas.get(node_id, [])),
        }
        for node_id, node in sorted(primaries.items(), key=lambda item: item[1].slots[0].start)
    ]
    return {"shards": shards}


def _problem(reason: str, message: str) -> ArchiveReport:
    return ArchiveReport(PointInTimeStatus(reason=reason, message=message), None)
