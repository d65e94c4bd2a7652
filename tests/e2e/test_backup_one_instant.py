"""A OneInstant backup holds every shard at one instant, end to end (SPEC 1.14, issue 41 item 3).

An application on the valkey-py cluster client writes pairs in sequence, key
`a:<i>` then key `b:<i>`, the a's in shard 0 and the b's in shard 2 (hash tags
pick the slots), back to back (thousands of pairs a second), bounded. Under that load
OneInstant ValkeyBackups of the 3x1 cluster are taken one after another
(every primary's writes paused while every shard's source forks). Each must
hold one moment of the writer: each shard's snapshot is a prefix of its own
keys (a:0.., b:0..), so its key counts (read from each RDB's own header) say
it: the a's at most one ahead of the b's, never behind. The last is restored
into a new cluster, where every b's a must be there, the a's at most one
ahead. Shards forked at different moments break it: a b without its a
(shard 2 forked later), or a's two or more ahead (shard 0 forked later); a
few backups make a fork skew of a few milliseconds show.

Lines starting with `[instant]` report the measured pause (run with -s or -rP).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest
from backup_support import destination, finished, restore_cluster, start_backup, storage_secret
from chart_operator import ChartOperator
from cluster_support import Catalog, formed_cluster, settled
from keys_support import cluster_client

from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.slots import even_split
from valkey_testbed.datachecker import key_slot
from valkey_testbed.objectstore import ObjectStoreServer

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

MAX_PAIRS = 100_000
"""Bounds the writer, which writes pairs back to back (3,500 a second on the 2-core machine: a
pair every 0.3 ms, far closer than the forks of shards streamed at once without a pause land)."""
LEAD = 3.0
"""Seconds of pairs written before the backup starts, so that every shard holds some."""
RESTORED = 300.0
BACKUPS = 5
"""OneInstant backups taken one after another under the writer, each checked by its key counts."""


def tag_in(shard: int, prefix: str) -> str:
    """A hash tag whose slot is in the shard's bootstrap slots (even_split(3))."""
    (span,) = even_split(3)[shard]
    return next(
        tag
        for n in itertools.count()
        if span.start <= key_slot((tag := f"{{{prefix}{n}}}").encode()) <= span.end
    )


A_TAG, B_TAG = tag_in(0, "a"), tag_in(2, "b")


def a_key(index: int) -> bytes:
    return f"{A_TAG}a:{index}".encode()


def b_key(index: int) -> bytes:
    return f"{B_TAG}b:{index}".encode()


@contextlib.asynccontextmanager
async def writing_pairs(status: Obj) -> AsyncIterator[list[int]]:
    """a:<i> then b:<i>, each acknowledged before the next; yields how many pairs were begun."""
    begun = [0]
    client = cluster_client(status)

    async def run() -> None:
        for index in range(MAX_PAIRS):
            begun[0] = index + 1
            await client.set(a_key(index), b"a")
            await client.set(b_key(index), b"b")

    task = asyncio.create_task(run())
    try:
        yield begun
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


async def present(status: Obj, keys: list[bytes]) -> set[int]:
    """Indexes of the keys the cluster holds (each list is one hash tag: one slot, one MGET per batch)."""
    client = cluster_client(status)
    found: set[int] = set()
    try:
        for start in range(0, len(keys), 500):
            values = await client.mget(keys[start : start + 500])
            found.update(start + offset for offset, value in enumerate(values) if value is not None)
    finally:
        await client.aclose()
    return found


def counts_of(backup: Obj) -> tuple[int, int]:
    """Keys of the shard holding the a's and of the shard holding the b's (status.shards[].keys)."""

    def keys_at(tag: str) -> int:
        slot = key_slot(tag.encode())
        (shard,) = (
            shard
            for shard in backup["shards"]
            if any(_within(slot, span) for span in str(shard["slots"]).split(","))
        )
        return int(shard["keys"])

    return keys_at(A_TAG), keys_at(B_TAG)


def _within(slot: int, span: str) -> bool:
    first, _, last = span.partition("-")
    return int(first) <= slot <= int(last or first)


def one_moment(a_present: set[int], b_present: set[int]) -> str | None:
    """Why the a's and b's cannot be one moment of the writer (None: they can)."""
    orphans = sorted(b_present - a_present)
    if orphans:
        return f"{len(orphans)} b's without their a (first {orphans[:5]}): shard 2 forked after shard 0"
    if a_present != set(range(len(a_present))) or b_present != set(range(len(b_present))):
        return "the pairs present are not a prefix of the writer's sequence"
    ahead = len(a_present) - len(b_present)
    if ahead > 1:
        return f"the a's are {ahead} pairs ahead of the b's: shard 0 forked after shard 2"
    return None


@pytest.mark.timeout(900)
async def test_a_one_instant_backup_under_paired_writes_restores_one_moment_of_the_writer(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, object_store: ObjectStoreServer
) -> None:
    status, _ = await formed_cluster(kube, catalog, namespace, "source", shards=3, replicas=1)
    bucket = object_store.create_bucket()
    await storage_secret(kube, namespace, object_store)
    where = destination(object_store, bucket, path="vk")
    pauses: list[int] = []
    broken_counts: list[str] = []
    async with writing_pairs(status) as begun:
        await asyncio.sleep(LEAD)
        for number in range(BACKUPS):
            name = f"instant-{number}"
            await start_backup(kube, namespace, name, "source", where, consistency="OneInstant")
            backup = await finished(kube, namespace, name)
            assert backup["phase"] == "Completed", backup
            assert backup["consistency"] == "OneInstant"
            assert {shard["sourceRole"] for shard in backup["shards"]} == {"replica"}, "in-sync replicas"
            pause_ms = backup["writePauseMilliseconds"]
            assert 0 <= pause_ms < 2000, backup
            pauses.append(pause_ms)
            a_count, b_count = counts_of(backup)
            print(f"[instant] {name}: writes paused {pause_ms} ms; {a_count} a's, {b_count} b's")
            if not 0 <= a_count - b_count <= 1:
                broken_counts.append(f"{name}: {a_count} a's and {b_count} b's")
        pairs_during = begun[0]
    print(f"[instant] {BACKUPS} backups, write pauses {sorted(pauses)} ms")
    assert not broken_counts, f"shards not snapshotted at one instant: {broken_counts}"

    config = catalog("cfg")  # formed_cluster's config
    await restore_cluster(kube, namespace, "restored", config, name, 3, 0)
    state = await settled(kube, namespace, "restored", RESTORED)
    assert state["restore"]["phase"] == "Verified", state["restore"]
    indexes = range(pairs_during + 1)
    a_present = await present(state, [a_key(i) for i in indexes])
    b_present = await present(state, [b_key(i) for i in indexes])
    assert a_present, "the backup holds pairs written before it started"
    print(f"[instant] restored {len(a_present)} a's and {len(b_present)} b's of {pairs_during} pairs begun")
    broken = one_moment(a_present, b_present)
    assert broken is None, broken
