"""Valkey's 16384 hash slots as ranges, and how the operator splits them over shards (pure).

One definition, shared by the operator's planner and by the test bed's
hand-built clusters and benchmarks, so that a cluster formed by hand has
exactly the layout the operator would give it. Ranges are normalized where
this module returns them: sorted, disjoint, adjacent ranges merged, so equal
slot sets compare equal; coverage is a sweep over ranges, never per slot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

SLOT_COUNT = 16384


def even_ranges(shards: int) -> tuple[tuple[int, int], ...]:
    """Shard i gets slots i*16384//n .. (i+1)*16384//n - 1 (both inclusive): contiguous ranges whose
    sizes differ by at most 1 (bounds rounded down)."""
    if shards < 1:
        raise ValueError("a cluster has at least one shard")
    bounds = [index * SLOT_COUNT // shards for index in range(shards + 1)]
    return tuple((bounds[i], bounds[i + 1] - 1) for i in range(shards))


@attrs.frozen(order=True)
class SlotRange:
    """Slots start..end, both inclusive, as Valkey writes them."""

    start: int
    end: int

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.start <= self.end < SLOT_COUNT:
            raise ValueError(f"invalid slot range {self.start}-{self.end}")

    @property
    def size(self) -> int:
        return self.end - self.start + 1

    def __str__(self) -> str:
        return str(self.start) if self.start == self.end else f"{self.start}-{self.end}"


SlotRanges = tuple[SlotRange, ...]
"""Always normalized where this module returns it: sorted, disjoint, adjacent ranges merged."""

ALL_SLOTS: SlotRanges = (SlotRange(0, SLOT_COUNT - 1),)


def normalize(ranges: Iterable[SlotRange]) -> SlotRanges:
    """Sorted, with overlapping and adjacent ranges merged, so equal slot sets compare equal."""
    merged: list[SlotRange] = []
    for item in sorted(ranges):
        if merged and item.start <= merged[-1].end + 1:
            last = merged[-1]
            merged[-1] = SlotRange(last.start, max(last.end, item.end))
        else:
            merged.append(item)
    return tuple(merged)


def parse_slot_ranges(text: str) -> SlotRanges:
    """'0-5460,5462' (status spelling) or '0-10 20-30' (GETSLOTMIGRATIONS spelling) -> ranges."""
    ranges = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        start, _, end = part.partition("-")
        ranges.append(SlotRange(int(start), int(end or start)))
    return normalize(ranges)


def format_slot_ranges(ranges: Iterable[SlotRange]) -> str:
    """The status spelling: '0-5460,5462'; empty for no slots."""
    return ",".join(str(item) for item in normalize(ranges))


def slot_count(ranges: Iterable[SlotRange]) -> int:
    return sum(item.size for item in normalize(ranges))


def union(*groups: Iterable[SlotRange]) -> SlotRanges:
    return normalize(item for group in groups for item in group)


def subtract(ranges: Iterable[SlotRange], removed: Iterable[SlotRange]) -> SlotRanges:
    """The slots of ranges that are not in removed."""
    result: list[SlotRange] = []
    cuts = normalize(removed)
    for item in normalize(ranges):
        start = item.start
        for cut in cuts:
            if cut.end < start or cut.start > item.end:
                continue
            if cut.start > start:
                result.append(SlotRange(start, cut.start - 1))
            start = cut.end + 1
            if start > item.end:
                break
        if start <= item.end:
            result.append(SlotRange(start, item.end))
    return tuple(result)


def intersect(left: Iterable[SlotRange], right: Iterable[SlotRange]) -> SlotRanges:
    left_ranges = normalize(left)
    return subtract(left_ranges, subtract(left_ranges, right))


def even_split(shards: int) -> tuple[SlotRanges, ...]:
    """The bootstrap layout (even_ranges) as slot ranges."""
    return tuple((SlotRange(start, end),) for start, end in even_ranges(shards))


@attrs.frozen
class Coverage:
    """How a set of slot claims covers the 16384 slots: what nobody claims, what several claim."""

    uncovered: SlotRanges
    contested: SlotRanges

    @property
    def complete(self) -> bool:
        """Every slot claimed exactly once."""
        return not self.uncovered and not self.contested


def coverage(claims: Iterable[Iterable[SlotRange]]) -> Coverage:
    """Sweep the claims (one normalized group per owner) once; O(ranges log ranges), never per slot."""
    events: list[tuple[int, int]] = []
    for group in claims:
        for item in normalize(group):
            events.append((item.start, 1))
            events.append((item.end + 1, -1))
    events.sort()
    uncovered: list[SlotRange] = []
    contested: list[SlotRange] = []
    depth, position, index = 0, 0, 0
    while position < SLOT_COUNT:
        while index < len(events) and events[index][0] == position:
            depth += events[index][1]
            index += 1
        following = events[index][0] if index < len(events) else SLOT_COUNT
        end = min(following, SLOT_COUNT) - 1
        if depth == 0:
            uncovered.append(SlotRange(position, end))
        elif depth > 1:
            contested.append(SlotRange(position, end))
        position = end + 1
    return Coverage(normalize(uncovered), normalize(contested))
