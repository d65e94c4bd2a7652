"""Whose history a restore to a moment replays (spec.restore.pointInTime): the pure rules.

The source's shards at the moment come from its topology records (archive_progress.py): the newest
one recorded at or before it. A record is written a pass after the map changes, so a shard that
appeared just before the moment (a scale-out's new primary, already holding migrated keys) may be
named only by the next record: its shards whose nodes no earlier shard names are added, and
skipped when none of their nodes has a base at or before the moment (they began after it).

Each shard replays one node's history: its primary's, or a replica's (a replica writes the same
stream to its own append-only file), the first whose archive reaches the moment. A shard none of
whose nodes is in any later record left the cluster (a scale-in after migrating its slots away, a
lost shard): its archive ends where its nodes stopped, so the node archived furthest replays it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from controllers.cluster.decision.archive import NodeProgress
from valkey_operator.core.clock import rfc3339


@attrs.frozen
class Group:
    """One shard of the source at the moment: its slots and nodes, the primary first."""

    slots: str
    nodes: tuple[str, ...]
    departed: bool = False
    """No later record names any of its nodes: it left the cluster, its archive is whole."""
    optional: bool = False
    """Named only by the record after the moment: skipped if it began after the moment."""


@attrs.frozen
class Record:
    recorded_at: float
    shards: tuple[tuple[str, tuple[str, ...]], ...]
    """(slots, node IDs with the primary first), as the record lists them."""

    @classmethod
    def parse(cls, recorded_at: float, document: Any) -> Record | None:
        """A topology record as the operator writes it; None for anything else."""
        if not isinstance(document, dict) or not isinstance(document.get("shards"), list):
            return None
        shards = []
        for shard in document["shards"]:
            if not isinstance(shard, dict):
                return None
            slots, primary, replicas = shard.get("slots"), shard.get("primary"), shard.get("replicas") or []
            if not isinstance(slots, str) or not isinstance(primary, str) or not isinstance(replicas, list):
                return None
            if not all(isinstance(node, str) for node in replicas):
                return None
            shards.append((slots, (primary, *replicas)))
        return cls(recorded_at, tuple(shards))

    def nodes(self) -> set[str]:
        return {node for _, nodes in self.shards for node in nodes}


def groups_at(records: Iterable[Record], moment: float) -> list[Group] | None:
    """The source's shards at moment; None when no record is that old."""
    ordered = sorted(records, key=lambda record: record.recorded_at)
    before = [record for record in ordered if record.recorded_at <= moment]
    if not before:
        return None
    later = [record for record in ordered if record.recorded_at > moment]
    named_later = set().union(*(record.nodes() for record in later))
    groups = [
        Group(slots, nodes, departed=bool(later) and not named_later & set(nodes))
        for slots, nodes in before[-1].shards
    ]
    known = before[-1].nodes()
    if later:
        groups += [
            Group(slots, nodes, optional=True) for slots, nodes in later[0].shards if not known & set(nodes)
        ]
    return groups


def candidates(group: Group, progress: Mapping[str, NodeProgress], moment: float) -> list[str]:
    """The nodes whose history may replay group at moment, best first: those archived past it (the
    primary first); for a departed group, every node archived at all, the furthest first."""
    if group.departed:
        marked = [node for node in group.nodes if _mark(progress, node) is not None]
        return sorted(marked, key=lambda node: -(_mark(progress, node) or 0.0))
    return [node for node in group.nodes if (_mark(progress, node) or -1.0) >= moment]


def usable_bases(seqs: Iterable[int], gaps: Sequence[int]) -> list[int]:
    """The sequences whose base may start a replay, newest first: after every gap (an incremental
    file lost breaks a replay that crosses it)."""
    newest_gap = max(gaps, default=-1)
    return sorted((seq for seq in seqs if seq > newest_gap), reverse=True)


def behind(group: Group, progress: Mapping[str, NodeProgress], moment: float) -> str:
    """Why no node of group can replay it to moment, for status.restore."""
    marks = ", ".join(f"{node[:8]} {_shown(_mark(progress, node))}" for node in group.nodes)
    return f"slots {group.slots}: no node's archive reaches the moment (archived until: {marks})"


def _mark(progress: Mapping[str, NodeProgress], node: str) -> float | None:
    found = progress.get(node)
    return found.archived_until if found is not None else None


def _shown(mark: float | None) -> str:
    return rfc3339(mark) if mark is not None else "nothing"
