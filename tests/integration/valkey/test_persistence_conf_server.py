"""The rendered valkey.conf of each persistence mode on real valkey-server of every 9.x catalog release.

Each server starts from the file `render_valkey_conf` writes, every directive
as rendered, with two changes only a test needs: the ports (chosen free per
server) and the pod's mount paths mapped to directories of the test
(/data, the tmpfs cluster-state dir, the internal Secret's dir). It must
load (CONFIG GET shows the rendered values, not Valkey's defaults), and then
keep what its mode promises across a restart:
- none: nothing is written into dir, a restart comes back empty;
- rdb: dump.rdb and nodes.conf in dir; a SIGKILL keeps exactly what the last
  completed save held, and a graceful stop (SIGTERM, as a pod deletion)
  saves, so the node comes back with every key; its node id either way;
- aof (everysec and always): appendonlydir and nodes.conf in dir; even a
  SIGKILL keeps every acknowledged write (the process died, the kernel kept
  its page cache: the fsync policy only matters when the machine dies);
for rdb a replica's full sync leaves the synced RDB in the replica's dir
(`repl-diskless-load disabled`), its persistence before any save point fires;
and a claim written in one mode is not read in the other (why a mode change
needs new pods on fresh claims).

Valkey 8.1.8 in the catalog is the below-the-floor image; the operator renders
for Valkey 9 (`shutdown-on-sigterm failover` is a 9.0 flag), so every 9.x
catalog release runs here.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from controllers.cluster.render.config import render_valkey_conf, replication_auth_conf
from controllers.shared import layout
from controllers.shared.config_resolve import ResolvedConfig, ResolvedImage
from controllers.shared.persistence import Persistence, merge_persistence
from valkey_operator.api.resources import REPLICATION_USER
from valkey_testbed import images
from valkey_testbed.images import ImageEntry
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server
from valkey_testbed.wait import NotYet, eventually_blocking

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

HOSTS = ("127.0.95.1", "127.0.95.2")
REPLICATION_PASSWORD = "persistence-test-replication"
KEYS = 200
RELEASES = sorted(
    reference
    for reference, entry in images.catalog().items()
    if entry.env.get("VALKEY_VERSION", "").startswith("9.")
)
MODES: dict[str, dict[str, str]] = {
    "none": {},
    "rdb": {"mode": "rdb", "size": "1Gi"},
    "aof-everysec": {"mode": "aof", "size": "1Gi"},
    "aof-always": {"mode": "aof", "size": "1Gi", "appendfsync": "always"},
}


def config_of(spec: dict[str, str]) -> ResolvedConfig:
    persistence = merge_persistence([{"persistence": spec}] if spec else [])
    assert isinstance(persistence, Persistence), persistence
    return ResolvedConfig(
        ("cfg",), ResolvedImage("img", "valkey/valkey", "9", "9"), {}, {}, {}, persistence=persistence
    )


@attrs.frozen
class Pod:
    """The directories a pod mounts, as the test's own: what /data, the tmpfs and the Secret are."""

    root: Path
    image: ImageEntry

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def cluster_state(self) -> Path:
        return self.root / "cluster-state"

    def write(self, config: ResolvedConfig) -> Path:
        """The rendered file, ports left out and the pod's paths mapped; the Secret's two files."""
        internal = self.root / "internal"
        for directory in (self.data, self.cluster_state, internal):
            directory.mkdir(parents=True, exist_ok=True)
            os.chown(directory, self.image.user, self.image.group)
        (internal / layout.ACL_KEY).write_text(
            "user default on nopass ~* &* +@all\n"
            f"user {REPLICATION_USER} on >{REPLICATION_PASSWORD} ~* &* +@all\n"
        )
        (internal / layout.REPLICATION_AUTH_KEY).write_text(
            replication_auth_conf(REPLICATION_USER, REPLICATION_PASSWORD)
        )
        for file in internal.iterdir():
            file.chmod(0o644)
        text = render_valkey_conf(config, tls=False)
        text = re.sub(r"^(port|cluster-port) .*\n", "", text, flags=re.MULTILINE)
        for mount, local in (
            (layout.CLUSTER_STATE_DIR, self.cluster_state),
            (layout.INTERNAL_DIR, internal),
            (layout.DATA_DIR, self.data),
        ):
            text = re.sub(rf"(?<= ){re.escape(mount)}(?=[/\n])", str(local), text)
        assert "/etc/valkey" not in text and "/var/lib/valkey" not in text and " /data" not in text, text
        path = self.root / "valkey.conf"
        path.write_text(text)
        path.chmod(0o644)
        return path

    def start(self, config: ResolvedConfig, host: str) -> ValkeyServer:
        """valkey-server with the rendered file included last, so every directive in it wins."""
        conf = self.write(config)
        return start_server(
            self.image, host, base_dir=self.root.parent, config={"include": str(conf)}, cluster=True
        )


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


def pods_of(release: str, count: int) -> list[Pod]:
    entry = images.resolve_image(release)
    if entry is None:
        pytest.fail(f"{release} is not installed (python -m valkey_testbed build)")
    base = server_base_dir()
    made = [Pod(base / f"pod-{index}", entry) for index in range(count)]
    for pod in made:
        pod.root.mkdir()
        pod.root.chmod(0o711)
    return made


def config_get(server: ValkeyServer, name: str) -> str:
    reply = server.command("CONFIG", "GET", name)
    assert isinstance(reply, list) and len(reply) == 2, reply
    value = reply[1]
    assert isinstance(value, bytes)
    return value.decode()


def wait_serving(server: ValkeyServer) -> ValkeyServer:
    """Until the node has loaded its data and serves its slots (cluster_state:ok)."""

    def serving() -> bool | NotYet:
        loaded = server.command("DBSIZE")
        reply = server.command("CLUSTER", "INFO")
        ok = isinstance(loaded, int) and isinstance(reply, bytes) and b"cluster_state:ok" in reply
        return ok or NotYet((loaded, reply))

    eventually_blocking(serving, "loaded and cluster_state:ok", 30.0, interval=0.1)
    return server


def own_all_slots(server: ValkeyServer) -> str:
    """Make the single node a one-shard cluster that takes writes; its node id."""
    assert server.command("CLUSTER", "ADDSLOTSRANGE", 0, 16383) == b"OK"
    wait_serving(server)
    return myid(server)


def myid(server: ValkeyServer) -> str:
    reply = server.command("CLUSTER", "MYID")
    assert isinstance(reply, bytes), reply
    return reply.decode()


def write(server: ValkeyServer, start: int, count: int) -> None:
    for index in range(start, start + count):
        assert server.command("SET", f"k{index}", f"v{index}") == b"OK"


def keys_present(server: ValkeyServer) -> set[int]:
    return {index for index in range(3 * KEYS) if server.command("GET", f"k{index}") == f"v{index}".encode()}


def sigkill(server: ValkeyServer) -> None:
    """A crash: no shutdown, no save, no fsync (only the server this test started, by pid)."""
    os.kill(server.record.pid, signal.SIGKILL)
    server.stop(grace=5)  # reaps it


FILES = {
    "none": [],
    "rdb": ["dump.rdb", "nodes.conf"],
    "aof-everysec": ["appendonlydir", "nodes.conf"],
    "aof-always": ["appendonlydir", "nodes.conf"],
}
KEPT_THROUGH_A_CRASH = {
    "rdb": set(range(KEYS)),  # up to the last completed save
    "aof-everysec": set(range(2 * KEYS)),
    "aof-always": set(range(2 * KEYS)),
}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_rendered_file_loads_and_keeps_what_the_mode_promises(
    started: Started, release: str, mode: str
) -> None:
    config = config_of(MODES[mode])
    [pod] = pods_of(release, 1)
    server = started.track(pod.start(config, HOSTS[0]))
    persistent = config.persistence.enabled
    nodes_dir = pod.data if persistent else pod.cluster_state
    assert config_get(server, "dir") == str(pod.data)
    assert config_get(server, "cluster-config-file") == str(nodes_dir / "nodes.conf")
    assert config_get(server, "appendonly") == ("yes" if mode.startswith("aof") else "no")
    assert config_get(server, "save") == ("3600 1 300 100 60 10000" if mode == "rdb" else "")
    assert config_get(server, "repl-diskless-load") == ("disabled" if mode == "rdb" else "on-empty-db")
    assert config_get(server, "rdb-del-sync-files") == ("no" if persistent else "yes")
    if mode.startswith("aof"):
        assert config_get(server, "appendfsync") == MODES[mode].get("appendfsync", "everysec")
        assert config_get(server, "aof-use-rdb-preamble") == "yes"
    identity = own_all_slots(server)
    write(server, 0, KEYS)
    if mode == "rdb":
        assert server.command("SAVE") == b"OK"  # a completed save: what a crash keeps
    write(server, KEYS, KEYS)  # after the save: rdb loses these in a crash, aof keeps them

    sigkill(server)
    assert sorted(path.name for path in pod.data.iterdir()) == FILES[mode]
    again = started.track(pod.start(config, HOSTS[0]))
    if not persistent:
        assert again.command("DBSIZE") == 0
        return
    kept = keys_present(wait_serving(again))
    assert kept == KEPT_THROUGH_A_CRASH[mode], (mode, len(kept))
    assert myid(again) == identity  # the identity came back with the data

    # A graceful stop (SIGTERM and shutdown-on-sigterm, as a pod deletion) keeps every write.
    write(again, 0, 3 * KEYS)
    again.stop(grace=30)
    third = started.track(pod.start(config, HOSTS[0]))
    assert keys_present(wait_serving(third)) == set(range(3 * KEYS))
    assert myid(third) == identity


@pytest.mark.parametrize("release", RELEASES)
def test_an_rdb_replica_keeps_its_full_sync_as_its_dump(started: Started, release: str) -> None:
    """repl-diskless-load disabled: the synced RDB is renamed to the replica's dump.rdb at once, so
    a replica that is promoted and then lost with everything else still has the data of its sync
    (a socket load leaves no dump.rdb until a save point fires, up to an hour later)."""
    config = config_of(MODES["rdb"])
    primary_pod, replica_pod = pods_of(release, 2)
    primary = started.track(primary_pod.start(config, HOSTS[0]))
    replica = started.track(replica_pod.start(config, HOSTS[1]))
    primary_id = own_all_slots(primary)
    write(primary, 0, KEYS)
    assert primary.command("CLUSTER", "MEET", replica.host, replica.port) == b"OK"

    def knows_the_primary() -> bool | NotYet:
        reply = replica.command("CLUSTER", "NODES")
        return (isinstance(reply, bytes) and primary_id.encode() in reply) or NotYet(reply)

    eventually_blocking(knows_the_primary, "the replica to know the primary", 30.0, interval=0.1)
    assert replica.command("CLUSTER", "REPLICATE", primary_id) == b"OK"

    def in_sync() -> bool | NotYet:
        fields = replica.info("replication")
        link = fields.get("master_link_status") or fields.get("primary_link_status")
        return link == "up" or NotYet(fields)

    eventually_blocking(in_sync, "the replica's link up", 60.0, interval=0.1)
    assert replica.command("DBSIZE") == KEYS
    dump = replica_pod.data / "dump.rdb"
    assert dump.is_file() and dump.stat().st_size > 0, sorted(p.name for p in replica_pod.data.iterdir())
    assert replica.info("persistence")["rdb_saves"] == "0"  # no save made it: the sync did


def test_a_claim_written_in_one_mode_is_not_read_in_the_other(started: Started) -> None:
    """Why a mode change needs new pods on fresh claims (docs/cluster-internals.md): restarted in aof
    mode, an rdb node ignores its dump.rdb and comes back empty with its identity and slots;
    restarted in rdb mode, an aof node loads whatever stale dump.rdb lies in dir."""
    [pod] = pods_of(RELEASES[-1], 1)
    rdb, aof = config_of(MODES["rdb"]), config_of(MODES["aof-everysec"])
    server = started.track(pod.start(rdb, HOSTS[0]))
    identity = own_all_slots(server)
    write(server, 0, KEYS)
    server.stop(grace=30)  # SIGTERM saves: dump.rdb holds every key
    as_aof = started.track(pod.start(aof, HOSTS[0]))
    assert as_aof.command("DBSIZE") == 0
    assert myid(wait_serving(as_aof)) == identity  # an empty node that still owns every slot
    write(as_aof, KEYS, KEYS)
    as_aof.stop(grace=30)
    as_rdb = started.track(pod.start(rdb, HOSTS[0]))
    assert keys_present(wait_serving(as_rdb)) == set(range(KEYS))  # the stale snapshot, not the AOF
