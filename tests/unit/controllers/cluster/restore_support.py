"""A backup for the simulator's restore stories: each shard's keys and the slots holding them."""

from __future__ import annotations

from controllers.cluster.decision.restore import RestoreSource
from controllers.cluster.render.restore import RestoreFetch, RestoreShard
from valkey_operator.valkey.slots import SlotRange, SlotRanges, format_slot_ranges

FETCH = RestoreFetch(
    image="valkey-operator:dev",
    endpoint="http://127.0.0.1:7070",
    bucket="backups",
    region="us-east-1",
    credentials_secret="s3",
)


def backup(layout: tuple[SlotRanges, ...], keys: int = 1000) -> dict[int, tuple[int, SlotRanges]]:
    """Each shard's keys sit in every other 8-slot block of its slots (the rest are empty)."""
    found = {}
    for index, slots in enumerate(layout):
        holding = tuple(
            SlotRange(start, min(start + 7, item.end))
            for item in slots
            for start in range(item.start, item.end + 1, 16)
        )
        found[index] = (keys + index, holding)
    return found


def source(shards: dict[int, tuple[int, SlotRanges]]) -> RestoreSource:
    return RestoreSource(
        label="backup nightly",
        shards=tuple(
            RestoreShard(
                index=index,
                object_key=f"ns/old/nightly/shard-{index}.rdb",
                sha256="ab" * 32,
                keys=keys,
                bytes=keys * 100,
                slots=format_slot_ranges(slots),
            )
            for index, (keys, slots) in sorted(shards.items())
        ),
        fetch=FETCH,
    )
