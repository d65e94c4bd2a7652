"""A node's archived history, fetched and cut at a second: what a pod restoring to a moment loads
(`valkey-operator restore-fetch --archive`, spec.restore.pointInTime).

From the base the operator chose (stored at or before the moment, archive_source.py) it fetches
that sequence's base and every sequence's incremental file after it, each from its segments in
byte order (layout.contiguous), into a staging directory; cuts the history at the second
(cut.py); drops a slot import the cut fell inside of (imports.py); and renames the directory to
appendonlydir, where valkey-server loads it at start. A segment stored more than STORED_SLACK_S
after the moment, and every sequence after it, holds only later writes and is not fetched: each
segment is stored after the writes it holds, so that holds while the bucket's clock and the
node's are within that slack of each other.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import attrs

from valkey_operator.archiver import layout
from valkey_operator.archiver.cut import base_name, cut, incr_name
from valkey_operator.archiver.imports import flush_commands, unfinished_imports
from valkey_operator.objectstore import ObjectStore

STORED_SLACK_S = 300
PARALLEL = 8
"""Segments downloaded at once: a second's writes each, small; the round trips dominate."""
STAGING = ".restore-history"
AOF_DIR = "appendonlydir"


class HistoryMissing(Exception):
    """The chosen base or sequence is not in the bucket (retention, or another cluster's prefix)."""


@attrs.frozen
class Plan:
    base_seq: int
    base_key: str
    incrs: tuple[tuple[int, tuple[str, ...]], ...]
    """(seq, its segments' keys in byte order), seq ascending from base_seq."""


async def plan(store: ObjectStore, folder: str, base_seq: int, until: int) -> Plan:
    """What to fetch of the node whose history is under folder: its base base_seq and the
    increments from it on, up to the first segment stored STORED_SLACK_S after until. A sequence
    without objects is an incremental file the node never wrote to (replay.py)."""
    base_key = f"{folder}/{'/'.join(layout.base_name(base_seq))}"
    if not await store.exists(base_key):
        raise HistoryMissing(f"no base {base_key}")
    seqs = sorted(int(name) for name in await store.list_folders(folder) if name.isdigit())
    incrs: list[tuple[int, tuple[str, ...]]] = []
    for seq in range(base_seq, max([base_seq, *seqs]) + 1):
        spans: list[tuple[int, int, str]] = []
        stored_at: dict[str, float] = {}
        listed = await store.list_dated(f"{folder}/{layout.seq_name(seq)}") if seq in seqs else []
        for key, size, stored in listed:
            archived = layout.parse_name(key[len(folder) + 1 :])
            if archived is not None and archived.start is not None:
                spans.append((archived.start, size, key))
                stored_at[key] = stored
        keys, _ = layout.contiguous(spans)
        late = [index for index, key in enumerate(keys) if stored_at[key] > until + STORED_SLACK_S]
        incrs.append((seq, keys[: late[0] + 1] if late else keys))
        if late:
            break
    return Plan(base_seq, base_key, tuple(incrs))


@attrs.frozen
class Fetched:
    files: list[Path]
    dropped: list[tuple[int, int]]
    """Slot ranges of imports the cut fell inside of, flushed as the history loads (imports.py)."""


async def fetch(store: ObjectStore, history: Plan, data_dir: Path, until: int) -> Fetched:
    """Fetch history, cut it at until, drop the imports it cut in the middle of, and put it in
    data_dir/appendonlydir."""
    staging = data_dir / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    await download(store, history, staging)
    kept = cut(staging, history.base_seq, [seq for seq, _ in history.incrs], until)
    dropped = unfinished_imports(staging / incr_name(seq) for seq in kept)
    if dropped and kept:
        with (staging / incr_name(kept[-1])).open("ab") as last:
            last.write(flush_commands(dropped))
    aof_dir = staging.rename(data_dir / AOF_DIR)
    files = [aof_dir / base_name(history.base_seq), *(aof_dir / incr_name(seq) for seq in kept)]
    return Fetched(files, dropped)


async def download(store: ObjectStore, history: Plan, directory: Path) -> None:
    """The base and each incremental file (its segments concatenated in order) into directory,
    under the names a multi-part AOF gives them."""
    await store.download(history.base_key, directory / base_name(history.base_seq), None)
    gate = asyncio.Semaphore(PARALLEL)

    async def segment(key: str, target: Path) -> None:
        async with gate:
            await store.download(key, target, None)

    for seq, keys in history.incrs:
        parts = [directory / f"{seq}.{index}.part" for index in range(len(keys))]
        await asyncio.gather(*(segment(key, part) for key, part in zip(keys, parts, strict=True)))
        with (directory / incr_name(seq)).open("wb") as incr:
            for part in parts:
                with part.open("rb") as piece:
                    shutil.copyfileobj(piece, incr)
                part.unlink()
