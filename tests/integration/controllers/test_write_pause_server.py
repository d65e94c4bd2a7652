"""A OneInstant backup's write pause (controllers/backup/write_pause.py) on real valkey-server processes.

Two primaries and a replica of the first, as a backup sees a 2-shard cluster whose shard 0 is
read from its replica: writes wait while the sources fork and go on when the pause ends; the
replica source has its primary's offset when the forks are let go; a node refusing the pause,
or forks that never come, fail the backup and leave no primary paused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator

import pytest
import valkey.asyncio

from controllers.backup import instant
from controllers.backup.failed import BackupFailed
from controllers.backup.sources import ShardSource
from controllers.backup.write_pause import hold_writes
from valkey_operator.api.cluster import NodeRole
from valkey_operator.valkey.admin import AdminClient, Credentials
from valkey_operator.valkey.slots import SlotRange
from valkey_testbed import images
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server, stop_servers
from valkey_testbed.wait import NotYet, eventually

pytestmark = pytest.mark.integration

PASSWORD = "write-pause-password"
PAUSER = "pauser"
PORT = 16390
P0, P1, R0 = "127.0.93.1", "127.0.93.2", "127.0.93.3"
QUICK = 0.5
"""A write on a node that is not paused answers far sooner than this (the pause itself lasts 2 s)."""


@pytest.fixture(scope="module")
def nodes() -> Iterator[dict[str, ValkeyServer]]:
    entry = images.resolve_image(images.newest_image())
    assert entry is not None, "the newest Valkey image is not installed (python -m valkey_testbed build)"
    base = server_base_dir()
    started = {
        host: start_server(
            entry, host, PORT, base_dir=base, password=PASSWORD, config={"masterauth": PASSWORD}
        )
        for host in (P0, P1, R0)
    }
    try:
        started[R0].command("REPLICAOF", P0, str(PORT))
        yield started
    finally:
        stop_servers(list(started.values()))


@pytest.fixture
def pauser(nodes: dict[str, ValkeyServer]) -> Iterator[Callable[[str], None]]:
    """The backup's user on every node, with CLIENT PAUSE everywhere; refuse(host) takes it away there."""
    for server in nodes.values():
        server.command("ACL", "SETUSER", PAUSER, "reset", "on", f">{PASSWORD}", "~*", "&*", "+@all")

    def refuse(host: str) -> None:
        nodes[host].command("ACL", "SETUSER", PAUSER, "-client|pause")

    yield refuse
    for server in nodes.values():
        server.command("CLIENT", "UNPAUSE")


def admin() -> AdminClient:
    return AdminClient(
        credentials=Credentials(username=PAUSER, password=PASSWORD),
        allowed_networks=LOOPBACK_NETWORKS,
        port=PORT,
    )


def shard_sources() -> tuple[ShardSource, ...]:
    """Shard 0 read from its replica, shard 1 from its primary."""

    def source(index: int, pod: str, ip: str, role: NodeRole, primary: str, primary_ip: str) -> ShardSource:
        slots = (SlotRange(0, 16383),)
        return ShardSource(
            index=index,
            pod=pod,
            ip=ip,
            role=role,
            slots=slots,
            version="9.1.2",
            primary_pod=primary,
            primary_ip=primary_ip,
        )

    return (source(0, "r0", R0, NodeRole.REPLICA, "p0", P0), source(1, "p1", P1, NodeRole.PRIMARY, "p1", P1))


def client(host: str) -> valkey.asyncio.Valkey:
    return valkey.asyncio.Valkey(host=host, port=PORT, password=PASSWORD, socket_timeout=10)


async def timed(write: Awaitable[object]) -> float:
    start = time.monotonic()
    await write
    return time.monotonic() - start


async def run(
    forks: Callable[[dict[int, asyncio.Event]], Awaitable[None]],
) -> float | BackupFailed:
    """hold_writes over the two shards, the sources' side played by forks once it is let go."""
    found = shard_sources()
    go = asyncio.Event()
    forked = {source.index: asyncio.Event() for source in found}

    async def sources() -> None:
        await go.wait()
        await forks(forked)

    side = asyncio.create_task(sources())
    try:
        return await hold_writes(admin(), found, go, forked)
    except BackupFailed as failed:
        return failed
    finally:
        side.cancel()


async def linked(replica: valkey.asyncio.Valkey) -> None:
    async def check() -> bool | NotYet:
        status = (await replica.info("replication")).get("master_link_status")
        return status == "up" or NotYet(status)

    await eventually(check, "r0 replicating p0", timeout=30)


async def test_writes_wait_while_the_sources_fork_and_the_replica_source_has_its_primarys_offset(
    pauser: Callable[[str], None],
) -> None:
    p0, p1, r0 = client(P0), client(P1), client(R0)
    await linked(r0)
    await p0.set("before", "x" * 20_000_000)  # something for the replica to catch up with
    seen: dict[str, object] = {}

    async def forks(forked: dict[int, asyncio.Event]) -> None:
        primary = (await p0.info("replication"))["master_repl_offset"]
        replica = (await r0.info("replication"))["slave_repl_offset"]
        seen["offsets"] = (primary, replica)
        late_write = asyncio.create_task(timed(p1.set("during", "1")))
        await asyncio.sleep(0.3)
        seen["write held"] = not late_write.done()
        seen["read"] = await timed(p1.get("before"))  # reads go on
        seen["late write"] = late_write
        for event in forked.values():
            event.set()

    pause = await run(forks)
    assert isinstance(pause, float), pause
    assert seen["offsets"][0] == seen["offsets"][1], "the forks were let go before r0 reached p0"  # type: ignore[index]
    assert seen["write held"], "a write on a paused primary was not held"
    assert seen["read"] < QUICK  # type: ignore[operator]
    held = await seen["late write"]  # type: ignore[misc]
    assert 0.3 <= held <= pause + QUICK, (held, pause)
    assert 0.3 <= pause < instant.PAUSE_TIMEOUT_MS / 1000
    assert await timed(p0.set("after", "1")) < QUICK
    assert await p1.get("during") == b"1"


async def test_a_node_refusing_the_pause_fails_the_backup_and_leaves_no_primary_paused(
    pauser: Callable[[str], None],
) -> None:
    pauser(P1)
    went: list[bool] = []

    async def forks(forked: dict[int, asyncio.Event]) -> None:
        went.append(True)

    failed = await run(forks)
    assert isinstance(failed, BackupFailed) and failed.reason == "WritePauseFailed", failed
    assert "NOPERM" in failed.message or "permission" in failed.message, failed.message
    assert not went, "the sources were let go although a primary was not paused"
    for host in (P0, P1):
        assert await timed(client(host).set("after-refusal", "1")) < QUICK, f"{host} is still paused"


async def test_forks_that_never_come_fail_the_backup_when_the_pause_ends_and_nothing_stays_paused(
    pauser: Callable[[str], None],
) -> None:
    async def forks(forked: dict[int, asyncio.Event]) -> None:
        forked[0].set()  # shard 1's source never forks

    started = time.monotonic()
    failed = await run(forks)
    took = time.monotonic() - started
    assert isinstance(failed, BackupFailed) and failed.reason == "InstantNotReached", failed
    assert "every source forked" in failed.message
    assert instant.PAUSE_TIMEOUT_MS / 1000 <= took < instant.PAUSE_TIMEOUT_MS / 1000 + QUICK
    for host in (P0, P1):
        assert await timed(client(host).set("after-timeout", "1")) < QUICK, f"{host} is still paused"
