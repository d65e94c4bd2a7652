"""A node's fetched history cut at a second: the multi-part AOF directory valkey-server loads.

The history is base k and incremental files k, k+1, ... (replay.py). Commands after a
`#TS:<t>` annotation ran in second t, so cutting at second s keeps everything before the first
annotation past s: the files after the one holding it go, that one is truncated there, and the
manifest names what is left. The truncation is `valkey-check-aof --truncate-to-timestamp`'s rule
(the file ends where that annotation's line begins), done here so that a restore needs no Valkey
binary beside it; tests/integration/test_aof_archive.py checks it against the tool byte for byte.
"""

from __future__ import annotations

import os
from pathlib import Path

from valkey_operator.archiver.manifest import AofFile, FileKind, render_manifest
from valkey_operator.archiver.timestamps import TimestampScanner

MANIFEST = "appendonly.aof.manifest"
READ = 1024 * 1024


def incr_name(seq: int) -> str:
    return f"appendonly.aof.{seq}.incr.aof"


def base_name(seq: int) -> str:
    return f"appendonly.aof.{seq}.base.rdb"


def write_manifest(directory: Path, base_seq: int, incrs: list[int]) -> None:
    """The manifest naming base base_seq and incrs: what valkey-server loads from directory."""
    files = (
        AofFile(base_name(base_seq), base_seq, FileKind.BASE),
        *(AofFile(incr_name(seq), seq, FileKind.INCR) for seq in incrs),
    )
    (directory / MANIFEST).write_text(render_manifest(files))


def truncate_after(path: Path, second: int) -> int | None:
    """Cut the file where its first annotation later than second begins; the new size, or None
    when no annotation is later (the file is left whole)."""
    scanner = TimestampScanner(after=second)
    with path.open("rb") as file:
        while scanner.cut_at is None and (chunk := file.read(READ)):
            scanner.feed(chunk)
    if scanner.cut_at is not None:
        os.truncate(path, scanner.cut_at)
    return scanner.cut_at


def cut(directory: Path, base_seq: int, incrs: list[int], second: int) -> list[int]:
    """Cut the history in directory at second; the incremental files kept (the last one truncated
    at the first annotation past second, the ones after it deleted)."""
    kept: list[int] = []
    for seq in incrs:
        kept.append(seq)
        if truncate_after(directory / incr_name(seq), second) is not None:
            break
    for seq in incrs[len(kept) :]:
        (directory / incr_name(seq)).unlink()
    write_manifest(directory, base_seq, kept)
    return kept
