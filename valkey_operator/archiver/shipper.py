"""Ships what the follower hands out to the bucket, one poll after another.

A poll that read every followed file to its end and stored every piece it got means that every
write the node acknowledged before the poll began is archived: the node writes a command to its
AOF before it replies to the client (in the same event-loop turn, ahead of the replies), and a
read sees what was written even before an fsync. `archived_until` is that moment. One exception:
with `appendfsync everysec`, a node whose previous fsync is still running may postpone its write
for up to 2 s while replying (a disk too slow for the write rate); the bound is then that late.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import BinaryIO

import structlog

from valkey_operator.archiver import layout
from valkey_operator.archiver.follower import AofFollower, Base, Gap, Segment
from valkey_operator.objectstore import ObjectStore, StorageError

log = structlog.get_logger(__name__)

READ_CHUNK = 1024 * 1024


class Shipper:
    def __init__(
        self,
        follower: AofFollower,
        store: ObjectStore,
        prefix: tuple[str, ...],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.follower = follower
        self.store = store
        self.prefix = prefix
        self.clock = clock
        self.archived_until: float | None = None
        """Every write acknowledged before this (Unix seconds) is in the bucket."""
        self.gaps: list[int] = []

    async def ship_once(self) -> None:
        began = self.clock()
        for piece in self.follower.poll():
            match piece:
                case Base(seq=seq, file=file):
                    with file:
                        await self.store.upload(
                            self.store.key(*self.prefix, *layout.base_name(seq)), _chunks(file)
                        )
                case Segment(seq=seq, start=start, data=data):
                    await self.store.upload(
                        self.store.key(*self.prefix, *layout.segment_name(seq, start)), _once(data)
                    )
                case Gap(seq=seq):
                    log.warning("incremental AOF file deleted before it was archived", seq=seq)
                    self.gaps.append(seq)
        self.archived_until = began

    async def run(self, interval: float, stop: asyncio.Event, progress_every: float | None = None) -> None:
        """Ship every interval seconds until stop is set, then once more; with progress_every, write
        the progress object that often (and after the last ship)."""
        written = -math.inf
        while True:
            stopping = stop.is_set()
            try:
                await self.ship_once()
                if progress_every is not None and (stopping or self.clock() - written >= progress_every):
                    await self.write_progress()
                    written = self.clock()
            except StorageError as exc:  # the next look tries again; archived_until stands still
                log.warning("archiving failed", reason=exc.reason, error=str(exc))
            if stopping:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)

    async def write_progress(self) -> None:
        """progress.json beside the node's history: how far it is archived, for the operator to
        report without reading the history itself."""
        await self.store.put_json(
            self.store.key(*self.prefix, layout.PROGRESS_NAME),
            {"archivedUntil": self.archived_until, "gaps": self.gaps},
        )


async def _chunks(file: BinaryIO) -> AsyncIterator[bytes]:
    while chunk := file.read(READ_CHUNK):
        yield chunk


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data
