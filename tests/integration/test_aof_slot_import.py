"""A history cut in the middle of an atomic slot migration, loaded as a restore loads it
(archiver/imports.py), on real Valkey servers.

Two cluster-mode servers with aof-timestamp-enabled: A owns every slot and holds 3,000 keys of
slots 0-100; CLUSTER MIGRATESLOTS moves those slots to B, whose AOF then holds the keys between
CLUSTER SYNCSLOTS ESTABLISH and FINISH. B's history is cut at a command halfway between the two
and loaded by a fresh cluster-mode server, as a restoring pod's server loads it: as cut, it
claims slots of the import (what A still owned and held whole at that moment, so a restored
cluster would have two owners); with the FLUSHSLOT commands the restore appends for an
unfinished import, it holds none of them and claims nothing. The whole history is left alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import valkey
from valkey.crc import key_slot

from valkey_operator.archiver.imports import flush_commands, unfinished_imports
from valkey_testbed import images
from valkey_testbed.images import ImageEntry
from valkey_testbed.valkeyproc import cluster_ok, server_base_dir, start_server, stop_servers
from valkey_testbed.wait import NotYet, eventually_blocking

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SOURCE, TARGET, LOADER = "127.0.97.41", "127.0.97.42", "127.0.97.43"
MOVED_KEYS = 3000
LAST_SLOT = 100
CONFIG = {"appendonly": "yes", "aof-timestamp-enabled": "yes", "appendfsync": "always"}


def migrated_history(entry: ImageEntry, base: Path) -> Path:
    """B's incremental AOF once slots 0-LAST_SLOT moved from A to B (a copy of its appendonlydir)."""
    a = start_server(entry, SOURCE, base_dir=base, config=CONFIG, cluster=True)
    b = start_server(entry, TARGET, base_dir=base, config=CONFIG, cluster=True)
    try:
        a.command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        a.command("CLUSTER", "MEET", TARGET, b.port)
        eventually_blocking(lambda: cluster_ok([a, b]) or NotYet("gossip"), "cluster_state:ok", 30)
        keys = (key for key in (f"k{i}".encode() for i in range(10**7)) if key_slot(key) <= LAST_SLOT)
        pipe = valkey.Valkey(host=SOURCE, port=a.port).pipeline(transaction=False)
        for _ in range(MOVED_KEYS):
            pipe.set(next(keys), "v")
        pipe.execute()
        target_id = b.command("CLUSTER", "MYID")
        assert isinstance(target_id, bytes)
        a.command("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", 0, LAST_SLOT, "NODE", target_id.decode())

        def owns() -> bool | NotYet:
            mine = [line for line in _text(b.command("CLUSTER", "NODES")).splitlines() if "myself" in line]
            return mine[0].endswith(f"0-{LAST_SLOT}") or NotYet(mine)

        eventually_blocking(owns, "B owns the slots", 60, interval=0.1)
        history = base / "target-history"
        shutil.copytree(Path(_text(b.command("CONFIG", "GET", "dir"), 1)) / "appendonlydir", history)
        return history
    finally:
        stop_servers([a, b])


def loaded(entry: ImageEntry, history: Path, work: Path) -> tuple[int, str]:
    """A fresh cluster-mode server on history: its keys and the slots it claims."""
    data_dir = work / "node"
    shutil.copytree(history, data_dir / "appendonlydir")
    for path in [data_dir, *data_dir.rglob("*")]:
        shutil.chown(path, entry.user, entry.group)
    server = start_server(
        entry, LOADER, base_dir=work, config={"appendonly": "yes", "dir": str(data_dir)}, cluster=True
    )
    try:
        eventually_blocking(lambda: server.command("PING") == b"PONG" or NotYet("loading"), "loaded", 60)
        keys = server.command("DBSIZE")
        mine = [line for line in _text(server.command("CLUSTER", "NODES")).splitlines() if "myself" in line]
    finally:
        stop_servers([server])
    shutil.rmtree(data_dir)
    assert isinstance(keys, int)
    return keys, " ".join(mine[0].split()[8:])


def _text(reply: object, index: int | None = None) -> str:
    item = reply[index] if index is not None and isinstance(reply, list) else reply
    assert isinstance(item, bytes), reply
    return item.decode()


def test_an_import_the_cut_falls_inside_is_dropped_and_the_source_keeps_the_slots() -> None:
    entry = images.resolve_image(images.newest_image())
    assert entry is not None, "the newest Valkey image is not installed (python -m valkey_testbed build)"
    base = server_base_dir()
    history = migrated_history(entry, base)
    incr = next(history.glob("*.incr.aof"))
    whole = incr.read_bytes()
    established, finished = whole.find(b"ESTABLISH"), whole.find(b"$6\r\nFINISH")
    assert 0 <= established < finished, "B's history holds the import between ESTABLISH and FINISH"
    assert unfinished_imports([incr]) == []
    assert loaded(entry, history, base) == (MOVED_KEYS, f"0-{LAST_SLOT}")

    halfway = whole.find(b"*3\r\n$3\r\nSET", (established + finished) // 2)
    incr.write_bytes(whole[:halfway])
    assert unfinished_imports([incr]) == [(0, LAST_SLOT)]
    keys, claimed = loaded(entry, history, base)
    print(f"[import] cut inside the import: {keys} of {MOVED_KEYS} keys loaded, slots claimed: {claimed}")
    assert 0 < keys < MOVED_KEYS and claimed, "as cut, the server takes slots A still owned"

    incr.write_bytes(whole[:halfway] + flush_commands(unfinished_imports([incr])))
    assert loaded(entry, history, base) == (0, ""), "with the flush, nothing of the import stays"
