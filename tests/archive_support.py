"""A node's archived history as a restore will use it: fetched from the bucket alone, cut at a second,
loaded by a fresh valkey-server. Shared by the archiver's integration test and the end-to-end test
of a cluster that archives."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from valkey_operator.archiver.cut import base_name, cut, incr_name, write_manifest
from valkey_operator.archiver.replay import replay_chain
from valkey_testbed import images
from valkey_testbed.images import ImageEntry
from valkey_testbed.valkeyproc import ValkeyServer, start_server, stop_servers
from valkey_testbed.wait import NotYet, eventually_blocking


def fetch_history(s3: Any, bucket: str, prefix: str, target: Path, gaps: list[int]) -> tuple[int, list[int]]:
    """The archived history under prefix (a node's folder) that the replay chain names (replay.py),
    rebuilt in target as the multi-part AOF directory valkey-server loads: its base, each
    incremental file (the concatenation of its segments) and the manifest naming them. s3 is a
    boto3 client of the test bed's S3 server."""
    listing = [
        (item["Key"], int(item["Size"]))
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        for item in page.get("Contents", [])
    ]
    chain = replay_chain(listing, prefix, gaps)
    assert chain is not None, listing

    def body(key: str) -> bytes:
        data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return data

    target.mkdir(parents=True, exist_ok=True)
    (target / base_name(chain.base_seq)).write_bytes(body(chain.base_key))
    for seq, keys in chain.incrs:
        (target / incr_name(seq)).write_bytes(b"".join(body(key) for key in keys))
    incrs = [seq for seq, _ in chain.incrs]
    write_manifest(target, chain.base_seq, incrs)
    return chain.base_seq, incrs


def cut_at(directory: Path, base: int, incrs: list[int], second: int) -> None:
    """cut.py on the fetched history, checked against `valkey-check-aof --truncate-to-timestamp`
    on a copy of the file it truncated (the test bed's valkey-server is the tool when it runs by
    that name): the same bytes, so a restore needs no Valkey binary to cut."""
    reference = directory.parent / "checked-by-valkey-check-aof"
    shutil.copytree(directory, reference)
    kept = cut(directory, base, incrs, second)
    entry = images.resolve_image(images.newest_image())
    assert entry is not None
    check_aof = directory.parent / "valkey-check-aof"
    shutil.copy(entry.executable("valkey-server"), check_aof)
    last = incr_name(kept[-1])
    try:
        argv = [str(check_aof), "--truncate-to-timestamp", str(second), str(reference / last)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    finally:
        check_aof.unlink()
    if result.returncode != 0:  # the tool refuses a file with nothing before the second
        assert "has nothing before timestamp" in result.stdout + result.stderr, result
        assert (directory / last).stat().st_size == 0
    else:
        assert (directory / last).read_bytes() == (reference / last).read_bytes(), result.stdout
    shutil.rmtree(reference)


@contextlib.contextmanager
def loaded(entry: ImageEntry, data_dir: Path, host: str, password: str) -> Iterator[ValkeyServer]:
    """A fresh standalone valkey-server on data_dir (holding appendonlydir/), once it has loaded it;
    stopped on exit."""
    shutil.chown(data_dir, entry.user, entry.group)
    for path in data_dir.rglob("*"):
        shutil.chown(path, entry.user, entry.group)
    config = {"appendonly": "yes", "dir": str(data_dir)}
    server = start_server(entry, host, base_dir=data_dir.parent, password=password, config=config)
    try:
        # start_server returns once the server answers, LOADING included: a long history may still
        # be replaying then, and a KEYS would get -LOADING (a cold CI met it).
        eventually_blocking(lambda: server.command("PING") == b"PONG" or NotYet("loading"), "loaded", 60)
        yield server
    finally:
        stop_servers([server])
