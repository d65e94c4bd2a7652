"""A node's fetched history cut at a second: the multi-part AOF directory valkey-server loads.

The history is base k and incremental files k, k+1, ... (replay.py). Commands after a
`#TS:<t>` annotation ran in second t, so cutting at second s keeps everything before the first
annotation past s: the files after the one holding it go, that one is truncated there by
valkey-check-aof, and the manifest names what is left.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from valkey_operator.archiver.manifest import AofFile, FileKind, render_manifest
from valkey_operator.archiver.timestamps import TimestampScanner

MANIFEST = "appendonly.aof.manifest"
READ = 1024 * 1024
CHECK_TIMEOUT = 600.0


class CutFailed(Exception):
    pass


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


def passes(path: Path, second: int) -> bool:
    """Whether the file holds an annotation after second (read until the first one)."""
    scanner = TimestampScanner()
    with path.open("rb") as file:
        while chunk := file.read(READ):
            scanner.feed(chunk)
            if scanner.last is not None and scanner.last > second:
                return True
    return False


def cut(directory: Path, base_seq: int, incrs: list[int], second: int, check_aof: Path) -> list[int]:
    """Cut the history in directory at second; the incremental files kept.

    Only the last kept file is given to valkey-check-aof: given a manifest, 9.1.2 checks the base
    first and takes an RDB preamble for RESP unless it begins with REDIS (9.x writes VALKEY080).
    """
    kept: list[int] = []
    for seq in incrs:
        kept.append(seq)
        if passes(directory / incr_name(seq), second):
            break
    for seq in incrs[len(kept) :]:
        (directory / incr_name(seq)).unlink()
    write_manifest(directory, base_seq, kept)
    if kept:
        argv = [str(check_aof), "--truncate-to-timestamp", str(second), str(directory / incr_name(kept[-1]))]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT, check=False)
        if result.returncode != 0:
            raise CutFailed(f"valkey-check-aof: {(result.stdout + result.stderr).strip()[-500:]}")
    return kept
