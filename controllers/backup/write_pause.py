"""A OneInstant backup's write pause on the nodes (the decisions are instant.py's).

Every primary is paused over a connection opened beforehand, every replica source
catches up with its paused primary, then `go` lets the shards' streams start and
each reports its fork; every primary is released, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import structlog

from controllers.backup import instant
from controllers.backup.failed import BackupFailed
from controllers.backup.sources import ShardSource
from valkey_operator.valkey.admin import AdminClient, NodeConnection, ValkeyAdminError

log = structlog.get_logger(__name__)

CGROUP_MEMORY_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2: the container's own cgroup at the root
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1 nodes
)


def operator_memory_limit(paths: tuple[Path, ...] = CGROUP_MEMORY_LIMITS) -> int | None:
    """This process's memory limit as its cgroup states it (v2, else v1); None when it has none
    or none is readable."""
    for path in paths:
        try:
            return instant.parse_memory_max(path.read_text())
        except OSError:
            continue
    return None


async def hold_writes(
    admin: AdminClient,
    found: tuple[ShardSource, ...],
    go: asyncio.Event,
    forked: dict[int, asyncio.Event],
) -> float:
    """Pause every primary's writes, let the sources fork (go), release the primaries; the
    longest pause a client saw. InstantNotReached if a fork may have come after a pause ended."""
    timeout = instant.PAUSE_TIMEOUT_MS / 1000.0
    sent: dict[str, float] = {}
    answered: dict[str, float] = {}
    async with contextlib.AsyncExitStack() as stack:
        connections: dict[str, NodeConnection] = {}
        try:
            # every connection opened before the first pause: the pause then costs round trips only
            for ip in instant.primaries(found):
                connections[ip] = await stack.enter_async_context(admin.connect(ip))
            first = time.monotonic()
            try:
                await _pause(connections, sent)
                async with asyncio.timeout(timeout):
                    await _catch_up(admin, found, connections)
                    go.set()
                    for event in forked.values():
                        await event.wait()
                every_fork: float | None = time.monotonic()
            except TimeoutError:
                every_fork = None
            finally:
                await _unpause(connections, answered)
        except ValkeyAdminError as exc:
            raise BackupFailed("WritePauseFailed", f"the write pause: {exc}") from None
    pause = instant.pause_seconds(sent, answered)
    if not instant.instant_reached(first, every_fork, instant.PAUSE_TIMEOUT_MS):
        late = "every source forked" if go.is_set() else "every replica source reached its primary"
        raise BackupFailed(
            "InstantNotReached",
            f"not {late} within the {instant.PAUSE_TIMEOUT_MS} ms write pause: the shards would not "
            "be one instant",
        )
    log.info("every shard forked inside one write pause", pause_ms=round(pause * 1000))
    return pause


async def _pause(connections: dict[str, NodeConnection], sent: dict[str, float]) -> None:
    async def one(ip: str, connection: NodeConnection) -> None:
        sent[ip] = time.monotonic()
        await connection.client_pause_write(instant.PAUSE_TIMEOUT_MS)

    # every PAUSE answered (or failed) before any UNPAUSE shares its connection
    results = await asyncio.gather(
        *(one(ip, connection) for ip, connection in connections.items()), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def _unpause(connections: dict[str, NodeConnection], answered: dict[str, float]) -> None:
    """CLIENT UNPAUSE everywhere a pause may have run; a failure is logged (the pause's own
    timeout ends it)."""

    async def one(ip: str, connection: NodeConnection) -> None:
        try:
            await connection.client_unpause()
        except ValkeyAdminError as exc:
            log.warning("CLIENT UNPAUSE failed: the pause ends by its timeout", node=ip, error=str(exc))
            return
        answered[ip] = time.monotonic()

    await asyncio.gather(*(one(ip, connection) for ip, connection in connections.items()))


async def _catch_up(
    admin: AdminClient, found: tuple[ShardSource, ...], connections: dict[str, NodeConnection]
) -> None:
    """Each replica source reaches its paused primary's offset (the caller bounds the wait)."""

    async def one(source: ShardSource) -> None:
        info = await connections[source.primary_ip].info("replication")
        target = _offset(info.get("master_repl_offset"))
        async with admin.connect(source.ip) as replica:
            while True:
                offset = _offset((await replica.info("replication")).get("slave_repl_offset"))
                if instant.caught_up(offset, target):
                    return
                await asyncio.sleep(instant.CATCH_UP_POLL)

    await asyncio.gather(*(one(source) for source in instant.replica_sources(found)))


def _offset(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
