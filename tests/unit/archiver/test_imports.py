"""Slot imports a cut history holds unfinished (archiver/imports.py), on AOF bytes as Valkey 9.1.2
writes them (the ESTABLISH and FINISH lines are copied from a real target's AOF)."""

from __future__ import annotations

from pathlib import Path

import pytest

from valkey_operator.archiver import imports
from valkey_operator.archiver.imports import flush_commands, unfinished_imports


def command(*argv: str) -> bytes:
    return b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in argv)


JOB = "8cccd6b3c874dc84252aca0608813a2be3e3cb50"
ESTABLISH = command(
    "CLUSTER", "SYNCSLOTS", "ESTABLISH", "SOURCE", "27eb39af2217721132a70fc14cc77a84b50606b2",
    "NAME", JOB, "SLOTSRANGE", "0", "100", "200", "210",
)  # fmt: skip
FINISH = command("CLUSTER", "SYNCSLOTS", "FINISH", "STATE", "SUCCESS", "NAME", JOB, "MESSAGE", "")
SETS = b"".join(command("SET", f"k{i}", "v") for i in range(50))


def aof(tmp_path: Path, name: str, *parts: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(b"#TS:1796542015\r\n" + command("SELECT", "0") + b"".join(parts))
    return path


def test_an_import_without_its_finish_is_unfinished_across_files(tmp_path: Path) -> None:
    first = aof(tmp_path, "1", SETS, ESTABLISH, SETS)
    second = aof(tmp_path, "2", SETS)
    assert unfinished_imports([first, second]) == [(0, 100), (200, 210)]
    assert unfinished_imports([first, aof(tmp_path, "3", SETS, FINISH)]) == []


def test_a_value_that_reads_syncslots_is_not_a_command(tmp_path: Path) -> None:
    lookalike = command("SET", "note", "*10\r\n$7\r\nCLUSTER\r\n$9\r\nSYNCSLOTS\r\n$9\r\nESTABLISH\r\n")
    assert unfinished_imports([aof(tmp_path, "1", SETS, lookalike, SETS)]) == []
    assert unfinished_imports([aof(tmp_path, "2", SETS)]) == [], "no marker: not walked"


def test_a_command_cut_short_by_a_crash_ends_the_walk(tmp_path: Path) -> None:
    path = aof(tmp_path, "1", ESTABLISH, SETS)
    path.write_bytes(path.read_bytes()[:-5])
    assert unfinished_imports([path]) == [(0, 100), (200, 210)]


@pytest.mark.parametrize("chunk", [7, 4096])
def test_a_file_larger_than_memory_is_read_in_chunks(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setattr(imports, "READ", chunk)  # every file takes the chunked path at this size
    path = aof(tmp_path, "1", SETS * 3, ESTABLISH, SETS * 3)
    assert unfinished_imports([path]) == [(0, 100), (200, 210)]


def test_the_flush_names_every_slot() -> None:
    flushed = flush_commands([(0, 2), (9, 9)])
    assert flushed == b"".join(command("CLUSTER", "FLUSHSLOT", str(slot)) for slot in (0, 1, 2, 9))
