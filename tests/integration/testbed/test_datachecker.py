"""The data checker against a real hand-built cluster: 3 primaries with one replica each (WAIT 1)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from valkey_testbed.datachecker import DataChecker, NonLoopbackError, ReplyError, key_slot
from valkey_testbed.images import ImageEntry, install_images, resolve_image, tls_image
from valkey_testbed.valkeyproc import HandCluster, ValkeyServer, running_cluster, write_tls_files

pytestmark = pytest.mark.timeout(180)

PRIMARIES = ("127.0.43.1", "127.0.43.2", "127.0.43.3")
REPLICAS = ("127.0.43.4", "127.0.43.5", "127.0.43.6")


def image() -> ImageEntry:
    """The TLS image (one test runs TLS): asked for by role, after the install that decides it."""
    install_images(progress=lambda line: None)  # a no-op once built
    reference = tls_image()
    entry = resolve_image(reference)
    assert entry is not None, f"{reference} is not installed: run python -m valkey_testbed build"
    return entry


@pytest.fixture(scope="module")
def cluster() -> Iterator[HandCluster]:
    """Shared by this module: tests use their own key prefixes (each checker has a run id)."""
    with running_cluster(image(), PRIMARIES, REPLICAS) as formed:
        yield formed


def owner_of(cluster: HandCluster, key: bytes) -> ValkeyServer:
    """The primary that holds key, asked of the cluster itself (not the checker)."""
    for server in cluster.primaries:
        reply = server.command("GET", key)
        if not (isinstance(reply, ReplyError) and reply.kind == "MOVED"):
            return server
    raise AssertionError(f"no primary owns {key!r}")


async def test_write_then_verify(cluster: HandCluster) -> None:
    async with DataChecker(cluster.seeds, replicas=1) as checker:
        assert set(checker.primaries) == {server.address for server in cluster.primaries}
        assert set(checker.primaries.values()) == {1}
        report = await checker.write(3000)
        assert (report.acknowledged, report.unacknowledged, report.failed) == (3000, 0, 0), report
        verified = await checker.verify()
        assert verified.ok, verified
        assert verified.checked == 3000


async def test_verify_reports_a_key_deleted_behind_its_back(cluster: HandCluster) -> None:
    async with DataChecker(cluster.seeds, replicas=1) as checker:
        report = await checker.write(2000)
        assert report.acknowledged == 2000, report
        deleted, changed = sorted(checker.acknowledged)[100], sorted(checker.acknowledged)[200]
        # A separate connection, not the checker's: delete one key, overwrite another.
        assert owner_of(cluster, deleted).command("DEL", deleted) == 1
        assert owner_of(cluster, changed).command("SET", changed, b"tampered") == b"OK"
        verified = await checker.verify()
        assert verified.missing == [deleted.decode()]
        assert verified.wrong == {changed.decode(): (checker.acknowledged[changed], b"tampered")}
        assert not verified.unreadable
        assert not verified.ok


def empty_slot_tag(cluster: HandCluster) -> bytes:
    """A hash tag whose slot holds no keys yet (other tests' keys land anywhere)."""
    for index in range(100):
        tag = b"{moved-%d}" % index
        if owner_of(cluster, tag).command("CLUSTER", "COUNTKEYSINSLOT", key_slot(tag)) == 0:
            return tag
    raise AssertionError("no empty slot found")


async def test_follows_moved_after_a_slot_changes_owner(cluster: HandCluster) -> None:
    tag = empty_slot_tag(cluster)
    async with DataChecker(cluster.seeds, replicas=1, prefix=tag.decode()) as checker:
        slot = key_slot(tag)
        old = owner_of(cluster, tag)
        new = next(server for server in cluster.primaries if server is not old)
        new_id = new.command("CLUSTER", "MYID")
        assert isinstance(new_id, bytes)
        # Hand the (empty) slot over, as the last step of a migration does; the checker's map is now stale.
        for server in [new, old, *(s for s in cluster.primaries if s not in (new, old))]:
            assert server.command("CLUSTER", "SETSLOT", slot, "NODE", new_id) == b"OK"
        report = await checker.write(50)
        assert report.acknowledged == 50, report
        assert report.errors.get("MOVED", 0) >= 1, report
        assert owner_of(cluster, tag) is new
        assert (await checker.verify()).ok


async def test_continuous_writer_reports_the_longest_gap(cluster: HandCluster) -> None:
    async with DataChecker(cluster.seeds, replicas=1) as checker:
        paused = cluster.primaries[1]
        stop = asyncio.Event()
        writer = asyncio.create_task(checker.run_writer(max_keys=200_000, duration=20.0, stop=stop))
        await asyncio.sleep(1.0)
        # Freeze one primary (well under the 5 s node timeout, so no failover): writes stall.
        os.kill(paused.record.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(1.5)
        finally:
            os.kill(paused.record.pid, signal.SIGCONT)
        await asyncio.sleep(1.0)
        stop.set()
        report = await asyncio.wait_for(writer, 30)
        assert report.acknowledged > 100 and report.failed == 0, report
        assert 1.2 <= report.longest_gap < 5.0, report
        assert 1.0 <= report.longest_gap_ended_at <= 4.5, report
        paused_ranges = ",".join(f"{a}-{b}" for a, b in checker.slot_ranges()[paused.address])
        assert report.gaps_by_slots[paused_ranges] >= 1.2, report
        assert (await checker.verify()).ok


async def test_tls_and_auth(tmp_path: Path) -> None:
    ip = "127.0.43.20"
    files = write_tls_files(tmp_path, [ip])
    with running_cluster(image(), [ip], password="s3cret", tls=files) as single:
        context = files.client_context()
        async with DataChecker(
            single.seeds, replicas=0, username="default", password="s3cret", ssl=context
        ) as checker:
            report = await checker.write(500)
            assert report.acknowledged == 500, report
            assert (await checker.verify()).ok
        with pytest.raises(ConnectionError, match=r"WRONGPASS|AUTH"):
            async with DataChecker(single.seeds, replicas=0, password="wrong", ssl=context):
                pass


def test_refuses_addresses_outside_loopback() -> None:
    for host in ("10.0.0.1", "192.168.1.1", "localhost", "::1"):
        with pytest.raises(NonLoopbackError):
            DataChecker([(host, 6379)])


async def test_a_refresh_does_not_wait_for_a_node_that_answers_nothing(cluster: HandCluster) -> None:
    """The first seeds: four listeners that close every connection at once (a failure the refresh
    must move on from at once, not after a stagger each), then one that never reads (a server
    stopping or stalled: the kernel still completes the handshake). The slot map still comes from
    the cluster's seeds after them within a second."""

    def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    closing = [await asyncio.start_server(close_at_once, "127.0.43.9", 0) for _ in range(4)]
    silent = await asyncio.start_server(lambda reader, writer: None, "127.0.43.9", 0)
    seeds = [server.sockets[0].getsockname()[:2] for server in [*closing, silent]]
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        async with DataChecker([*seeds, *cluster.seeds], replicas=1) as checker:  # its first refresh
            took = loop.time() - started
            assert set(checker.primaries) == {server.address for server in cluster.primaries}
    finally:
        for server in [*closing, silent]:
            server.close()
    assert took < 1.0, f"the refresh took {took:.2f}s past nodes that fail or answer nothing"
