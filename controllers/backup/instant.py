"""A OneInstant backup's pure decisions: what to pause, when a replica caught up, whether the instant held.

A OneInstant backup (spec.consistency) takes every shard's snapshot at one moment:
1. `CLIENT PAUSE <PAUSE_TIMEOUT_MS> WRITE` on every shard's primary: from then no
   write runs anywhere (reads go on; a paused primary sends its replicas nothing,
   not even pings, so its replication offset stands still);
2. a shard read from a replica waits until the replica's offset reaches its
   primary's, read after the pause (caught_up): the replica then holds exactly
   what the primary holds;
3. every shard's SYNC at once; each source forks as it answers, and the RDB's
   announcement (`$EOF:<mark>` or `$<len>`) says the fork ran;
4. `CLIENT UNPAUSE` on every primary (also when anything failed);
5. the instant held only if every fork came before the first pause could have ended by
   itself (instant_reached): else the backup fails with reason InstantNotReached rather than
   claim one instant.
The reconciler does the I/O (reconciler.py `_one_instant`); times here are the
operator's monotonic clock, passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controllers.backup.sources import ShardSource
from valkey_operator.objectstore.transfer import MIB, PART_SIZE

PAUSE_TIMEOUT_MS = 2000
"""CLIENT PAUSE's own timeout. The node ends the pause by itself after it, so an operator that dies
(or loses its connections) between PAUSE and UNPAUSE holds writes no longer than this. It must cover
every source's fork: a fork copies the page tables, about 10 ms per GB of data on common hardware,
and the operator's round trips; 2 s is far above that and still below the usual client timeouts
(valkey-py and most clients: seconds), so a paused write is late, not failed."""
STREAM_MEMORY = PART_SIZE + MIB
"""What one shard's stream holds in the operator: an upload part and the chunk being read."""
MEMORY_SHARE = 0.5
"""The part of the operator's memory limit a OneInstant backup's streams may take together: the
rest is its cache of the cluster's objects and everything else it runs meanwhile."""
CATCH_UP_POLL = 0.005
"""Seconds between two reads of a replica's offset while it catches up with its paused primary."""


def primaries(found: Iterable[ShardSource]) -> tuple[str, ...]:
    """The IPs of every shard's primary, the nodes to pause, once each, in shard order."""
    seen: dict[str, None] = {}
    for source in found:
        seen.setdefault(source.primary_ip, None)
    return tuple(seen)


def replica_sources(found: Iterable[ShardSource]) -> tuple[ShardSource, ...]:
    """The shards read from a replica: each must catch up with its paused primary first."""
    return tuple(source for source in found if source.ip != source.primary_ip)


def caught_up(replica_offset: int | None, primary_offset: int | None) -> bool:
    """Whether a replica applied everything its paused primary had written (offsets unknown: no)."""
    return replica_offset is not None and primary_offset is not None and replica_offset >= primary_offset


def instant_reached(first_pause_sent: float, every_fork_seen: float | None, timeout_ms: int) -> bool:
    """Whether every source forked while every primary was still paused.

    Each primary's pause began when it ran the PAUSE, after first_pause_sent, so none ended by
    itself before first_pause_sent + timeout; every fork ran before its announcement was read
    (every_fork_seen). Both ends err on the safe side: a True is never wrong. None: a fork was not
    seen at all.
    """
    return every_fork_seen is not None and every_fork_seen - first_pause_sent < timeout_ms / 1000.0


def pause_seconds(sent: Mapping[str, float], answered: Mapping[str, float]) -> float:
    """The longest pause a client could see: per primary, from its PAUSE sent to its UNPAUSE
    answered, the largest (a primary never answered counts up to the latest answer there was)."""
    if not sent:
        return 0.0
    last = max(answered.values(), default=max(sent.values()))
    return max(answered.get(ip, last) - at for ip, at in sent.items())


NO_V1_LIMIT = 1 << 62
"""cgroup v1 states no limit as a page-rounded 2^63 - 1; anything this large is none."""


def parse_memory_max(text: str) -> int | None:
    """A cgroup memory limit: bytes, or None for none (v2's `max`, v1's near 2^63)."""
    text = text.strip()
    if text == "max":
        return None
    value = int(text)
    return None if value >= NO_V1_LIMIT else value


def streams_over_budget(shards: int, memory_limit: int | None) -> str | None:
    """Why the operator cannot hold every shard's stream at once (a OneInstant backup must: every
    source forks inside one pause and streams until its last byte), or None when it can.

    Forking every shard at once and reading a few at a time would not do: a source whose stream
    is not read stalls its fork, and the node drops the stream after its repl-timeout.
    """
    needed = shards * STREAM_MEMORY
    if memory_limit is None or needed <= memory_limit * MEMORY_SHARE:
        return None
    return (
        f"a OneInstant backup reads all {shards} shards at once, {STREAM_MEMORY // MIB} MiB each in "
        f"the operator ({needed // MIB} MiB), over {MEMORY_SHARE:.0%} of its memory limit "
        f"({memory_limit // MIB} MiB): raise the operator's memory limit (the chart's "
        f"resources.limits.memory) to {int(needed / MEMORY_SHARE) // MIB + 1}Mi or more, or take "
        "PerShard backups"
    )
