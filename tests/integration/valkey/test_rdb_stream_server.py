"""One RDB streamed out of real valkey-server 9.1.2 nodes over their own protocol (rdb_stream).

A backup takes each shard's snapshot without exec into a pod: it connects as
a replica that wants only the RDB. Here the streamed bytes go to a file, a new
server starts on that file, and it must hold every key with its value and TTL
state; the key count read from the RDB on the way must equal DBSIZE and what
the new node reports loading. Both forms a node sends: with its length (the
RDB written to the node's disk first) and EOF-marked (diskless, straight from
the fork), from standalone and cluster-enabled nodes, from a replica, as an
ACL user and over TLS. Failures name the step and never the password: a bad
password, a user without the right, a CA that did not sign the node's
certificate, a node killed or frozen mid-stream.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from rdb_support import (
    ADMIN,
    LOOPBACK,
    NO_DELAY,
    PASSWORD,
    Connection,
    contents,
    fill,
    image_entry,
    info,
    loaded_counts,
    owned_slots,
    restore_on,
    slots_of_keys,
    stream_to_file,
)

from valkey_operator.api.tunables import OPERATOR_RUNTIME
from valkey_operator.valkey.admin import AdminClient, Credentials, ValkeyAdminError
from valkey_operator.valkey.rdb_stream import SYNC_DELAY, open_rdb_stream
from valkey_testbed.images import ImageEntry
from valkey_testbed.valkeyproc import (
    ValkeyServer,
    running_cluster,
    server_base_dir,
    start_server,
    write_tls_files,
)
from valkey_testbed.wait import NotYet, eventually_blocking

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HOSTS = ("127.0.96.1", "127.0.96.2", "127.0.96.3")
CHUNK = 65_521  # a prime: chunk edges fall anywhere, also inside the 40-byte EOF mark
FORMS = {"disk": False, "diskless": True}


@attrs.define
class Started:
    """The servers a test started, stopped by pid when it ends."""

    servers: list[ValkeyServer] = attrs.Factory(list)

    def track(self, server: ValkeyServer) -> ValkeyServer:
        self.servers.append(server)
        return server


@pytest.fixture
def started() -> Iterator[Started]:
    tracked = Started()
    yield tracked
    for server in tracked.servers:
        if server.alive():
            server.stop(grace=10)


@pytest.fixture
def base() -> Iterator[Path]:
    directory = server_base_dir()
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def image() -> ImageEntry:
    return image_entry()


def own_all_slots(server: ValkeyServer) -> None:
    assert server.command("CLUSTER", "ADDSLOTSRANGE", 0, 16383) == b"OK"
    wait_cluster_ok(server)


def wait_cluster_ok(server: ValkeyServer) -> None:
    def ok() -> bool | NotYet:
        state = server.command("CLUSTER", "INFO")
        return (isinstance(state, bytes) and b"cluster_state:ok" in state) or NotYet(state)

    eventually_blocking(ok, "cluster_state:ok", 30.0, interval=0.1)


def source_config(diskless: bool) -> dict[str, str | int]:
    # The disk form needs the node's setting; the diskless form needs it and the EOF capability.
    return {"repl-diskless-sync": "yes" if diskless else "no", "repl-diskless-sync-delay": 0}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("cluster", [False, True], ids=["standalone", "cluster"])
async def test_a_streamed_snapshot_restores_every_key_and_counts_them(
    image: ImageEntry, base: Path, started: Started, form: str, cluster: bool
) -> None:
    diskless = FORMS[form]
    source = started.track(
        start_server(
            image, HOSTS[0], base_dir=base, cluster=cluster, password=PASSWORD, config=source_config(diskless)
        )
    )
    if cluster:
        own_all_slots(source)
    keys = fill(source)
    expected = contents(source)
    streamed = await stream_to_file(source, base / "shard.rdb", diskless=diskless, chunk_size=CHUNK)

    assert streamed.version == "VALKEY080"
    assert streamed.size == (None if diskless else streamed.path.stat().st_size)
    assert streamed.keys == keys == len(expected) > 3000
    assert streamed.expires == sum(1 for _, _, ttl in expected.values() if ttl) > 400
    assert len(streamed.chunk_sizes) > 5 and set(streamed.chunk_sizes[:-1]) == {CHUNK}
    assert 0 < streamed.chunk_sizes[-1] <= CHUNK

    restored, _ = restore_on(
        image,
        HOSTS[1],
        base,
        streamed.path,
        cluster=cluster,
        config={"cluster-require-full-coverage": "no"} if cluster else None,
    )
    started.track(restored)
    if cluster:
        # A fresh node with keys of unassigned slots takes those slots itself.
        wait_cluster_ok(restored)
        assert owned_slots(restored) == slots_of_keys(source)
        assert "Taking responsibility" in restored.log_file.read_text(errors="replace")
    assert contents(restored) == expected
    assert loaded_counts(restored) == (keys, 0)


async def test_keys_that_expire_before_the_restore_are_counted_as_expired(
    image: ImageEntry, base: Path, started: Started
) -> None:
    """The restore's check: loaded + expired equals the count the backup recorded."""
    source = started.track(start_server(image, HOSTS[0], base_dir=base, password=PASSWORD, config=NO_DELAY))
    keys = fill(source, string_keys=500)
    with Connection(source) as db:
        db.pipeline([["SET", f"short:{index}", "v", "PX", 3000] for index in range(20)])
    streamed = await stream_to_file(source, base / "short.rdb")
    assert streamed.keys == keys + 20
    short = [f"short:{index}" for index in range(20)]
    # Past their TTL (the source says so) before the new node loads them.
    eventually_blocking(lambda: source.command("EXISTS", *short) == 0 or NotYet("alive"), "expiry", 10.0)
    restored, _ = restore_on(image, HOSTS[1], base, streamed.path)
    started.track(restored)
    assert loaded_counts(restored) == (keys, 20)
    assert restored.command("DBSIZE") == keys


async def test_the_node_setting_picks_the_form_for_an_eof_capable_stream(
    image: ImageEntry, base: Path, started: Started
) -> None:
    """With the EOF capability the node's repl-diskless-sync decides; without it, always its disk.

    (Without `REPLCONF version` a Valkey 9 node sends an EOF-capable rdb-only sync diskless
    whatever its setting: an older RDB format than its own cannot go through its dump file.)
    """
    source = started.track(start_server(image, HOSTS[0], base_dir=base, password=PASSWORD, config=NO_DELAY))
    keys = fill(source, string_keys=100)
    for setting in ("no", "yes"):
        assert source.command("CONFIG", "SET", "repl-diskless-sync", setting) == b"OK"
        for diskless in (False, True):
            streamed = await stream_to_file(source, base / "form.rdb", diskless=diskless)
            assert (streamed.size is None) == (diskless and setting == "yes"), (setting, diskless)
            assert (streamed.keys, streamed.version) == (keys, "VALKEY080")


async def test_a_replica_streams_its_copy(image: ImageEntry, base: Path, started: Started) -> None:
    with running_cluster(image, [HOSTS[0]], [HOSTS[1]], password=PASSWORD, config=NO_DELAY) as cluster:
        primary, replica = cluster.primaries[0], cluster.replicas[0]
        keys = fill(primary)
        with Connection(primary) as db:
            assert db.call("WAIT", 1, 10_000) == 1
        expected = contents(primary)
        assert info(replica, "replication")["role"] == "slave"
        assert replica.command("DBSIZE") == keys
        streamed = await stream_to_file(replica, base / "replica.rdb", chunk_size=CHUNK)
        # A replica cut off from its primary refuses: a backup must then pick another node.
        primary.stop()
        eventually_blocking(
            lambda: info(replica, "replication")["master_link_status"] == "down" or NotYet("up"),
            "the replica's link down",
            30.0,
        )
        with pytest.raises(ValkeyAdminError, match="SYNC: NOMASTERLINK"):
            await stream_to_file(replica, base / "cut-off.rdb")
    assert streamed.keys == keys
    restored, _ = restore_on(
        image, HOSTS[2], base, streamed.path, cluster=True, config={"cluster-require-full-coverage": "no"}
    )
    started.track(restored)
    wait_cluster_ok(restored)
    assert contents(restored) == expected
    assert loaded_counts(restored) == (keys, 0)


async def test_an_acl_user_streams_and_a_wrong_password_is_named_without_it(
    image: ImageEntry, base: Path, started: Started
) -> None:
    source = started.track(start_server(image, HOSTS[0], base_dir=base, password=PASSWORD, config=NO_DELAY))
    keys = fill(source, string_keys=200)
    secret, wrong = "backup-user-secret-1", "not-the-password-42"
    assert source.command("ACL", "SETUSER", "backup", "on", f">{secret}", "~*", "&*", "+@all") == b"OK"
    assert source.command("ACL", "SETUSER", "reader", "on", f">{secret}", "~*", "+@read") == b"OK"

    streamed = await stream_to_file(
        source, base / "acl.rdb", credentials=Credentials(username="backup", password=secret)
    )
    assert streamed.keys == keys

    with pytest.raises(ValkeyAdminError) as refused:
        await stream_to_file(
            source, base / "no.rdb", credentials=Credentials(username="backup", password=wrong)
        )
    message = str(refused.value)
    assert "AUTH as backup" in message and "WRONGPASS" in message, message
    assert wrong not in message and secret not in message, message

    with pytest.raises(ValkeyAdminError) as denied:
        await stream_to_file(
            source, base / "no.rdb", credentials=Credentials(username="reader", password=secret)
        )
    assert "NOPERM" in str(denied.value) and secret not in str(denied.value), str(denied.value)


async def test_over_tls_the_cluster_ca_is_verified(image: ImageEntry, base: Path, started: Started) -> None:
    tls = write_tls_files(base / "tls", [HOSTS[0]])
    source = started.track(
        start_server(image, HOSTS[0], base_dir=base, password=PASSWORD, tls=tls, config=NO_DELAY)
    )
    keys = fill(source)
    expected = contents(source)
    for diskless in (True, False):
        streamed = await stream_to_file(source, base / "tls.rdb", diskless=diskless, chunk_size=CHUNK)
        assert streamed.keys == keys
    restored, _ = restore_on(image, HOSTS[1], base, streamed.path)
    started.track(restored)
    assert contents(restored) == expected

    other = write_tls_files(base / "other-ca", [HOSTS[0]])
    with pytest.raises(ValkeyAdminError, match="CERTIFICATE_VERIFY_FAILED"):
        async with open_rdb_stream(
            source.host, source.port, ADMIN, ca_pem=other.ca.read_text(), allowed_networks=LOOPBACK
        ):
            pass


async def test_where_nodes_require_client_certificates_the_operator_presents_its_identity(
    image: ImageEntry, base: Path, started: Started
) -> None:
    """spec.tls.clientAuth Required: the admin connection and the backup's stream present the TLS
    Secret's certificate (held in memory only); without it the node refuses them in the handshake."""
    tls = write_tls_files(base / "mtls", [HOSTS[0]])
    source = started.track(
        start_server(image, HOSTS[0], base_dir=base, password=PASSWORD, tls=tls, config=NO_DELAY)
    )
    assert source.command("CONFIG", "SET", "tls-auth-clients", "yes") == b"OK"
    identity = tls.cert.read_text().rstrip("\n") + "\n" + tls.key.read_text()
    ca = tls.ca.read_text()
    admin = AdminClient(
        credentials=ADMIN, ca_pem=ca, identity_pem=identity, allowed_networks=LOOPBACK, port=source.port
    )
    async with admin.connect(source.host) as node:
        assert await node.command("PING") == b"PONG"
    async with open_rdb_stream(
        source.host, source.port, ADMIN, ca_pem=ca, identity_pem=identity, allowed_networks=LOOPBACK
    ) as stream:
        assert [chunk async for chunk in stream.chunks()]
    anonymous = attrs.evolve(admin, identity_pem=None)
    with pytest.raises(ValkeyAdminError):
        async with anonymous.connect(source.host) as node:
            await node.command("PING")
    with pytest.raises(ValkeyAdminError):
        async with open_rdb_stream(source.host, source.port, ADMIN, ca_pem=ca, allowed_networks=LOOPBACK):
            pass


SOURCE_DELAY = OPERATOR_RUNTIME[SYNC_DELAY]
"""What the backup passes: the delay every node runs (Valkey's default, 5 s), put back after the SYNC."""


def sync_delay(server: ValkeyServer) -> str:
    reply = server.command("CONFIG", "GET", SYNC_DELAY)
    assert isinstance(reply, list) and len(reply) == 2, reply
    value = reply[1]
    assert isinstance(value, bytes), reply
    return value.decode()


async def test_three_shards_stream_one_after_another_in_well_under_the_sync_delay(
    image: ImageEntry, base: Path, started: Started
) -> None:
    """Nodes at Valkey's default delay (5 s) hold an EOF-capable SYNC that long before they fork:
    a 3-shard backup took 15 s whatever its size. The stream lowers the delay just before its
    SYNC and puts it back once the node answered, so three shards take well under one delay, and
    every node runs 5 again afterwards (real replicas still share a fork as before)."""
    sources = [
        started.track(start_server(image, host, base_dir=base, password=PASSWORD, cluster=True))
        for host in HOSTS
    ]
    for source in sources:
        assert sync_delay(source) == SOURCE_DELAY == "5"
        own_all_slots(source)
    counts = [fill(source, string_keys=300) for source in sources]
    began = time.monotonic()
    streamed = [
        await stream_to_file(source, base / f"shard-{index}.rdb", sync_delay=SOURCE_DELAY)
        for index, source in enumerate(sources)
    ]
    took = time.monotonic() - began
    assert took < 3.0, f"3 shards streamed in {took:.1f} s: each waited for the sync delay"
    assert [found.keys for found in streamed] == counts
    assert [sync_delay(source) for source in sources] == [SOURCE_DELAY] * 3
    # No sync delay passed: the node's own 5 s (the stream leaves the setting alone).
    began = time.monotonic()
    await stream_to_file(sources[0], base / "waited.rdb")
    assert time.monotonic() - began >= 4.0


async def test_a_refused_sync_still_puts_the_delay_back(
    image: ImageEntry, base: Path, started: Started
) -> None:
    source = started.track(start_server(image, HOSTS[0], base_dir=base, password=PASSWORD))
    fill(source, string_keys=10)
    secret = "no-sync-user-secret-1"
    rules = ["on", f">{secret}", "+auth", "+info", "+replconf", "+config|set"]  # no +sync
    assert source.command("ACL", "SETUSER", "nosync", *rules) == b"OK"
    with pytest.raises(ValkeyAdminError, match="SYNC: NOPERM"):
        await stream_to_file(
            source,
            base / "no.rdb",
            credentials=Credentials(username="nosync", password=secret),
            sync_delay=SOURCE_DELAY,
        )
    assert sync_delay(source) == SOURCE_DELAY


async def test_a_sync_queued_behind_another_child_has_the_delay_put_back_while_it_waits(
    image: ImageEntry, base: Path, started: Started
) -> None:
    """A BGSAVE running: the node cannot fork for the SYNC yet and sends keepalives meanwhile. The
    first keepalive puts the delay back, so the setting is not left at 0 for the other child's
    whole run; the stream still completes once that child has ended (and the delay passed)."""
    source = started.track(start_server(image, HOSTS[0], base_dir=base, password=PASSWORD))
    keys = fill(source, string_keys=2000)
    assert source.command("CONFIG", "SET", "rdb-key-save-delay", 2000) == b"OK"  # 2 ms a key: ~5 s
    assert source.command("BGSAVE") == b"Background saving started"
    assert source.command("CONFIG", "SET", "rdb-key-save-delay", 0) == b"OK"  # the forked child keeps it
    seen: list[tuple[str, str]] = []  # (sync delay, rdb_bgsave_in_progress), every 50 ms

    async def watch() -> None:
        while True:
            seen.append((sync_delay(source), info(source, "persistence")["rdb_bgsave_in_progress"]))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    try:
        streamed = await stream_to_file(source, base / "queued.rdb", sync_delay=SOURCE_DELAY)
    finally:
        watcher.cancel()
    assert streamed.keys == keys
    lowered = next(index for index, (delay, _) in enumerate(seen) if delay == "0")
    back = next(index for index in range(lowered, len(seen)) if seen[index][0] == SOURCE_DELAY)
    assert seen[back][1] == "1", f"put back only once the other child had ended: {seen}"
    assert sync_delay(source) == SOURCE_DELAY


def large_source(image: ImageEntry, base: Path, started: Started, megabytes: int) -> ValkeyServer:
    """A node holding about megabytes of incompressible-as-written data (DEBUG POPULATE, no LZF)."""
    server = started.track(
        start_server(
            image,
            HOSTS[0],
            base_dir=base,
            password=PASSWORD,
            config={"enable-debug-command": "yes", "rdbcompression": "no", "repl-diskless-sync-delay": 0},
        )
    )
    count = megabytes * 1000
    assert server.command("DEBUG", "POPULATE", count, "key", 1000, timeout=120) == b"OK"
    return server


@pytest.mark.parametrize("form", FORMS)
async def test_a_node_killed_mid_stream_is_an_error_not_a_short_rdb(
    image: ImageEntry, base: Path, started: Started, form: str
) -> None:
    source = large_source(image, base, started, megabytes=80)
    received = 0
    with pytest.raises(ValkeyAdminError) as broken:
        async with open_rdb_stream(
            source.host, source.port, ADMIN, ca_pem=None, allowed_networks=LOOPBACK, diskless=FORMS[form]
        ) as stream:
            async for chunk in stream.chunks(1 << 16):
                received += len(chunk)
                if source.alive():
                    os.kill(source.record.pid, signal.SIGKILL)
    assert received < 80_000_000
    assert "ended" in str(broken.value) or "broke" in str(broken.value), str(broken.value)


async def test_a_frozen_node_times_out_between_chunks(
    image: ImageEntry, base: Path, started: Started
) -> None:
    source = large_source(image, base, started, megabytes=80)
    frozen = False
    try:
        with pytest.raises(ValkeyAdminError, match=r"no RDB bytes for 1\.0s"):
            async with open_rdb_stream(
                source.host, source.port, ADMIN, ca_pem=None, allowed_networks=LOOPBACK, timeout=1.0
            ) as stream:
                async for _ in stream.chunks(1 << 16):
                    if not frozen:
                        os.kill(source.record.pid, signal.SIGSTOP)
                        frozen = True
    finally:
        os.kill(source.record.pid, signal.SIGCONT)
