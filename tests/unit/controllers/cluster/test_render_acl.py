"""ACL rendering: internal users, one selector per permission entry, rule order, and safe patterns."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from render_support import parse_acl_file, selector_ops

from controllers.cluster.render.acl import (
    ADMIN_COMMANDS,
    REPLICATION_RULES,
    TOPOLOGY_COMMANDS,
    AclError,
    RenderedAcl,
    render_acl,
    role_commands,
)
from controllers.shared.credentials import InternalCredentials, sha256_hex
from valkey_operator.api.cluster import AclUser
from valkey_operator.api.role import ValkeyRole, ValkeyRoleSpec

CREDENTIALS = InternalCredentials(admin_password="a" * 40, replication_password="r" * 40)
HASH_A = sha256_hex("alpha")
HASH_B = sha256_hex("beta")

ROLES = {
    "reader": ValkeyRoleSpec.from_dict({"categories": [{"name": "read"}]}),
    "writer": ValkeyRoleSpec.from_dict(
        {
            "categories": [{"name": "write"}, {"name": "dangerous", "access": "deny"}, {"name": "read"}],
            "commands": [{"name": "flushdb", "access": "deny"}, {"name": "keys", "access": "allow"}],
        }
    ),
    "everything": ValkeyRoleSpec.from_dict({"categories": [{"name": "all"}]}),
}


def user(
    name: str = "app", hashes: tuple[str, ...] = (HASH_A,), permissions: list[Any] | None = None
) -> AclUser:
    return AclUser.from_dict(
        {
            "username": name,
            "passwordHashes": list(hashes),
            "permissions": permissions
            if permissions is not None
            else [{"roleRef": "reader", "keys": [{"pattern": "app:*"}]}],
        }
    )


def render(*users: AclUser, roles: dict[str, Any] | None = None, **kwargs: Any) -> RenderedAcl:
    result = render_acl(users, (roles or ROLES).get, CREDENTIALS, **kwargs)
    assert isinstance(result, RenderedAcl), result
    return result


def selectors(rules: tuple[str, ...] | list[str]) -> list[str]:
    return [rule for rule in rules if rule.startswith("(")]


def test_internal_users_come_first_and_default_is_off() -> None:
    acl = render(user())
    assert acl.usernames == ("default", "valkey-operator", "valkey-replication", "app")
    assert acl.rules_of("default") == ("reset", "off")
    admin = acl.rules_of("valkey-operator")
    assert admin == ("reset", "on", f"#{sha256_hex('a' * 40)}", *ADMIN_COMMANDS)
    assert admin is not None and not any(rule.startswith(("~", "&", "%", "+@", "(")) for rule in admin)
    replication = acl.rules_of("valkey-replication")
    assert replication == ("reset", "on", f"#{sha256_hex('r' * 40)}", *REPLICATION_RULES)
    for needed in ("+psync", "+replconf", "+ping", "+cluster|syncslots", "+select", "+@write", "~*"):
        assert needed in replication
    assert "a" * 40 not in acl.text and "r" * 40 not in acl.text  # only hashes


def test_user_rules_in_documented_order() -> None:
    rules = render(user(hashes=(HASH_A, HASH_B))).rules_of("app")
    assert rules == ("reset", "on", f"#{HASH_A}", f"#{HASH_B}", *TOPOLOGY_COMMANDS, "(~app:* +@read)")


def test_rotation_lists_every_hash_once() -> None:
    rules = render(user(hashes=(HASH_A, HASH_B, HASH_A))).rules_of("app")
    assert rules is not None
    assert [rule for rule in rules if rule.startswith("#")] == [f"#{HASH_A}", f"#{HASH_B}"]


def test_one_selector_per_permission_entry() -> None:
    permissions = [
        {"roleRef": "reader", "keys": [{"pattern": "shared:*", "access": "read"}, {"pattern": "cache:*"}]},
        {"roleRef": "writer", "keys": [{"pattern": "own:*", "access": "write"}], "channels": ["events:*"]},
    ]
    rules = render(user(permissions=permissions)).rules_of("app")
    assert rules is not None
    assert selectors(rules) == [
        "(%R~shared:* ~cache:* +@read)",
        "(%W~own:* &events:* +@write +@read -@dangerous +keys -flushdb)",
    ]
    # no key or channel pattern and no data command outside a selector: entries never mix
    root = [rule for rule in rules if not rule.startswith("(")]
    assert not any(rule[0] in "~%&" for rule in root)
    assert not any(rule.startswith("+@") for rule in root)


def test_channels_default_to_none() -> None:
    rules = render(user()).rules_of("app")
    assert rules is not None
    assert not any("&" in rule for rule in rules)


def test_role_order_does_not_change_the_rules() -> None:
    categories = [{"name": "write"}, {"name": "dangerous", "access": "deny"}, {"name": "read"}]
    commands = [{"name": "flushdb", "access": "deny"}, {"name": "keys"}]
    seen = set()
    for cats, cmds in itertools.product(itertools.permutations(categories), itertools.permutations(commands)):
        role = ValkeyRoleSpec.from_dict({"categories": list(cats), "commands": list(cmds)})
        rules = render(
            user(permissions=[{"roleRef": "r", "keys": [{"pattern": "k"}]}]), roles={"r": role}
        ).rules_of("app")
        assert rules is not None
        groups = selector_ops(selectors(rules)[0])
        # allows before denies, categories before commands
        assert groups.index("-@dangerous") > max(groups.index("+@write"), groups.index("+@read"))
        assert groups.index("+keys") > groups.index("-@dangerous")
        assert groups.index("-flushdb") > groups.index("+keys")
        seen.add(tuple(sorted(groups[:3])))
    assert len(seen) == 1


def test_category_all_and_deny() -> None:
    role = ValkeyRoleSpec.from_dict(
        {"categories": [{"name": "all", "access": "deny"}, {"name": "all"}], "commands": [{"name": "get"}]}
    )
    rules = render(
        user(permissions=[{"roleRef": "r", "keys": [{"pattern": "*"}]}]), roles={"r": role}
    ).rules_of("app")
    assert rules is not None
    assert selectors(rules) == ["(~* +@all -@all +get)"]


def test_star_patterns_collapse() -> None:
    """Valkey rejects a key (channel) pattern after ~* (&*), so the renderer never emits one."""
    permissions = [
        {
            "roleRef": "reader",
            "keys": [{"pattern": "a:*"}, {"pattern": "*"}, {"pattern": "b:*", "access": "read"}],
            "channels": ["x", "*", "y"],
        }
    ]
    rules = render(user(permissions=permissions)).rules_of("app")
    assert rules is not None
    assert selectors(rules) == ["(~* &* +@read)"]


def test_read_star_does_not_collapse() -> None:
    permissions = [{"roleRef": "reader", "keys": [{"pattern": "*", "access": "read"}, {"pattern": "a:*"}]}]
    rules = render(user(permissions=permissions)).rules_of("app")
    assert rules is not None
    assert selectors(rules) == ["(%R~* ~a:* +@read)"]


def test_roles_may_be_models() -> None:
    role = ValkeyRole.from_dict({"metadata": {"name": "reader"}, "spec": {"categories": [{"name": "read"}]}})
    acl = render(user(), roles={"reader": role})
    assert acl.rules_of("app") == render(user()).rules_of("app")


def test_missing_roles_are_an_error_value() -> None:
    users = [
        user("a", permissions=[{"roleRef": "ghost"}, {"roleRef": "reader"}]),
        user("b", permissions=[{"roleRef": "phantom"}]),
    ]
    result = render_acl(users, ROLES.get, CREDENTIALS)
    assert result == AclError("RoleNotFound", "ValkeyRole not found: ghost, phantom")


def test_invalid_input_is_an_error_value() -> None:
    bad = [
        user("default"),
        user("dup"),
        user("dup"),
        user("x", hashes=("ABC",)),
        user("y", permissions=[{"roleRef": "reader", "keys": [{"pattern": "a b"}]}]),
        user("z", permissions=[{"roleRef": "reader", "channels": ["c)"]}]),
    ]
    result = render_acl(bad, ROLES.get, CREDENTIALS)
    assert isinstance(result, AclError) and result.reason == "InvalidAcl"
    for fragment in (
        "default is reserved",
        "dup is listed more than once",
        "64 lowercase hex",
        "'a b'",
        "'c)'",
    ):
        assert fragment in result.message


def test_role_commands_lists_every_command_rule_of_the_users_roles() -> None:
    role = ValkeyRoleSpec.from_dict(
        {
            "categories": [{"name": "read"}],
            "commands": [{"name": "nosuch"}, {"name": "get", "access": "deny"}],
        }
    )
    spec_user = user(permissions=[{"roleRef": "r"}, {"roleRef": "r"}, {"roleRef": "missing"}])
    assert role_commands(spec_user, {"r": role}.get) == (("r", "nosuch"), ("r", "get"))


def test_file_text_is_what_valkey_parses() -> None:
    permissions = [
        {"roleRef": "reader", "keys": [{"pattern": "a:*", "access": "read"}]},
        {"roleRef": "writer", "keys": [{"pattern": "b:*"}], "channels": ["c"]},
    ]
    acl = render(user(permissions=permissions), user("other"))
    parsed = parse_acl_file(acl.text)
    assert list(parsed) == list(acl.usernames)
    for entry in acl.users:
        assert parsed[entry.username] == list(entry.rules)
    assert not any(line.startswith("#") for line in acl.text.splitlines())  # comments break the file


def test_stable_text() -> None:
    assert render(user()).text == render(user()).text
    assert render(user()).text != render(user(hashes=(HASH_B,))).text


# Admission's pattern rule: no whitespace, parentheses or control characters. Everything else,
# including quotes, backslashes and glob syntax, must reach Valkey as exactly one pattern.
PATTERN = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp"), blacklist_characters="()\x85\xa0"
    ),
    min_size=1,
    max_size=12,
).filter(lambda s: not any(c.isspace() for c in s))


@given(
    st.lists(st.tuples(PATTERN, st.sampled_from(["read", "write", "readwrite"])), min_size=1, max_size=4),
    st.lists(PATTERN, max_size=3),
)
def test_patterns_reach_valkey_exactly(keys: list[tuple[str, str]], channels: list[str]) -> None:
    permission = {
        "roleRef": "reader",
        "keys": [{"pattern": pattern, "access": access} for pattern, access in keys],
        "channels": channels,
    }
    acl = render(user(permissions=[permission]))
    parsed = parse_acl_file(acl.text)["app"]
    assert parsed == list(acl.rules_of("app") or ())
    assert len(selectors(parsed)) == 1
    ops = selector_ops(selectors(parsed)[0])
    prefix = {"read": "%R~", "write": "%W~", "readwrite": "~"}
    if any(pattern == "*" and access == "readwrite" for pattern, access in keys):
        expected_keys = ["~*"]
    else:
        expected_keys = list(dict.fromkeys(prefix[access] + pattern for pattern, access in keys))
    expected_channels = ["&*"] if "*" in channels else list(dict.fromkeys("&" + c for c in channels))
    assert ops == [*expected_keys, *expected_channels, "+@read"]


def test_quotes_and_backslashes_survive() -> None:
    tricky = "a\"b'c\\d*"
    permission = {"roleRef": "reader", "keys": [{"pattern": tricky}], "channels": ["q'\"\\"]}
    acl = render(user(permissions=[permission]))
    ops = selector_ops(selectors(parse_acl_file(acl.text)["app"])[0])
    assert ops == ["~" + tricky, "&q'\"\\", "+@read"]
