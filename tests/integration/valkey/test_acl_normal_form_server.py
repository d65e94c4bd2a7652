"""valkey.acl.normal_form against real servers: whatever rules the operator renders, the user ACL
LIST shows afterwards has the same normal form, on every Valkey the test bed has at or above 9.0.

Hypothesis draws roles and permission entries the way admission allows them (categories, commands
and subcommands, allow and deny, key patterns of each access, channels), the renderer turns them
into rules, a real server applies them with ACL SETUSER, and its ACL LIST is compared.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controllers.cluster.render.acl import user_acl
from valkey_operator.api.cluster import AclUser
from valkey_operator.api.role import ValkeyRoleSpec
from valkey_operator.valkey.acl import normal_form, parse_acl_list
from valkey_testbed import images
from valkey_testbed.valkeyproc import ValkeyServer, server_base_dir, start_server

pytestmark = pytest.mark.integration

HOST = "127.0.94.1"
CATEGORIES = ("read", "write", "string", "hash", "admin", "dangerous", "keyspace", "pubsub", "all", "fast")
COMMANDS = ("get", "set", "config|get", "config", "client|setname", "client", "flushall", "hset", "info")
PATTERN = st.text(alphabet="abc:*?[]{}-_.", min_size=1, max_size=6)


@pytest.fixture(scope="module", params=["9.0.0", "newest"])
def server(request: pytest.FixtureRequest) -> Iterator[ValkeyServer]:
    reference = images.newest_image() if request.param == "newest" else f"valkey/valkey:{request.param}"
    entry = images.resolve_image(reference)
    if entry is None:
        pytest.fail(f"{reference} is not installed (python -m valkey_testbed build)")
    running = start_server(entry, HOST, base_dir=server_base_dir())
    yield running
    running.stop()


ROLE = st.builds(
    lambda categories, commands: ValkeyRoleSpec.from_dict(
        {
            "categories": [{"name": name, "access": access} for name, access in categories],
            "commands": [{"name": name, "access": access} for name, access in commands],
        }
    ),
    st.lists(
        st.tuples(st.sampled_from(CATEGORIES), st.sampled_from(["allow", "deny"])), unique_by=lambda c: c[0]
    ),
    st.lists(
        st.tuples(st.sampled_from(COMMANDS), st.sampled_from(["allow", "deny"])), unique_by=lambda c: c[0]
    ),
)
PERMISSION = st.fixed_dictionaries(
    {
        "roleRef": st.sampled_from(["r0", "r1"]),
        "keys": st.lists(
            st.fixed_dictionaries(
                {"pattern": PATTERN, "access": st.sampled_from(["read", "write", "readwrite"])}
            ),
            max_size=3,
        ),
        "channels": st.lists(PATTERN, max_size=2),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(PERMISSION, min_size=0, max_size=3), ROLE, ROLE, st.booleans())
def test_rendered_users_list_with_the_same_normal_form(
    server: ValkeyServer, permissions: list[dict], first: ValkeyRoleSpec, second: ValkeyRoleSpec, rotate: bool
) -> None:
    hashes = ["a" * 64, "b" * 64] if rotate else ["c" * 64]
    user = AclUser.from_dict({"username": "app", "passwordHashes": hashes, "permissions": permissions})
    rendered = user_acl(user, {"r0": first, "r1": second})
    reply = server.command("ACL", "SETUSER", "app", *rendered.rules)
    assert reply in (b"OK", "OK"), reply
    listed = [line.decode() if isinstance(line, bytes) else line for line in server.command("ACL", "LIST")]
    assert parse_acl_list(listed)["app"] == normal_form(rendered.rules), listed
