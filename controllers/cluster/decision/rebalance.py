"""Which slots move where when the shard count changes (pure arithmetic, no cluster access).

Each shard in spec has a quota: its share of the bootstrap layout (`even_split`),
so a cluster that was never scaled is balanced as it stands and nothing moves.
Shards beyond spec (scale down) have a quota of zero. `transfers` pairs the
shards above quota with those below it, leaving shards first, with the fewest
slots moved; a source sends its highest slots. Each `Transfer` is carried out
in batches of at most MAX_BATCH_SLOTS slots (one CLUSTER MIGRATESLOTS job each,
one job per source at a time), so a scale that is reverted midway turns around
after the batch in flight.

Failed jobs are read back from the source's migration log (CLUSTER
GETSLOTMIGRATIONS): the failures since its last success set a retry time with
exponential backoff, counted from the log's timestamps, so a restarted
operator keeps the backoff instead of re-issuing at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from valkey_operator.valkey.replies import MigrationOperation, SlotMigration
from valkey_operator.valkey.slots import SlotRange, SlotRanges, even_split, normalize, slot_count

MAX_BATCH_SLOTS = 1024
"""Slots per migration job: big enough that a 3 -> 4 scale takes two jobs per source."""
RETRY_BASE_S = 5.0
RETRY_CAP_S = 300.0


def quotas(shards: int) -> tuple[int, ...]:
    """Slots each in-spec shard should own: the sizes of the bootstrap layout."""
    return tuple(slot_count(ranges) for ranges in even_split(shards))


@attrs.frozen
class Transfer:
    source: int
    target: int
    count: int


def transfers(counts: Mapping[int, int], shards: int) -> tuple[Transfer, ...]:
    """Moves that bring every shard to its quota: drain leaving shards first, then the fullest."""
    quota = quotas(shards)

    def wanted(shard: int) -> int:
        return quota[shard] if 0 <= shard < shards else 0

    excess = sorted(
        ((shard, count - wanted(shard)) for shard, count in counts.items() if count > wanted(shard)),
        key=lambda item: (0 <= item[0] < shards, -item[1], item[0]),
    )
    deficits = [(shard, quota[shard] - counts.get(shard, 0)) for shard in range(shards)]
    moves: list[Transfer] = []
    pending = [[shard, need] for shard, need in deficits if need > 0]
    for source, spare in excess:
        left = spare
        for entry in pending:
            if left == 0:
                break
            target, need = entry
            if need == 0:
                continue
            count = min(need, left)
            moves.append(Transfer(source, target, count))
            entry[1] -= count
            left -= count
    return tuple(moves)


def highest_slots(ranges: Iterable[SlotRange], count: int) -> SlotRanges:
    """The `count` highest slots of ranges (all of them when there are fewer)."""
    taken: list[SlotRange] = []
    left = count
    for item in reversed(normalize(ranges)):
        if left <= 0:
            break
        size = min(item.size, left)
        taken.append(SlotRange(item.end - size + 1, item.end))
        left -= size
    return normalize(taken)


def timestamp_seconds(value: int) -> float:
    """GETSLOTMIGRATIONS times are Unix seconds (measured on Valkey 9.1.0)."""
    return float(value)


@attrs.frozen
class MigrationTrouble:
    """A source's failed jobs since its last successful one."""

    failures: int
    last: SlotMigration

    @property
    def retry_at(self) -> float:
        delay = min(RETRY_BASE_S * 2.0 ** (self.failures - 1), RETRY_CAP_S)
        return timestamp_seconds(self.last.last_update_time) + delay


def trouble(migrations: Sequence[SlotMigration]) -> MigrationTrouble | None:
    """The failed exports logged after the source's last successful export, if any."""
    exports = sorted(
        (entry for entry in migrations if entry.operation is MigrationOperation.EXPORT and not entry.active),
        key=lambda entry: (entry.last_update_time, entry.name),
    )
    failures: list[SlotMigration] = []
    for entry in exports:
        if entry.failed:
            failures.append(entry)
        else:
            failures.clear()
    return MigrationTrouble(len(failures), failures[-1]) if failures else None
