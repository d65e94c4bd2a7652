"""How the operator splits the 16384 hash slots over a cluster's shards (pure).

One definition, shared by the operator's planner and by the test bed's
hand-built clusters and benchmarks, so that a cluster formed by hand has
exactly the layout the operator would give it.
"""

from __future__ import annotations

SLOT_COUNT = 16384


def even_ranges(shards: int) -> tuple[tuple[int, int], ...]:
    """Shard i gets slots i*16384//n .. (i+1)*16384//n - 1 (both inclusive): contiguous ranges whose
    sizes differ by at most 1 (bounds rounded down)."""
    if shards < 1:
        raise ValueError("a cluster has at least one shard")
    bounds = [index * SLOT_COUNT // shards for index in range(shards + 1)]
    return tuple((bounds[i], bounds[i + 1] - 1) for i in range(shards))
