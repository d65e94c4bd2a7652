"""The cluster observer's probe against real valkey-server processes.

A probe sends all its reads in one pipeline; these check that each fact is
still read as the single commands read it, that an error reply to an optional
read leaves only that fact unknown, and that a node below the version floor or
without a listener is reported as such.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from controllers.shared.probe import probe
from valkey_operator.api.cluster import NodeRole
from valkey_operator.api.tunables import OPERATOR_RUNTIME, PROBED_NAMES
from valkey_operator.valkey.admin import AdminClient, Credentials
from valkey_testbed import images
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server

pytestmark = pytest.mark.integration

PASSWORD = "probe-test-password"
LIMITED = "probe-limited"


def running(reference: str, host: str) -> Iterator[ValkeyServer]:
    entry = images.resolve_image(reference)
    if entry is None:
        pytest.fail(f"{reference} is not installed (python -m valkey_testbed build)")
    server = start_server(entry, host, base_dir=server_base_dir(), cluster=True, password=PASSWORD)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def current() -> Iterator[ValkeyServer]:
    yield from running(images.newest_image(), "127.0.94.1")


@pytest.fixture(scope="module")
def below_floor() -> Iterator[ValkeyServer]:
    yield from running("valkey/valkey:8.1.8", "127.0.94.2")


def admin(server: ValkeyServer, username: str = "default") -> AdminClient:
    return AdminClient(
        credentials=Credentials(username=username, password=PASSWORD),
        allowed_networks=LOOPBACK_NETWORKS,
        port=server.port,
    )


async def test_every_fact_of_a_current_node_is_read_in_one_probe(current: ValkeyServer) -> None:
    observation, extras = await probe(admin(current), current.host, ["cluster|migrateslots", "nosuchcommand"])
    assert observation.reachable, observation.error
    assert observation.version is not None and observation.version >= (9, 0, 1)
    assert observation.node_id == str(current.command("CLUSTER", "MYID"), "ascii")
    assert observation.shard_id == str(current.command("CLUSTER", "MYSHARDID"), "ascii")
    assert observation.role is NodeRole.PRIMARY and observation.slots == ()
    assert observation.cluster_ok is False  # one node, no slots assigned
    assert observation.migrations == ()
    assert observation.config is not None and set(observation.config) == set(PROBED_NAMES)
    assert observation.config["repl-diskless-sync-delay"] == OPERATOR_RUNTIME["repl-diskless-sync-delay"]
    assert observation.acl is not None and "default" in observation.acl
    assert observation.commands == {"cluster|migrateslots": True, "nosuchcommand": False}
    assert extras.used_memory is not None and extras.used_memory > 0


async def test_an_error_reply_leaves_only_its_fact_unknown(current: ValkeyServer) -> None:
    """A user refused ACL and CONFIG: the node is reachable, its other facts read, those two unknown."""
    current.command("ACL", "SETUSER", LIMITED, "on", f">{PASSWORD}", "~*", "+@all", "-@admin")
    observation, _ = await probe(admin(current, LIMITED), current.host)
    assert observation.reachable, observation.error
    assert observation.node_id is not None and observation.cluster_ok is False
    assert observation.acl is None and observation.config is None
    assert observation.commands == {}


async def test_a_node_below_the_floor_is_reported_with_its_version_only(below_floor: ValkeyServer) -> None:
    observation, _ = await probe(admin(below_floor), below_floor.host)
    assert observation.reachable, observation.error
    assert observation.version == (8, 1, 8)
    assert observation.node_id is None and observation.config is None


async def test_a_node_without_a_listener_is_unreachable(current: ValkeyServer) -> None:
    observation, _ = await probe(admin(current), "127.0.94.3")
    assert not observation.reachable and observation.error
