"""A node's append-only history archived as it is written, and replayed to a chosen second.

A real valkey-server (appendonly, aof-timestamp-enabled) takes numbered writes, each
acknowledgement timed, while the archiver (valkey_operator/archiver) ships its multi-part AOF
to the test bed's S3 server every half second, and two rewrites rotate the files under it.
Then the history is fetched back from the bucket only, cut with `valkey-check-aof
--truncate-to-timestamp` at a second in the middle of the writes, and loaded by a fresh
valkey-server: every key acknowledged before that second ended is there, none written after.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
import valkey.asyncio
from archive_support import cut_at, fetch_history, loaded

from valkey_operator.archiver import layout
from valkey_operator.archiver.follower import AofFollower
from valkey_operator.archiver.resume import Resume, resume_from
from valkey_operator.archiver.shipper import Shipper
from valkey_operator.objectstore import Destination, ObjectStore, S3Credentials, open_store
from valkey_testbed import images
from valkey_testbed.images import ImageEntry
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.operatorproc import TEST_BED_ENDPOINTS
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server, stop_servers
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PASSWORD = "archive-password"
HOST, RESTORED_HOST, COMMAND_HOST, GAP_HOST = "127.0.93.31", "127.0.93.32", "127.0.93.33", "127.0.93.34"
FETCHED_HOST = "127.0.93.35"
WRITES = 200_000
"""Bounds the writer; it stops sooner, when the archiving steps are done (about 5 s)."""
PHASE = 1.0
"""Seconds of writes between two steps of the archiving."""
SHIP_INTERVAL = 0.5
RESTART_PAUSE = 0.7
"""Writes go on this long with no archiver, as while its container restarts."""
PREFIX = layout.node_prefix("ns", "cache", "node-0")


def aof_dir(server: ValkeyServer) -> Path:
    directory = server.command("CONFIG", "GET", "dir")[1].decode()  # type: ignore[index,union-attr]
    return Path(directory) / "appendonlydir"


async def write_numbered(client: valkey.asyncio.Valkey, done: asyncio.Event) -> list[tuple[float, float]]:
    """(sent, acknowledged) Unix times of key:<i>, for i in order, until done (or WRITES)."""
    times: list[tuple[float, float]] = []
    for index in range(WRITES):
        if done.is_set():
            break
        sent = time.time()
        await client.set(f"key:{index}", index)
        times.append((sent, time.time()))
        if index % 50 == 0:
            await asyncio.sleep(0.001)  # the archiver shares this loop
    return times


async def rewrite(client: valkey.asyncio.Valkey, directory: Path, seq: int) -> None:
    """BGREWRITEAOF, until the manifest names its new base (the rewrite finished and the node
    deleted the files it made obsolete)."""
    await client.execute_command("BGREWRITEAOF")  # type: ignore[no-untyped-call]

    def finished() -> bool | NotYet:
        manifest = (directory / "appendonly.aof.manifest").read_text()
        return f"appendonly.aof.{seq}.base.rdb" in manifest or NotYet(manifest)

    await eventually(finished, f"rewrite {seq} finished", 30, interval=0.05)


@attrs.frozen
class Archived:
    times: list[tuple[float, float]]
    first: Shipper
    second: Shipper
    resume: Resume


async def archive_through_a_restart(
    store: ObjectStore, client: valkey.asyncio.Valkey, directory: Path
) -> Archived:
    """Under numbered writes: an archiver, a rewrite, the archiver stopped for RESTART_PAUSE (as
    while its container restarts) and started again from what the bucket holds, another rewrite;
    the writes end, and the archiver ships once more. Each step is waited for, not timed."""
    done = asyncio.Event()
    writing = asyncio.create_task(write_numbered(client, done))
    try:
        first = Shipper(AofFollower(directory), store, PREFIX)
        stop_first = asyncio.Event()
        running = asyncio.create_task(first.run(SHIP_INTERVAL, stop_first))
        await asyncio.sleep(PHASE)
        await rewrite(client, directory, 2)
        await asyncio.sleep(PHASE)
        stop_first.set()
        await running
        first.follower.close()
        await asyncio.sleep(RESTART_PAUSE)
        node = store.key(*PREFIX)
        resume = resume_from(await store.list_objects(node), node)
        second = Shipper(AofFollower(directory, resume=resume), store, PREFIX)
        stop_second = asyncio.Event()
        running = asyncio.create_task(second.run(SHIP_INTERVAL, stop_second))
        await asyncio.sleep(PHASE)
        await rewrite(client, directory, 3)
        await asyncio.sleep(PHASE)
    finally:
        done.set()
        times = await writing
    stop_second.set()
    await running
    second.follower.close()
    return Archived(times, first, second, resume)


def replayed(
    entry: ImageEntry, server: ObjectStoreServer, bucket: str, gaps: list[int], cut: int
) -> tuple[set[int], tuple[int, list[int]]]:
    """The indexes of the keys a fresh server holds once it loaded the history fetched from the
    bucket (the chain after gaps) and cut at second cut; and the chain's base and files."""
    restored_dir = server_base_dir() / "restore"
    history = restored_dir / "appendonlydir"
    base, incrs = fetch_history(server.client(), bucket, "/".join(("archive-test", *PREFIX)), history, gaps)
    cut_at(history, base, incrs, cut)
    with loaded(entry, restored_dir, RESTORED_HOST, PASSWORD) as restored:
        keys = restored.command("KEYS", "key:*")
    return {int(key.decode().split(":")[1]) for key in keys}, (base, incrs)  # type: ignore[union-attr]


async def test_an_archived_history_replays_to_a_chosen_second(object_store: ObjectStoreServer) -> None:
    entry = images.resolve_image(images.newest_image())
    assert entry is not None, "the newest Valkey image is not installed (python -m valkey_testbed build)"
    config = {"appendonly": "yes", "aof-timestamp-enabled": "yes", "appendfsync": "everysec"}
    source = start_server(entry, HOST, base_dir=server_base_dir(), password=PASSWORD, config=config)
    bucket = object_store.create_bucket()
    creds = S3Credentials(
        access_key_id=object_store.access_key_id, secret_access_key=object_store.secret_access_key
    )
    try:
        client = valkey.asyncio.Valkey(host=HOST, port=source.port, password=PASSWORD)
        async with open_store(
            Destination(endpoint=object_store.endpoint, bucket=bucket, path="archive-test"),
            creds,
            endpoints=TEST_BED_ENDPOINTS,
        ) as store:
            archived = await archive_through_a_restart(store, client, aof_dir(source))
        await client.aclose()
        times, first, second, resume = archived.times, archived.first, archived.second, archived.resume
        assert first.gaps == [] and second.gaps == []
        assert resume.newest_incr == 2 and resume.shipped[2] > 0, resume
        assert second.archived_until is not None and second.archived_until >= times[-1][1]
        manifest = (aof_dir(source) / "appendonly.aof.manifest").read_text()
        assert "appendonly.aof.3.incr.aof" in manifest, f"two rewrites rotated the files: {manifest}"
    finally:
        stop_servers([source])

    cut = int(times[len(times) // 2][0])
    present, chain = replayed(entry, object_store, bucket, [], cut)
    assert chain == (1, [1, 2, 3]), chain
    before = {index for index, (_, acked) in enumerate(times) if acked < cut + 1}
    after = {index for index, (sent, _) in enumerate(times) if sent >= cut + 1}
    print(
        f"[archive] {len(times)} writes over {times[-1][1] - times[0][0]:.1f}s, archiver restarted "
        f"({RESTART_PAUSE}s down) at incr {resume.newest_incr} byte {resume.shipped[resume.newest_incr]}; "
        f"cut at {cut}: {len(before)} acknowledged before its end, {len(present)} restored"
    )
    assert before, "the cut is after some writes"
    assert before <= present, f"{len(before - present)} writes acknowledged before the cut are missing"
    assert not present & after, f"{len(present & after)} writes sent after the cut are present"
    fetched = restore_fetched(entry, object_store, bucket, chain[0], cut)
    assert fetched == present, (
        f"restore-fetch --archive: {len(fetched - present)} keys more, {len(present - fetched)} fewer"
    )


def restore_fetched(
    entry: ImageEntry, server: ObjectStoreServer, bucket: str, base: int, cut: int
) -> set[int]:
    """The indexes of the keys a fresh server holds once `valkey-operator restore-fetch --archive`
    (a restoring pod's init container, run as its own process) put the history cut at cut in place."""
    data_dir = server_base_dir() / "restore-fetch"
    data_dir.mkdir()
    argv = [
        *(sys.executable, "-m", "valkey_operator", "restore-fetch"),
        *("--endpoint", server.endpoint, "--bucket", bucket, "--layout", "aof", "--dir", str(data_dir)),
        *("--archive", "/".join(("archive-test", *PREFIX)), "--base-seq", str(base), "--until", str(cut)),
    ]
    environ = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": server.secret_access_key,
    }
    result = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    with loaded(entry, data_dir, FETCHED_HOST, PASSWORD) as restored:
        keys = restored.command("KEYS", "key:*")
    return {int(key.decode().split(":")[1]) for key in keys}  # type: ignore[union-attr]


async def test_the_archive_command_ships_until_sigterm_and_records_its_progress(
    object_store: ObjectStoreServer,
) -> None:
    """`valkey-operator archive` as a pod would run it: credentials from the environment, the node
    named by --node (a standalone server has no nodes.conf), SIGTERM ships once more and exits 0."""
    entry = images.resolve_image(images.newest_image())
    assert entry is not None
    config = {"appendonly": "yes", "aof-timestamp-enabled": "yes"}
    source = start_server(entry, COMMAND_HOST, base_dir=server_base_dir(), password=PASSWORD, config=config)
    bucket = object_store.create_bucket()
    data_dir = aof_dir(source).parent
    argv = [
        sys.executable, "-m", "valkey_operator", "archive", "--dir", str(data_dir), "--node", "node-0",
        "--endpoint", object_store.endpoint, "--bucket", bucket, "--path", "archive-test",
        "--namespace", "ns", "--cluster", "cache", "--interval", "0.2", "--progress-every", "60",
        "--endpoint-allowed-networks", "127.0.0.0/8",
    ]  # fmt: skip
    environ = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": object_store.access_key_id,
        "AWS_SECRET_ACCESS_KEY": object_store.secret_access_key,
    }
    archiver = await asyncio.create_subprocess_exec(
        *argv, env=environ, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    s3 = object_store.client()
    prefix = "archive-test/ns/cache/archive/node-0/"

    def progress() -> dict[str, Any] | NotYet:
        try:
            body = s3.get_object(Bucket=bucket, Key=prefix + "progress.json")["Body"].read()
        except s3.exceptions.NoSuchKey:
            return NotYet("no progress.json yet")
        found: dict[str, Any] = json.loads(body)
        return found

    try:
        await eventually(progress, "the archiver's first progress", 60)  # started, its signals handled
        client = valkey.asyncio.Valkey(host=COMMAND_HOST, port=source.port, password=PASSWORD)
        for index in range(200):
            await client.set(f"key:{index}", index)
        last_ack = time.time()
        await client.aclose()
        await asyncio.sleep(0.5)  # a look or two while the archiver runs
    finally:
        archiver.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            output = (await archiver.communicate())[0].decode()
        stop_servers([source])
    assert archiver.returncode == 0, output
    final = progress()
    assert not isinstance(final, NotYet)
    assert final["archivedUntil"] >= last_ack and final["gaps"] == [], final
    keys = {
        item["Key"][len(prefix) :] for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]
    }
    assert "0000000001/base" in keys and "0000000001/incr/0000000000000000" in keys, keys


async def test_a_rewrite_while_the_archiver_is_down_is_a_gap_and_the_history_goes_on_from_its_base(
    object_store: ObjectStoreServer,
) -> None:
    """A rewrite that finishes while the archiver is down deletes the file it was reading: the
    tail after what was stored is gone. The restarted archiver says so (a gap at that file, in
    progress.json) and ships the new base; a replay then starts there and is whole after it."""
    entry = images.resolve_image(images.newest_image())
    assert entry is not None
    config = {"appendonly": "yes", "aof-timestamp-enabled": "yes", "appendfsync": "everysec"}
    source = start_server(entry, GAP_HOST, base_dir=server_base_dir(), password=PASSWORD, config=config)
    bucket = object_store.create_bucket()
    creds = S3Credentials(
        access_key_id=object_store.access_key_id, secret_access_key=object_store.secret_access_key
    )
    directory = aof_dir(source)
    try:
        client = valkey.asyncio.Valkey(host=GAP_HOST, port=source.port, password=PASSWORD)
        async with open_store(
            Destination(endpoint=object_store.endpoint, bucket=bucket, path="archive-test"),
            creds,
            endpoints=TEST_BED_ENDPOINTS,
        ) as store:
            done = asyncio.Event()
            writing = asyncio.create_task(write_numbered(client, done))
            try:
                first = Shipper(AofFollower(directory), store, PREFIX)
                await first.ship_once()
                first.follower.close()
                await asyncio.sleep(PHASE)
                await rewrite(client, directory, 2)  # the archiver is down
                rewritten = time.time()
                node = store.key(*PREFIX)
                second = Shipper(
                    AofFollower(directory, resume=resume_from(await store.list_objects(node), node)),
                    store,
                    PREFIX,
                )
                await second.ship_once()
                await asyncio.sleep(PHASE * 2)
            finally:
                done.set()
                times = await writing
            await second.ship_once()
            second.follower.close()
        await client.aclose()
    finally:
        stop_servers([source])
    assert second.gaps == [1], second.gaps
    after_rewrite = [sent for sent, _ in times if sent > rewritten + 1]
    cut = int(after_rewrite[len(after_rewrite) // 2])
    present, chain = replayed(entry, object_store, bucket, second.gaps, cut)
    assert chain == (2, [2]), chain
    before = {index for index, (_, acked) in enumerate(times) if acked < cut + 1}
    after = {index for index, (sent, _) in enumerate(times) if sent >= cut + 1}
    print(
        f"[archive] gap at incr 1; chain from base 2; cut at {cut}: {len(before)} before, "
        f"{len(present)} restored"
    )
    assert before <= present, f"{len(before - present)} writes acknowledged before the cut are missing"
    assert not present & after, f"{len(present & after)} writes sent after the cut are present"
