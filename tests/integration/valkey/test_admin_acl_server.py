"""The operator's admin user with only ADMIN_COMMANDS, against real valkey-server processes.

The nodes start from the ACL file the operator renders (internal_users), over TLS as a TLS
cluster runs, and every admin path runs authenticated as the admin user through the operator's
own code: the observer's probe pipeline, the topology steps the actor sends (MEET,
ADDSLOTSRANGE, REPLICATE, MIGRATESLOTS, FAILOVER and FAILOVER TAKEOVER, FORGET), CONFIG SET of a
runtime tunable and of the TLS files, the ACL sync (SETUSER/DELUSER, the admin user's own rules
included), the operator's redis_* series read and a backup's RDB stream in both forms. Some of
these reads swallow an error reply (an unknown fact, not a failure), so each node's ACL LOG must
show no denial of the admin user afterwards. A node still running the old `~* &* +@all` admin
user is moved to the new rules by the same ACL SETUSER the sync sends, on the connection that
sends it, and keeps answering. Commands outside the list are refused with NOPERM.

The harness itself talks as `default`, with a password (the operator's file disables it).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controllers.cluster.render.acl import ADMIN_COMMANDS, internal_users
from controllers.cluster.valkey_exporter import NodeTarget, ValkeyExporter
from controllers.shared.credentials import InternalCredentials
from controllers.shared.probe import probe, probe_connection
from valkey_operator.api.resources import ADMIN_USER, REPLICATION_USER
from valkey_operator.api.tunables import OPERATOR_RUNTIME
from valkey_operator.valkey.acl import normal_form, parse_acl_list
from valkey_operator.valkey.admin import (
    AdminClient,
    Credentials,
    NodeConnection,
    ValkeyCommandError,
    parse_info,
)
from valkey_operator.valkey.rdb_stream import SYNC_DELAY, open_rdb_stream
from valkey_testbed import images
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.resp import ReplyError
from valkey_testbed.valkeyproc import (
    ValkeyServer,
    free_cluster_port,
    server_base_dir,
    start_server,
    stop_servers,
    write_tls_files,
)
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HOSTS = ("127.0.97.1", "127.0.97.2", "127.0.97.3", "127.0.97.4")
HARNESS = "admin-acl-harness-password"
CREDENTIALS = InternalCredentials(admin_password="o" * 40, replication_password="p" * 40)
ADMIN_RULES = next(
    user.rules for user in internal_users(CREDENTIALS, exporter=True) if user.username == ADMIN_USER
)
OLD_ADMIN_RULES = ("reset", "on", f"#{CREDENTIALS.admin_hash}", "~*", "&*", "+@all")
"""What the admin user had before ADMIN_COMMANDS: what a node of an upgraded cluster still runs."""

Check = Callable[[NodeConnection], Awaitable[bool | str]]

REFUSED = (
    ("FLUSHALL",),
    ("FLUSHDB",),
    ("KEYS", "*"),
    ("SCAN", "0"),
    ("DBSIZE",),
    ("GET", "k"),
    ("SET", "k", "v"),
    ("SHUTDOWN", "ABORT"),
    ("BGSAVE",),
    ("CONFIG", "REWRITE"),
    ("CONFIG", "RESETSTAT"),
    ("CLIENT", "LIST"),
    ("CLIENT", "KILL", "ID", "999999"),
    ("ACL", "LOAD"),
    ("ACL", "GETUSER", "default"),
    ("CLUSTER", "SETSLOT", "16000", "STABLE"),
    ("CLUSTER", "COUNTKEYSINSLOT", "1"),
    ("REPLICAOF", "NO", "ONE"),
    ("EVAL", "return 1", "0"),
    ("FUNCTION", "LIST"),
    ("SLOWLOG", "GET"),
    ("LATENCY", "LATEST"),
    ("MEMORY", "STATS"),
    ("MULTI",),
    ("WAIT", "0", "0"),
    ("PUBLISH", "c", "m"),
    ("SUBSCRIBE", "c"),
)
"""Harmless on an empty node even if allowed (each on a connection of its own): destructive
commands are not needed to show that what is not listed is refused."""


def acl_file(default_password: str) -> str:
    """The operator's rendered internal users, with `default` opened for the harness only."""
    lines = [
        f"user default on #{hashlib.sha256(default_password.encode()).hexdigest()} ~* &* +@all",
        *(
            user.file_line()
            for user in internal_users(CREDENTIALS, exporter=True)
            if user.username != "default"
        ),
    ]
    return "\n".join(lines) + "\n"


def node_config(base: Path) -> dict[str, str]:
    path = base / "users.acl"
    path.write_text(acl_file(HARNESS))
    path.chmod(0o644)
    return {
        "aclfile": str(path),
        "acl-pubsub-default": "resetchannels",
        "masteruser": REPLICATION_USER,
        "masterauth": CREDENTIALS.replication_password,
    }


@pytest.fixture(scope="module")
def nodes() -> Iterator[list[ValkeyServer]]:
    entry = images.resolve_image(images.newest_image())
    if entry is None:
        pytest.fail("no Valkey image installed (python -m valkey_testbed build)")
    base = server_base_dir()
    tls = write_tls_files(base / "tls", HOSTS)
    config = node_config(base)
    port = free_cluster_port(HOSTS[0])
    started: list[ValkeyServer] = []
    try:
        for host in HOSTS:
            started.append(
                start_server(
                    entry, host, port, base_dir=base, config=config, cluster=True, password=HARNESS, tls=tls
                )
            )
        yield started
    finally:
        stop_servers(started)


def admin_of(nodes: list[ValkeyServer]) -> AdminClient:
    tls = nodes[0].tls
    assert tls is not None
    return AdminClient(
        credentials=Credentials(username=ADMIN_USER, password=CREDENTIALS.admin_password),
        ca_pem=tls.ca.read_text(),
        allowed_networks=LOOPBACK_NETWORKS,
        port=nodes[0].port,
    )


def harness(node: ValkeyServer, *args: str) -> Any:
    reply = node.command(*args)
    assert not isinstance(reply, ReplyError), f"{args}: {reply}"
    return reply


def denials(node: ValkeyServer) -> list[str]:
    """The admin user's entries in the node's ACL LOG: every command it was refused."""
    found = []
    for entry in harness(node, "ACL", "LOG") or []:
        fields = {str(k, "utf-8"): v for k, v in zip(entry[::2], entry[1::2], strict=False)}
        if fields.get("username") == ADMIN_USER.encode():
            found.append(f"{fields.get('reason')!r} {fields.get('object')!r}")
    return found


@pytest.fixture
def clean_logs(nodes: list[ValkeyServer]) -> Iterator[None]:
    for node in nodes:
        harness(node, "ACL", "LOG", "RESET")
    yield


@pytest.fixture
def unformed(nodes: list[ValkeyServer], clean_logs: None) -> None:
    """The module's nodes in no cluster and holding no key, so the bootstrap test forms one from
    scratch however often it runs (a --count repeat finds the cluster the last run formed)."""
    for node in nodes:
        if harness(node, "ROLE")[0] == b"master":
            harness(node, "FLUSHALL")
    for node in nodes:
        harness(node, "CLUSTER", "RESET", "HARD")


async def myid(admin: AdminClient, node: ValkeyServer) -> str:
    async with admin.connect(node.host) as connection:
        return await connection.text("CLUSTER", "MYID")


async def wait_for(
    admin: AdminClient, node: ValkeyServer, what: str, check: Check, timeout: float = 60
) -> None:
    async def done() -> bool | NotYet:
        async with admin.connect(node.host) as connection:
            seen = await check(connection)
        return True if seen is True else NotYet(seen)

    await eventually(done, f"{node.host}: {what}", timeout)


async def test_every_admin_path_runs_as_the_admin_user(nodes: list[ValkeyServer], unformed: None) -> None:
    admin = admin_of(nodes)
    a, b, c, d = nodes
    ids = {node.host: await myid(admin, node) for node in nodes}

    # The observer's probe: every read in one pipeline, COMMAND INFO of role commands included.
    for node in nodes:
        observation, extras = await probe(admin, node.host, ["get", "cluster|migrateslots"])
        assert observation.reachable, observation.error
        assert observation.node_id == ids[node.host] and observation.shard_id
        assert observation.acl is not None and observation.acl[ADMIN_USER] == normal_form(ADMIN_RULES)
        assert observation.config is not None and observation.config
        assert observation.commands == {"get": True, "cluster|migrateslots": True}
        assert observation.served is not None and extras.used_memory

    # Bootstrap: MEET, ADDSLOTSRANGE, REPLICATE (as the actor's steps call them).
    async with admin.connect(a.host) as connection:
        await connection.cluster_meet(b.host, a.port)
        await connection.cluster_meet(c.host, a.port)
        await connection.cluster_addslotsrange([(0, 16383)])

    async def knows_three(connection: NodeConnection) -> bool | str:
        text = await connection.cluster_nodes()
        return sum(1 for line in text.splitlines() if "handshake" not in line) == 3 or text

    for node in (a, b, c):
        await wait_for(admin, node, "3 nodes known", knows_three)
    async with admin.connect(c.host) as connection:
        await connection.cluster_replicate(ids[a.host])

    async def ok(connection: NodeConnection) -> bool | str:
        state = (await connection.cluster_info()).get("cluster_state")
        return state == "ok" or str(state)

    async def link_up(connection: NodeConnection) -> bool | str:
        info = await connection.info("replication")
        return info.get("master_link_status") == "up" or str(info.get("master_link_status"))

    for node in (a, b, c):
        await wait_for(admin, node, "cluster_state ok", ok)
    await wait_for(admin, c, "replica linked", link_up)

    # Scaling: an atomic slot migration to the empty primary, followed in GETSLOTMIGRATIONS.
    async with admin.connect(a.host) as connection:
        await connection.cluster_migrateslots([(0, 99)], ids[b.host])

    async def migrated(connection: NodeConnection) -> bool | str:
        jobs = await connection.cluster_getslotmigrations()
        done = bool(jobs) and all(job.get("state") == "success" for job in jobs)
        return done or str(jobs)

    await wait_for(admin, a, "migration done", migrated)

    async def owns_first_slots(connection: NodeConnection) -> bool | str:
        myself = next(line for line in (await connection.cluster_nodes()).splitlines() if "myself" in line)
        return myself.split()[8:] == ["0-99"] or myself

    await wait_for(admin, b, "slots 0-99 at b", owns_first_slots)

    # Switchover (FAILOVER on the replica), then promotion without the primary's consent (TAKEOVER).
    def role_is(wanted: str) -> Check:
        async def check(connection: NodeConnection) -> bool | str:
            role = (await connection.info("replication")).get("role")
            return role == wanted or str(role)

        return check

    async with admin.connect(c.host) as connection:
        await connection.cluster_failover()
    await wait_for(admin, c, "c primary", role_is("master"))
    await wait_for(admin, a, "a replica", role_is("slave"))
    async with admin.connect(a.host) as connection:
        await connection.cluster_failover("TAKEOVER")
    await wait_for(admin, a, "a primary", role_is("master"))

    # Removal of a node: FORGET on every node that knows it.
    async with admin.connect(a.host) as connection:
        await connection.cluster_meet(d.host, a.port)
    for node in nodes:
        await wait_for(admin, node, "4 nodes known", lambda conn: _count_known(conn, 4))
    for node in (a, b, c):
        async with admin.connect(node.host) as connection:
            await connection.cluster_forget(ids[d.host])

    # Runtime tunables and the TLS reload (the node's own files again), then the ACL sync.
    for node in nodes:
        tls = node.tls
        assert tls is not None
        async with admin.connect(node.host) as connection:
            await connection.config_set({"maxmemory-policy": "allkeys-lru", "cluster-node-timeout": "5000"})
            await connection.config_set(
                {
                    "tls-cert-file": str(tls.cert),
                    "tls-key-file": str(tls.key),
                    "tls-ca-cert-file": str(tls.ca),
                }
            )
            assert (await connection.config_get("maxmemory-policy")) == {"maxmemory-policy": "allkeys-lru"}
            await connection.acl_setuser(ADMIN_USER, ADMIN_RULES)  # its own rules, on its own connection
            await connection.acl_setuser("stray", ["reset", "on", "nopass", "+ping"])
            assert await connection.acl_deluser("stray") == 1
            assert await connection.text("CLUSTER", "MYID") == ids[node.host]  # still answering

    # The operator's redis_* series: INFO and CLUSTER INFO of every node.
    exporter = ValkeyExporter(max_age=0.0, deadline=10.0)
    exporter.update("ns", "c", admin, [NodeTarget(pod=node.host, ip=node.host, shard="0") for node in nodes])
    body = await exporter.refresh()
    families = {family.name: family for family in text_string_to_metric_families(body.decode())}
    assert {sample.labels["pod"]: sample.value for sample in families["redis_up"].samples} == {
        node.host: 1.0 for node in nodes
    }
    assert "redis_cluster_state" in families and "redis_connected_clients" in families

    # A backup's RDB stream as the backup opens it (the sync delay lowered for the moment its SYNC
    # starts, then put back over a second connection), both forms, from a primary and the replica.
    tls = a.tls
    assert tls is not None
    for node, diskless in ((a, True), (a, False), (c, True)):
        async with open_rdb_stream(
            node.host,
            node.port,
            admin.credentials,
            ca_pem=tls.ca.read_text(),
            allowed_networks=LOOPBACK_NETWORKS,
            diskless=diskless,
            sync_delay=OPERATOR_RUNTIME[SYNC_DELAY],
        ) as stream:
            size = sum([len(chunk) async for chunk in stream.chunks()])
        assert size > 0
        async with admin.connect(node.host) as connection:
            assert await connection.config_get(SYNC_DELAY) == {SYNC_DELAY: OPERATOR_RUNTIME[SYNC_DELAY]}

    # A OneInstant backup: the primary's writes paused, then both streams opened under the pause
    # (CONFIG SET of the sync delay and SYNC are not writes: the pause holds neither), each
    # announcing its RDB before a byte of it is read, then the pause lifted.
    primary = next(node for node in nodes if node.host == a.host)
    async with admin.connect(primary.host) as paused:
        await paused.client_pause_write(2000)
        try:
            for node in (a, c):
                seen: list[str] = []
                async with open_rdb_stream(
                    node.host,
                    node.port,
                    admin.credentials,
                    ca_pem=tls.ca.read_text(),
                    allowed_networks=LOOPBACK_NETWORKS,
                    sync_delay=OPERATOR_RUNTIME[SYNC_DELAY],
                    announced=functools.partial(seen.append, "announced"),
                ) as stream:
                    assert seen == ["announced"]
                    assert sum([len(chunk) async for chunk in stream.chunks()]) > 0
        finally:
            await paused.client_unpause()

    for node in nodes:
        assert denials(node) == [], f"{node.host} refused the admin user: {denials(node)}"


async def _count_known(connection: NodeConnection, wanted: int) -> bool | str:
    text = await connection.cluster_nodes()
    return sum(1 for line in text.splitlines() if "handshake" not in line) >= wanted or text


async def test_an_upgraded_node_moves_to_the_new_rules_without_losing_the_operator(
    nodes: list[ValkeyServer],
) -> None:
    """A node started before ADMIN_COMMANDS has the old admin user; the sync's ACL SETUSER of the
    admin user, sent as the admin user, narrows it and the same connection keeps working."""
    node = nodes[3]
    admin = admin_of(nodes)
    harness(node, "ACL", "SETUSER", ADMIN_USER, *OLD_ADMIN_RULES)
    async with admin.connect(node.host) as connection:
        before, _ = await probe_connection(connection)
        assert before.acl is not None and before.acl[ADMIN_USER] == normal_form(OLD_ADMIN_RULES)
        assert before.acl[ADMIN_USER] != normal_form(ADMIN_RULES)  # the planner's SyncAcl trigger
        assert await connection.command("DBSIZE") == 0  # the old rules allowed it
        await connection.acl_setuser(ADMIN_USER, ADMIN_RULES)
        after, _ = await probe_connection(connection)  # the same connection, after the change
        assert after.reachable, after.error
        assert after.acl is not None and after.acl[ADMIN_USER] == normal_form(ADMIN_RULES)
        with pytest.raises(ValkeyCommandError, match="no permissions to run"):
            await connection.command("DBSIZE")
        await connection.acl_setuser(ADMIN_USER, ADMIN_RULES)  # idempotent, as every later sync
        assert await connection.text("CLUSTER", "MYID")
    observation, _ = await probe(admin, node.host)  # and a new connection authenticates
    assert observation.reachable and observation.acl is not None
    assert parse_acl_list([_acl_line(node)])[ADMIN_USER] == normal_form(ADMIN_RULES)


def _acl_line(node: ValkeyServer) -> str:
    listed = [str(line, "utf-8") for line in harness(node, "ACL", "LIST")]
    return next(line for line in listed if line.startswith(f"user {ADMIN_USER} "))


async def test_commands_outside_the_list_are_refused(nodes: list[ValkeyServer]) -> None:
    admin = admin_of(nodes)
    node = nodes[1]
    allowed = []
    for command in REFUSED:
        async with admin.connect(node.host) as connection:
            try:
                reply = await connection.command(*command)
            except ValkeyCommandError as exc:
                if "no permissions to run" not in str(exc):
                    allowed.append(f"{' '.join(command)}: {exc}")
            else:
                allowed.append(f"{' '.join(command)}: {reply!r}")
    assert allowed == [], "not refused with NOPERM (no permissions to run):\n" + "\n".join(allowed)
    # CONFIG SET is one permission for every parameter; the file paths are protected configs.
    # DEBUG is refused before the ACL is asked (enable-debug-command no, Valkey's default).
    async with admin.connect(node.host) as connection:
        with pytest.raises(ValkeyCommandError, match=r"no permissions to run|DEBUG command not allowed"):
            await connection.command("DEBUG", "SLEEP", "0")
        for name, value in (("dir", "/tmp"), ("dbfilename", "x.rdb"), ("aclfile", "/tmp/x")):
            with pytest.raises(ValkeyCommandError, match=r"protected config|immutable"):
                await connection.config_set({name: value})
    info = parse_info(str(harness(node, "INFO", "server"), "utf-8"))
    assert info["valkey_version"]


@pytest.mark.parametrize("reference", ["valkey/valkey:9.0.0", "valkey/valkey:9.1.0", "newest"])
async def test_every_release_loads_the_rules_and_lists_them_as_rendered(reference: str) -> None:
    """Each rule names a command or subcommand the release knows (or the ACL file would stop the
    node from starting), and ACL LIST reads back to the same normal form (or every pass would set
    the admin user again)."""
    reference = images.newest_image() if reference == "newest" else reference
    entry = images.resolve_image(reference)
    if entry is None:
        pytest.fail(f"{reference} is not installed (python -m valkey_testbed build)")
    base = server_base_dir()
    node = start_server(
        entry, "127.0.97.9", base_dir=base, config=node_config(base), cluster=True, password=HARNESS
    )
    try:
        assert parse_acl_list([_acl_line(node)])[ADMIN_USER] == normal_form(ADMIN_RULES)
        names = [rule[1:] for rule in ADMIN_COMMANDS]
        known = harness(node, "COMMAND", "INFO", *names)
        assert [name for name, entry in zip(names, known, strict=True) if entry is None] == []
    finally:
        node.stop()
