"""Data sets, a full read-back, and restores on real valkey-server processes, for the RDB stream tests.

`fill` writes a few thousand keys of every type Valkey stores (strings, some
with TTLs, small and large hashes, a hash with a field TTL, lists, sets,
sorted sets, a stream with a consumer group) and one incompressible value
larger than a chunk. `contents` reads every key back with its TTL state, so
two servers compare with ==. `restore_on` places a streamed RDB in a fresh
data dir (rdb_layout, as a restore's init container would, running as the
node's user) and starts a server there with the persistence directives the
operator renders for that mode.
"""

from __future__ import annotations

import ipaddress
import os
import random
import socket
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import pytest

from controllers.cluster.render.config import persistence_directives
from controllers.shared import layout
from controllers.shared.persistence import Persistence, merge_persistence
from valkey_operator.valkey.admin import Credentials
from valkey_operator.valkey.rdb_layout import place_rdb
from valkey_operator.valkey.rdb_stream import RdbStream, open_rdb_stream
from valkey_testbed import images
from valkey_testbed.datachecker import check_loopback
from valkey_testbed.images import ImageEntry
from valkey_testbed.resp import Arg, Reply, ReplyError, encode_command, read_reply_blocking
from valkey_testbed.valkeyproc import ConfigValue, ValkeyServer, start_server
from valkey_testbed.wait import NotYet, eventually_blocking

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
PASSWORD = "rdb-stream-test-password"
ADMIN = Credentials(username="default", password=PASSWORD)
STRING_KEYS = 3000
BIG_VALUE = random.Random(24).randbytes(300_000)  # incompressible, larger than a small chunk
NO_DELAY: dict[str, ConfigValue] = {"repl-diskless-sync-delay": 0}
"""A source node's setting: a diskless sync starts at once instead of waiting 5 s for more replicas."""
IMAGE = "valkey/valkey:9.1.2"
"""The catalog's 9.1.2: the TLS-capable Debian build (images.tls_image() while the pin is 9.1.2)."""


def image_entry() -> ImageEntry:
    entry = images.resolve_image(IMAGE)
    if entry is None:
        pytest.fail(f"{IMAGE} is not installed (python -m valkey_testbed build)")
    return entry


class Connection:
    """One connection to a loopback node (AUTH and TLS as the server was started), pipelining commands
    with the test bed's own RESP: nothing retries or reroutes behind the test."""

    def __init__(self, server: ValkeyServer) -> None:
        check_loopback(server.host)
        raw = socket.create_connection(server.address, timeout=30)
        context = server.tls.client_context() if server.tls is not None else None
        self._sock = context.wrap_socket(raw, server_hostname=server.host) if context else raw
        self._stream = self._sock.makefile("rb")
        if server.password is not None:
            self.call("AUTH", server.password)

    def pipeline(self, commands: Sequence[Sequence[Arg]]) -> list[Reply]:
        """Send every command, then read every reply; an error reply fails the test."""
        self._sock.sendall(b"".join(encode_command(list(command)) for command in commands))
        replies = [read_reply_blocking(self._stream) for _ in commands]
        for command, reply in zip(commands, replies, strict=True):
            assert not isinstance(reply, ReplyError), (command[:3], reply)
        return replies

    def call(self, *command: Arg) -> Reply:
        return self.pipeline([command])[0]

    def close(self) -> None:
        self._stream.close()
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def fill(server: ValkeyServer, string_keys: int = STRING_KEYS) -> int:
    """Write the data set; returns how many keys it holds."""
    commands: list[list[Arg]] = []
    for index in range(string_keys):
        command: list[Arg] = ["SET", f"key:{index}", f"value-{index}-" + "x" * (index % 50)]
        commands.append([*command, "EX", 3600] if index % 7 == 0 else command)
    small: list[Arg] = [item for index in range(10) for item in (f"f{index}", index)]
    large: list[Arg] = [item for index in range(600) for item in (f"field-{index}", f"v{index}" * 3)]
    scores: list[Arg] = [item for index in range(200) for item in (f"{index / 3}", f"m{index}")]
    commands += [
        ["HSET", "hash:small", *small],
        ["HSET", "hash:large", *large],
        ["HSET", "hash:field-ttl", "stays", "1", "expires", "2"],
        ["HEXPIRE", "hash:field-ttl", 3600, "FIELDS", 1, "expires"],
        ["RPUSH", "list", *[f"item-{index}" for index in range(300)]],
        ["SADD", "set:strings", *[f"member-{index}" for index in range(200)]],
        ["SADD", "set:ints", *range(100)],
        ["ZADD", "zset", *scores],
    ]
    commands += [["XADD", "stream", "*", "n", index, "payload", "p" * index] for index in range(50)]
    commands += [["XGROUP", "CREATE", "stream", "readers", "0"], ["SET", "big", BIG_VALUE]]
    with Connection(server) as db:
        db.pipeline(commands)
        size = db.call("DBSIZE")
    assert isinstance(size, int)
    return size


def _read_value(key: bytes, kind: bytes, fields: Reply) -> list[list[Arg]]:
    """The commands that read one key of this type (a hash's fields known)."""
    if kind == b"string":
        return [["GET", key]]
    if kind == b"hash":
        assert isinstance(fields, list)
        names = sorted(name for name in fields if isinstance(name, bytes))
        return [["HGETALL", key], ["HPTTL", key, "FIELDS", len(names), *names]]
    if kind == b"list":
        return [["LRANGE", key, 0, -1]]
    if kind == b"set":
        return [["SMEMBERS", key]]
    if kind == b"zset":
        return [["ZRANGE", key, 0, -1, "WITHSCORES"]]
    if kind == b"stream":
        return [["XRANGE", key, "-", "+"], ["XINFO", "GROUPS", key]]
    raise AssertionError(f"unexpected type {kind!r} of {key!r}")


def _normal(kind: bytes, replies: list[Reply]) -> object:
    """Replies in a form that compares equal for equal data (sets sorted, TTLs as has-a-TTL)."""
    if kind == b"set":
        members = replies[0]
        assert isinstance(members, list)
        return sorted(member for member in members if isinstance(member, bytes))
    if kind == b"hash":
        pairs, ttls = replies
        assert isinstance(pairs, list) and isinstance(ttls, list)
        return dict(zip(pairs[::2], pairs[1::2], strict=True)), [isinstance(t, int) and t > 0 for t in ttls]
    return replies[0] if len(replies) == 1 else tuple(replies)


def keys_of(server: ValkeyServer) -> list[bytes]:
    with Connection(server) as db:
        found: set[bytes] = set()
        cursor = b"0"
        while True:
            reply = db.call("SCAN", cursor, "COUNT", 1000)
            assert isinstance(reply, list) and isinstance(reply[0], bytes) and isinstance(reply[1], list)
            cursor = reply[0]
            found.update(key for key in reply[1] if isinstance(key, bytes))
            if cursor == b"0":
                return sorted(found)


def contents(server: ValkeyServer) -> dict[bytes, tuple[bytes, object, bool]]:
    """Every key: (type, value, has a TTL)."""
    keys = keys_of(server)
    with Connection(server) as db:
        kinds = db.pipeline([["TYPE", key] for key in keys])
        ttls = db.pipeline([["PTTL", key] for key in keys])
        fields = db.pipeline(
            [["HKEYS", key] if kind == b"hash" else ["PING"] for key, kind in zip(keys, kinds, strict=True)]
        )
        reads = [
            _read_value(key, kind, field)
            for key, kind, field in zip(keys, kinds, fields, strict=True)
            if isinstance(kind, bytes)
        ]
        replies = iter(db.pipeline([command for read in reads for command in read]))
        found: dict[bytes, tuple[bytes, object, bool]] = {}
        for key, kind, ttl, read in zip(keys, kinds, ttls, reads, strict=True):
            assert isinstance(kind, bytes) and isinstance(ttl, int)
            found[key] = (kind, _normal(kind, [next(replies) for _ in read]), ttl > 0)
        return found


def with_ttl(server: ValkeyServer) -> int:
    return sum(1 for _, _, ttl in contents(server).values() if ttl)


def info(server: ValkeyServer, section: str) -> dict[str, str]:
    return server.info(section)


def wait_loaded(server: ValkeyServer) -> ValkeyServer:
    """Until the node has finished loading its data set."""

    def loaded() -> bool | NotYet:
        fields = info(server, "persistence")
        return fields.get("loading") == "0" or NotYet(fields.get("loading"))

    eventually_blocking(loaded, "loading:0", 60.0, interval=0.05, ignore=(OSError, ConnectionError))
    return server


@attrs.frozen
class Streamed:
    """What a finished RdbStream told, and where its bytes went."""

    path: Path
    size: int | None
    keys: int | None
    expires: int | None
    version: str
    chunk_sizes: list[int]


async def stream_to_file(
    server: ValkeyServer,
    path: Path,
    *,
    diskless: bool = True,
    credentials: Credentials = ADMIN,
    chunk_size: int = 1 << 20,
    sync_delay: str | None = None,
) -> Streamed:
    """Stream the node's RDB into path through open_rdb_stream (sync_delay: as the backup passes it)."""
    ca_pem = server.tls.ca.read_text() if server.tls is not None else None
    sizes: list[int] = []
    stream: RdbStream
    async with open_rdb_stream(
        server.host,
        server.port,
        credentials,
        ca_pem=ca_pem,
        allowed_networks=LOOPBACK,
        diskless=diskless,
        sync_delay=sync_delay,
    ) as stream:
        with path.open("wb") as out:
            async for chunk in stream.chunks(chunk_size):
                sizes.append(len(chunk))
                out.write(chunk)
    return Streamed(path, stream.size, stream.keys, stream.expires, stream.version, sizes)


def mode_directives(mode: str, data: Path) -> dict[str, ConfigValue]:
    """The operator's persistence directives for mode, the pod's paths mapped to data."""
    spec = {"mode": mode, "size": "1Gi"} if mode != "none" else {}
    persistence = merge_persistence([{"persistence": spec}] if spec else [])
    assert isinstance(persistence, Persistence), persistence
    mapped: dict[str, ConfigValue] = {}
    for key, rendered in persistence_directives(persistence):
        value = rendered or '""'
        if key == "dir":
            value = str(data)
        elif key == "cluster-config-file":
            value = str(data / os.path.basename(layout.PERSISTENT_NODES_FILE))
        mapped[key] = value
    return mapped


def chown_tree(root: Path, uid: int, gid: int) -> None:
    for directory, _, files in os.walk(root):
        os.chown(directory, uid, gid)
        for name in files:
            os.chown(os.path.join(directory, name), uid, gid)


def restore_on(
    image: ImageEntry,
    host: str,
    base: Path,
    rdb: Path,
    *,
    mode: str = "rdb",
    cluster: bool = False,
    config: Mapping[str, ConfigValue] | None = None,
) -> tuple[ValkeyServer, list[Path]]:
    """A new node on the RDB: placed for mode in a fresh data dir, started, loaded."""
    data = base / f"restore-{host}-{mode}"
    data.mkdir()
    written = place_rdb(rdb, data, mode)
    chown_tree(data, image.user, image.group)  # the init container runs as the node's user
    data.chmod(0o700)
    settings = {**mode_directives(mode, data), **(config or {})}
    server = start_server(image, host, base_dir=base, config=settings, cluster=cluster, password=PASSWORD)
    return wait_loaded(server), written


def loaded_counts(server: ValkeyServer) -> tuple[int, int]:
    """INFO persistence's rdb_last_load_keys_loaded and rdb_last_load_keys_expired."""
    fields = info(server, "persistence")
    return int(fields["rdb_last_load_keys_loaded"]), int(fields["rdb_last_load_keys_expired"])


def slots_of_keys(server: ValkeyServer) -> set[int]:
    with Connection(server) as db:
        slots = db.pipeline([["CLUSTER", "KEYSLOT", key] for key in keys_of(server)])
    return {slot for slot in slots if isinstance(slot, int)}


def owned_slots(server: ValkeyServer) -> set[int]:
    reply = server.command("CLUSTER", "SLOTS")
    assert isinstance(reply, list), reply
    owned: set[int] = set()
    for entry in reply:
        assert isinstance(entry, list)
        start, end = entry[0], entry[1]
        assert isinstance(start, int) and isinstance(end, int)
        owned.update(range(start, end + 1))
    return owned


def files_under(root: Path) -> Iterator[str]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield str(path.relative_to(root))
