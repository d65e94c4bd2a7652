"""Which of a node's archived objects replay its history: a base and every increment after it.

Base k is the node's data when incremental file k began, so base k followed by incremental
files k, k+1, ... replays the node to the end of the last one; any base will do, the oldest
replays the widest window. A gap (an incremental file the archiver lost) breaks every chain
that would cross it: the chain starts at a base after the newest gap. An incremental file
with no object is one the node never wrote to.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from valkey_operator.archiver import layout


@attrs.frozen
class Chain:
    base_seq: int
    base_key: str
    incrs: tuple[tuple[int, tuple[str, ...]], ...]
    """(seq, its segments' keys in byte order), seq ascending from base_seq."""


def replay_chain(listing: Iterable[tuple[str, int]], folder: str, gaps: Iterable[int] = ()) -> Chain | None:
    """The chain from the oldest base after every gap, or None when the bucket holds no such base."""
    folder = folder.strip("/") + "/"
    bases: dict[int, str] = {}
    segments: dict[int, list[tuple[int, int, str]]] = {}
    for key, size in listing:
        if not key.startswith(folder) or (archived := layout.parse_name(key[len(folder) :])) is None:
            continue
        if archived.start is None:
            bases[archived.seq] = key
        else:
            segments.setdefault(archived.seq, []).append((archived.start, size, key))
    newest_gap = max(gaps, default=-1)
    usable = [seq for seq in bases if seq > newest_gap]
    if not usable:
        return None
    first = min(usable)
    last = max([first, *segments])
    incrs = tuple((seq, layout.contiguous(segments.get(seq, []))[0]) for seq in range(first, last + 1))
    return Chain(first, bases[first], incrs)
