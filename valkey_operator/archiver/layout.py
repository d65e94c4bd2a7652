"""Where a node's archived history lives in the bucket.

<path>/<namespace>/<cluster>/archive/<node>/progress.json     how far it is archived
<path>/<namespace>/<cluster>/archive/<node>/<seq>/base        the base file of that sequence
<path>/<namespace>/<cluster>/archive/<node>/<seq>/incr/<from>  bytes [from, from + size) of its
                                                               incremental file
<path>/<namespace>/<cluster>/archive/topology/<unix>.json     which node served which slots, as
                                                               the operator saw it then
Numbers are zero-padded so that the store's lexical listing is their order; a restore
concatenates a sequence's segments in that order.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

TOPOLOGY = "topology"
"""Beside the nodes' folders: the operator's records of which node served which slots."""
PROGRESS_NAME = "progress.json"
"""Beside a node's sequences: how far the history is archived (shipper.py)."""
SEQ_DIGITS = 10
OFFSET_DIGITS = 16


def archive_prefix(namespace: str, cluster: str) -> tuple[str, ...]:
    """Every node's history of one cluster."""
    return (namespace, cluster, "archive")


def node_prefix(namespace: str, cluster: str, node: str) -> tuple[str, ...]:
    return (*archive_prefix(namespace, cluster), node)


def topology_name(when: float) -> str:
    """A topology record's name: the Unix second it was recorded, zero-padded to sort in order."""
    return f"{int(when):012d}.json"


def topology_time(name: str) -> int | None:
    """The Unix second a topology record's name says; None for another name."""
    stem, dot, suffix = name.partition(".")
    return int(stem) if dot and suffix == "json" and stem.isdigit() else None


def seq_name(seq: int) -> str:
    """The folder of one sequence (its base and its incremental file's segments)."""
    return f"{seq:0{SEQ_DIGITS}d}"


def base_name(seq: int) -> tuple[str, ...]:
    return (seq_name(seq), "base")


def segment_name(seq: int, start: int) -> tuple[str, ...]:
    return (seq_name(seq), "incr", f"{start:0{OFFSET_DIGITS}d}")


@attrs.frozen
class Archived:
    """One object of a node's archive, from its key below the node's prefix."""

    seq: int
    start: int | None
    """None: the base."""


def parse_name(relative: str) -> Archived | None:
    """The object a key below a node's prefix names; None for anything else."""
    parts = relative.split("/")
    if len(parts) == 2 and parts[1] == "base" and parts[0].isdigit():
        return Archived(int(parts[0]), None)
    if len(parts) == 3 and parts[1] == "incr" and parts[0].isdigit() and parts[2].isdigit():
        return Archived(int(parts[0]), int(parts[2]))
    return None


def contiguous(spans: Iterable[tuple[int, int, str]]) -> tuple[tuple[str, ...], int]:
    """Of a file's segments ((start, size, key), any order): the keys of those that follow each
    other from byte 0, and where they end. One after a hole is left out (the archiver ships again
    from the hole), and so is one beginning inside another (left before such a hole)."""
    keys: list[str] = []
    end = 0
    for start, size, key in sorted(spans):
        if start < end:
            continue
        if start > end:
            break
        keys.append(key)
        end += size
    return tuple(keys), end
