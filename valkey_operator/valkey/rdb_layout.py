"""Where a starting valkey-server looks for its data, per persistence mode: a restored RDB goes there.

A restore downloads each shard's RDB before the node starts; the node then
loads it itself. Which file it reads depends on the mode the operator renders
(controllers/cluster/render/config.py `persistence_directives`; `dir`,
`dbfilename`, `appendfilename` and `appenddirname` are operator-owned, so
Valkey's defaults hold):
- none and rdb (`appendonly no`): `<dir>/dump.rdb`. Valkey reads it at start
  even with persistence off.
- aof (`appendonly yes`): never dump.rdb, only the multi-part AOF: the
  manifest `<dir>/appendonlydir/appendonly.aof.manifest` names a base file,
  which may be an RDB (`file appendonly.aof.1.base.rdb seq 1 type b`); the
  node opens its own increment file after loading it.
Files are moved into place (same filesystem: a rename), the manifest last and
atomically, each fsynced with its directory, so a node that starts after a
crash mid-way sees either no manifest or a whole one.
"""

from __future__ import annotations

import os
from pathlib import Path

DBFILENAME = "dump.rdb"
APPENDDIRNAME = "appendonlydir"
APPENDFILENAME = "appendonly.aof"
AOF_BASE = f"{APPENDFILENAME}.1.base.rdb"
AOF_MANIFEST = f"{APPENDFILENAME}.manifest"
MODES = ("none", "rdb", "aof")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move(source: Path, target: Path) -> Path:
    """Rename source to target (replacing it), durable once this returns."""
    os.replace(source, target)
    _fsync(target)
    _fsync(target.parent)
    return target


def place_rdb(rdb: Path, data_dir: Path, mode: str) -> list[Path]:
    """Move the RDB file where a valkey-server of this persistence mode loads it from data_dir
    (its `dir`); the files written, in order. Replaces an earlier placement (a retried restore)."""
    if mode not in MODES:
        raise ValueError(f"unknown persistence mode {mode!r} (one of {', '.join(MODES)})")
    if mode != "aof":
        return [_move(rdb, data_dir / DBFILENAME)]
    aof_dir = data_dir / APPENDDIRNAME
    aof_dir.mkdir(exist_ok=True)
    base = _move(rdb, aof_dir / AOF_BASE)
    partial = aof_dir / f".{AOF_MANIFEST}.partial"
    partial.write_text(f"file {AOF_BASE} seq 1 type b\n")
    manifest = _move(partial, aof_dir / AOF_MANIFEST)
    return [base, manifest]
