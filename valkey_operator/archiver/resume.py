"""Where a restarted archiver goes on: what of a node's history the bucket already holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from valkey_operator.archiver import layout


@attrs.frozen
class Resume:
    bases: frozenset[int]
    shipped: Mapping[int, int]
    """Incremental file seq -> bytes stored without a hole from its start."""

    @property
    def newest_incr(self) -> int | None:
        return max(self.shipped, default=None)


def resume_from(listing: Iterable[tuple[str, int]], prefix: str) -> Resume:
    """The objects listed under a node's prefix ((key, size), any order) as a Resume: each
    incremental file as far as its segments follow each other (layout.contiguous)."""
    folder = prefix.strip("/") + "/"
    bases: set[int] = set()
    segments: dict[int, list[tuple[int, int, str]]] = {}
    for key, size in listing:
        if not key.startswith(folder) or (archived := layout.parse_name(key[len(folder) :])) is None:
            continue
        if archived.start is None:
            bases.add(archived.seq)
        else:
            segments.setdefault(archived.seq, []).append((archived.start, size, key))
    shipped = {seq: layout.contiguous(spans)[1] for seq, spans in segments.items()}
    return Resume(frozenset(bases), shipped)
