"""The order of a OneInstant backup's steps, over stand-in connections (no server: the steps against
real nodes are in tests/integration/valkey/test_admin_acl_server.py and the e2e test)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from test_sources import cluster, primary, replica

from controllers.backup import instant
from controllers.backup.reconciler import BackupFailed, BackupReconciler
from controllers.backup.sources import NotSettled, ShardSource, sources
from valkey_operator.valkey.admin import ValkeyCommandError


class Node:
    """What one node was sent, and the offsets it reports."""

    def __init__(self, log: list[str], ip: str, offsets: list[int], refuse_pause: bool = False) -> None:
        self.log, self.ip, self.offsets, self.refuse_pause = log, ip, offsets, refuse_pause

    async def client_pause_write(self, milliseconds: int) -> None:
        self.log.append(f"PAUSE {self.ip} {milliseconds}")
        if self.refuse_pause:
            raise ValkeyCommandError(f"{self.ip}: CLIENT PAUSE: NOPERM")

    async def client_unpause(self) -> None:
        self.log.append(f"UNPAUSE {self.ip}")

    async def info(self, section: str) -> dict[str, str]:
        offset = self.offsets.pop(0) if len(self.offsets) > 1 else self.offsets[0]
        return {"master_repl_offset": str(offset), "slave_repl_offset": str(offset)}


class Admin:
    def __init__(self, nodes: dict[str, Node]) -> None:
        self.nodes = nodes

    @contextlib.asynccontextmanager
    async def connect(self, host: str) -> AsyncIterator[Node]:
        yield self.nodes[host]


def shards() -> tuple[ShardSource, ...]:
    found = sources(cluster({f"p{s}": primary(s) for s in range(3)} | {"r0": replica(0, 990)}))
    assert not isinstance(found, NotSettled)
    return found


async def run(nodes: dict[str, Node], forks: bool) -> tuple[float | BackupFailed, list[str], bool]:
    found = shards()
    go = asyncio.Event()
    forked = {source.index: asyncio.Event() for source in found}
    log = next(iter(nodes.values())).log

    async def sources_fork() -> None:
        await go.wait()
        log.append("go")
        if forks:
            for event in forked.values():
                event.set()

    reconciler = BackupReconciler.__new__(BackupReconciler)
    task = asyncio.create_task(sources_fork())
    try:
        result: float | BackupFailed = await reconciler._one_instant(Admin(nodes), found, go, forked)  # type: ignore[arg-type]
    except BackupFailed as failed:
        result = failed
    task.cancel()
    return result, log, go.is_set()


def nodes_of(log: list[str], **special: Node) -> dict[str, Node]:
    found = shards()
    ips = {source.primary_ip for source in found} | {source.ip for source in found}
    return {ip: special.get(ip) or Node(log, ip, [100]) for ip in ips}


async def test_primaries_are_paused_replicas_catch_up_then_sources_fork_then_primaries_unpause() -> None:
    log: list[str] = []
    found = shards()
    replica_ip = next(source.ip for source in found if source.ip != source.primary_ip)
    nodes = nodes_of(log, **{replica_ip: Node(log, replica_ip, [90, 95, 100])})
    pause, log, _ = await run(nodes, forks=True)
    assert isinstance(pause, float) and 0 <= pause < 1
    primaries = instant.primaries(found)
    paused = len(primaries)
    assert log[:paused] == [f"PAUSE {ip} {instant.PAUSE_TIMEOUT_MS}" for ip in primaries]
    assert log[paused:] == ["go", *(f"UNPAUSE {ip}" for ip in primaries)]
    assert nodes[replica_ip].offsets == [100], "the replica was polled until it reached the primary's 100"


async def test_forks_that_never_come_fail_the_backup_and_still_unpause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(instant, "PAUSE_TIMEOUT_MS", 50)
    failed, log, went = await run(nodes_of([]), forks=False)
    assert isinstance(failed, BackupFailed) and failed.reason == "InstantNotReached", failed
    assert "every source forked" in failed.message and went
    assert [line.split()[0] for line in log[-3:]] == ["UNPAUSE"] * 3


async def test_a_replica_that_never_catches_up_fails_before_any_source_forks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(instant, "PAUSE_TIMEOUT_MS", 50)
    log: list[str] = []
    replica_ip = next(source.ip for source in shards() if source.ip != source.primary_ip)
    failed, log, went = await run(nodes_of(log, **{replica_ip: Node(log, replica_ip, [10])}), forks=True)
    assert isinstance(failed, BackupFailed) and failed.reason == "InstantNotReached"
    assert "replica" in failed.message and not went and "go" not in log


async def test_a_refused_pause_fails_the_backup_and_every_primary_is_unpaused() -> None:
    log: list[str] = []
    first = instant.primaries(shards())[0]
    failed, log, went = await run(
        nodes_of(log, **{first: Node(log, first, [100], refuse_pause=True)}), forks=True
    )
    assert isinstance(failed, BackupFailed) and failed.reason == "WritePauseFailed", failed
    assert "NOPERM" in failed.message and not went
    assert sorted(line for line in log if line.startswith("UNPAUSE")) == sorted(
        f"UNPAUSE {ip}" for ip in instant.primaries(shards())
    )
