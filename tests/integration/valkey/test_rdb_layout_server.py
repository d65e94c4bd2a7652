"""A streamed RDB placed for each persistence mode (rdb_layout) is what a new valkey-server 9.1.2 loads.

The node runs with the persistence directives the operator renders for the
mode (persistence_directives), its pod paths mapped to the test's dirs:
none and rdb read `dir/dump.rdb`; aof reads only its multi-part AOF, whose
manifest must name the RDB as the base. Every key must come back, and an aof
node must keep taking writes onto the placed base across a restart.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from rdb_support import (
    NO_DELAY,
    PASSWORD,
    Connection,
    contents,
    files_under,
    fill,
    image_entry,
    loaded_counts,
    restore_on,
    stream_to_file,
    wait_loaded,
)

from valkey_operator.valkey.rdb_layout import place_rdb
from valkey_testbed.images import ImageEntry
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HOSTS = ("127.0.96.11", "127.0.96.12")
PLACED = {
    "none": ["dump.rdb"],
    "rdb": ["dump.rdb"],
    "aof": ["appendonlydir/appendonly.aof.1.base.rdb", "appendonlydir/appendonly.aof.manifest"],
}


@pytest.fixture
def base() -> Iterator[Path]:
    directory = server_base_dir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def servers() -> Iterator[list[ValkeyServer]]:
    started: list[ValkeyServer] = []
    yield started
    for server in started:
        if server.alive():
            server.stop(grace=10)


@pytest.mark.parametrize("mode", PLACED)
async def test_each_mode_loads_every_key_from_where_the_rdb_was_placed(
    base: Path, servers: list[ValkeyServer], mode: str
) -> None:
    image: ImageEntry = image_entry()
    source = start_server(image, HOSTS[0], base_dir=base, password=PASSWORD, config=NO_DELAY)
    servers.append(source)
    keys = fill(source)
    expected = contents(source)
    streamed = await stream_to_file(source, base / "shard.rdb")
    restored, written = restore_on(image, HOSTS[1], base, streamed.path, mode=mode)
    servers.append(restored)
    data = written[0].parents[len(PLACED[mode][0].split("/")) - 1]
    assert [str(path.relative_to(data)) for path in written] == PLACED[mode]
    assert not streamed.path.exists()  # moved, not copied
    assert contents(restored) == expected
    assert loaded_counts(restored) == (keys, 0)
    if mode != "aof":
        return
    assert (
        (data / "appendonlydir/appendonly.aof.manifest")
        .read_text()
        .startswith("file appendonly.aof.1.base.rdb seq 1 type b\n")
    )
    with Connection(restored) as db:
        assert db.call("SET", "written-after-restore", "yes") == b"OK"
    restored.stop()
    again = start_server(image, HOSTS[1], base_dir=base, password=PASSWORD, config=restored_config(restored))
    servers.append(again)
    wait_loaded(again)
    assert contents(again) == {**expected, b"written-after-restore": (b"string", b"yes", False)}
    assert "appendonlydir/appendonly.aof.1.base.rdb" in list(files_under(data))


def restored_config(server: ValkeyServer) -> dict[str, str]:
    """The restored node's own settings for a restart on the same data dir."""
    reply = server.directory / "valkey.conf"
    settings: dict[str, str] = {}
    for line in reply.read_text().splitlines():
        key, _, value = line.partition(" ")
        if key in {"dir", "appendonly", "save", "appendfsync", "cluster-config-file"}:
            settings[key] = value
    return settings


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    rdb = tmp_path / "x.rdb"
    rdb.write_bytes(b"REDIS0011\xff")
    with pytest.raises(ValueError, match="unknown persistence mode"):
        place_rdb(rdb, tmp_path, "zfs")
    assert rdb.exists()
