"""What of a cluster's archive its retention lets go: nothing a restore inside the window needs.

A node's history is sequences: base k (the node's data when incremental file k began) and the
incremental files from k on. A restore to a moment T replays from a base stored at or before T
(replay.py), so for the window [horizon, now] the newest base stored at or before the horizon is
the oldest one needed, and every sequence before it can go. A base's time is when its object was
stored, after the rewrite that made it began (its data is older still), so the rule never takes a
base that is needed. A node that left the cluster and whose newest object is older than the
horizon (a running archiver rewrites progress.json every few seconds) holds nothing inside the
window: all of it can go. Of the topology records, the newest one at or before the horizon (the
map at the window's start) and every later one stay.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import attrs

from valkey_operator.archiver import layout


@attrs.frozen
class Expired:
    """What retention deletes: folders (each a prefix, deleted with all under it) and records (each
    one topology record's key)."""

    folders: list[str] = attrs.field(factory=list)
    records: list[str] = attrs.field(factory=list)

    def __len__(self) -> int:
        return len(self.folders) + len(self.records)


def expired(
    listing: Iterable[tuple[str, int, float]], folder: str, horizon: float, current: Collection[str]
) -> Expired:
    """What under folder (a cluster's archive) to delete: the folders `<node>` of a departed node
    whose history ends before horizon and `<node>/<seq>` of each sequence before the oldest one a
    restore after horizon needs; the records `topology/<record>` before the one in force at
    horizon. listing: (key, size, stored at) of every object under folder; current: the IDs of the
    nodes in the cluster now."""
    folder = folder.strip("/") + "/"
    records: list[str] = []
    newest: dict[str, float] = {}
    bases: dict[str, dict[int, float]] = {}
    seqs: dict[str, set[int]] = {}
    for key, _, stored in listing:
        if not key.startswith(folder):
            continue
        node, _, rest = key[len(folder) :].partition("/")
        if not node or not rest:
            continue
        if node == layout.TOPOLOGY:
            if "/" not in rest and layout.topology_time(rest) is not None:
                records.append(rest)
            continue
        newest[node] = max(newest.get(node, stored), stored)
        archived = layout.parse_name(rest)
        if archived is None:
            continue
        seqs.setdefault(node, set()).add(archived.seq)
        if archived.start is None:
            bases.setdefault(node, {})[archived.seq] = stored
    doomed = Expired()
    at_start = [name for name in records if (layout.topology_time(name) or 0) <= horizon]
    if at_start:
        kept_from = max(at_start)
        doomed.records.extend(
            f"{folder}{layout.TOPOLOGY}/{name}" for name in sorted(records) if name < kept_from
        )
    for node in sorted(newest):
        if node not in current and newest[node] < horizon:
            doomed.folders.append(folder + node)
            continue
        old = [seq for seq, stored in bases.get(node, {}).items() if stored <= horizon]
        if not old:
            continue
        oldest_needed = max(old)
        doomed.folders.extend(
            f"{folder}{node}/{layout.seq_name(seq)}" for seq in sorted(seqs[node]) if seq < oldest_needed
        )
    return doomed
