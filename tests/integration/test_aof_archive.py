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
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import valkey.asyncio

from valkey_operator.archiver import layout
from valkey_operator.archiver.follower import AofFollower
from valkey_operator.archiver.manifest import AofFile, FileKind, render_manifest
from valkey_operator.archiver.replay import replay_chain
from valkey_operator.archiver.resume import Resume, resume_from
from valkey_operator.archiver.shipper import Shipper
from valkey_operator.archiver.timestamps import TimestampScanner
from valkey_operator.objectstore import Destination, ObjectStore, S3Credentials, open_store
from valkey_testbed import images
from valkey_testbed.objectstore import ObjectStoreServer
from valkey_testbed.operatorproc import TEST_BED_ENDPOINTS
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server, stop_servers

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PASSWORD = "archive-password"
HOST, RESTORED_HOST, COMMAND_HOST = "127.0.93.31", "127.0.93.32", "127.0.93.33"
WRITES = 100_000
"""Bounds the writer; it stops sooner, after WRITING seconds."""
WRITING = 5.0
SHIP_INTERVAL = 0.5
RESTART_PAUSE = 0.7
"""Writes go on this long with no archiver, as while its container restarts."""
PREFIX = layout.node_prefix("ns", "cache", "node-0")


def aof_dir(server: ValkeyServer) -> Path:
    directory = server.command("CONFIG", "GET", "dir")[1].decode()  # type: ignore[index,union-attr]
    return Path(directory) / "appendonlydir"


async def write_numbered(client: valkey.asyncio.Valkey) -> list[tuple[float, float]]:
    """(sent, acknowledged) Unix times of key:<i>, for i in order, for WRITING seconds."""
    times: list[tuple[float, float]] = []
    stop = time.time() + WRITING
    rewrites = {int(WRITING * 0.3): False, int(WRITING * 0.6): False}
    for index in range(WRITES):
        sent = time.time()
        if sent >= stop:
            break
        await client.set(f"key:{index}", index)
        times.append((sent, time.time()))
        elapsed = int(sent - (stop - WRITING))
        if elapsed in rewrites and not rewrites[elapsed]:
            rewrites[elapsed] = True
            await client.execute_command("BGREWRITEAOF")  # type: ignore[no-untyped-call]
        if index % 50 == 0:
            await asyncio.sleep(0.001)  # the shipper shares this loop
    return times


async def ship_with_a_restart(
    store: ObjectStore, directory: Path, written: asyncio.Event
) -> tuple[Shipper, Shipper, Resume]:
    """Ship for part of the writes, stop (a sidecar's restart) while writes go on, then go on
    from what the bucket holds until the writes are done (and a last poll after)."""
    first = Shipper(AofFollower(directory), store, PREFIX)
    stop = asyncio.Event()
    running = asyncio.create_task(first.run(SHIP_INTERVAL, stop))
    await asyncio.sleep(WRITING * 0.4)
    stop.set()
    await running
    first.follower.close()
    await asyncio.sleep(RESTART_PAUSE)
    node = store.key(*PREFIX)
    resume = resume_from(await store.list_objects(node), node)
    second = Shipper(AofFollower(directory, resume=resume), store, PREFIX)
    running = asyncio.create_task(second.run(SHIP_INTERVAL, written))
    await running
    second.follower.close()
    return first, second, resume


def fetch_history(server: ObjectStoreServer, bucket: str, target: Path) -> tuple[int, list[int]]:
    """The archived history the replay chain names (replay.py), rebuilt as a multi-part AOF
    directory: its base and each incremental file, the concatenation of its segments."""
    client = server.client()
    prefix = "/".join(("archive-test", *PREFIX))
    listing = [
        (item["Key"], int(item["Size"]))
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        for item in page.get("Contents", [])
    ]
    chain = replay_chain(listing, prefix)
    assert chain is not None, listing

    def body(key: str) -> bytes:
        data: bytes = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        return data

    (target / f"appendonly.aof.{chain.base_seq}.base.rdb").write_bytes(body(chain.base_key))
    for seq, keys in chain.incrs:
        (target / f"appendonly.aof.{seq}.incr.aof").write_bytes(b"".join(body(key) for key in keys))
    return chain.base_seq, [seq for seq, _ in chain.incrs]


def cut_at(directory: Path, base: int, incrs: list[int], second: int) -> None:
    """Keep the incremental files up to the one holding the first annotation after `second`
    (valkey-check-aof truncates only the last file), write their manifest, and cut it there."""
    kept = []
    for seq in incrs:
        kept.append(seq)
        scanner = TimestampScanner()
        scanner.feed((directory / f"appendonly.aof.{seq}.incr.aof").read_bytes())
        if scanner.last is not None and scanner.last > second:
            break
    for seq in set(incrs) - set(kept):
        (directory / f"appendonly.aof.{seq}.incr.aof").unlink()
    files = (
        AofFile(f"appendonly.aof.{base}.base.rdb", base, FileKind.BASE),
        *(AofFile(f"appendonly.aof.{seq}.incr.aof", seq, FileKind.INCR) for seq in kept),
    )
    (directory / "appendonly.aof.manifest").write_text(render_manifest(files))
    entry = images.resolve_image(images.newest_image())
    assert entry is not None
    check_aof = directory.parent / "valkey-check-aof"  # the server binary runs as the tool by this name
    shutil.copy(entry.executable("valkey-server"), check_aof)
    # The last kept file alone: in a manifest's mode valkey-check-aof 9.1.2 checks the base first,
    # and takes an RDB preamble for RESP unless it begins with REDIS (9.x writes VALKEY080).
    result = subprocess.run(
        [
            str(check_aof),
            "--truncate-to-timestamp",
            str(second),
            str(directory / f"appendonly.aof.{kept[-1]}.incr.aof"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    check_aof.unlink()


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
            written = asyncio.Event()
            shipping = asyncio.create_task(ship_with_a_restart(store, aof_dir(source), written))
            try:
                times = await write_numbered(client)
                last_ack = times[-1][1]
            finally:
                written.set()
                first, second, resume = await shipping
        await client.aclose()
        assert first.gaps == [] and second.gaps == []
        assert resume.newest_incr is not None and resume.shipped[resume.newest_incr] > 0, resume
        assert second.archived_until is not None and second.archived_until >= last_ack
        manifest = (aof_dir(source) / "appendonly.aof.manifest").read_text()
        assert "appendonly.aof.3.incr.aof" in manifest, f"two rewrites rotated the files: {manifest}"
    finally:
        stop_servers([source])

    restored_dir = server_base_dir() / "restore"
    history = restored_dir / "appendonlydir"
    history.mkdir(parents=True)
    base, incrs = fetch_history(object_store, bucket, history)
    assert base == 1 and incrs == [1, 2, 3], (base, incrs)
    cut = int(times[len(times) // 2][0])
    cut_at(history, base, incrs, cut)
    os.chmod(restored_dir.parent, 0o711)
    shutil.chown(restored_dir, entry.user, entry.group)
    for path in restored_dir.rglob("*"):
        shutil.chown(path, entry.user, entry.group)
    restored = start_server(
        entry,
        RESTORED_HOST,
        base_dir=restored_dir.parent,
        password=PASSWORD,
        config={"appendonly": "yes", "dir": str(restored_dir)},
    )
    try:
        present = {int(key.decode().split(":")[1]) for key in restored.command("KEYS", "key:*")}  # type: ignore[union-attr]
    finally:
        stop_servers([restored])
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
    try:
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
    s3 = object_store.client()
    prefix = "archive-test/ns/cache/archive/node-0/"
    progress = json.loads(s3.get_object(Bucket=bucket, Key=prefix + "progress.json")["Body"].read())
    assert progress["archivedUntil"] >= last_ack and progress["gaps"] == [], progress
    keys = {
        item["Key"][len(prefix) :] for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]
    }
    assert "0000000001/base" in keys and "0000000001/incr/0000000000000000" in keys, keys
