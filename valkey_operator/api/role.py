"""ValkeyRole: a reusable set of ACL category and command permissions (SPEC 1.3)."""

from __future__ import annotations

import enum
from typing import ClassVar

import attrs

from valkey_operator.api.convert import Model
from valkey_operator.api.fields import Schema, conditions, described, matches, observed_generation, schema
from valkey_operator.api.limits import COMMAND
from valkey_operator.api.meta import Condition, ObjectMeta
from valkey_operator.api.resources import VALKEY_ROLES
from valkey_operator.core.resource import Resource


class Access(enum.StrEnum):
    """Allow (+) or deny (-); the schema defaults a rule's access to allow."""

    ALLOW = "allow"
    DENY = "deny"


class AclCategory(enum.StrEnum):
    """Valkey's ACL categories (without '@'); the schema admits exactly these."""

    ALL = "all"
    KEYSPACE = "keyspace"
    READ = "read"
    WRITE = "write"
    SET = "set"
    SORTEDSET = "sortedset"
    LIST = "list"
    HASH = "hash"
    STRING = "string"
    BITMAP = "bitmap"
    HYPERLOGLOG = "hyperloglog"
    GEO = "geo"
    STREAM = "stream"
    PUBSUB = "pubsub"
    ADMIN = "admin"
    FAST = "fast"
    SLOW = "slow"
    BLOCKING = "blocking"
    DANGEROUS = "dangerous"
    CONNECTION = "connection"
    TRANSACTION = "transaction"
    SCRIPTING = "scripting"


def _access(what: str) -> dict[str, Schema]:
    return schema(
        f"allow grants the {what} (+), deny revokes it (-). Defaults to allow.",
        max_length=8,
        publish_default=True,
    )


@described("One ACL category rule.")
@attrs.frozen(kw_only=True)
class CategoryRule(Model):
    name: AclCategory = attrs.field(
        metadata=schema(
            "ACL category without the '@', for example read, write, admin or dangerous "
            "(all selects every command).",
            max_length=32,
        )
    )
    access: Access = attrs.field(default=Access.ALLOW, metadata=_access("category"))


@described("One command rule.")
@attrs.frozen(kw_only=True)
class CommandRule(Model):
    """`name` is a command or `command|subcommand`, lowercase."""

    name: str = attrs.field(
        metadata=schema(
            "A command, or command|subcommand, in lowercase: for example get, config|get or client|kill.",
            min_length=1,
            max_length=64,
            rules=[
                matches(
                    COMMAND,
                    "must be a lowercase command name, optionally with one |subcommand "
                    "(for example get or client|kill)",
                    got="must be a lowercase command name, optionally with one |subcommand "
                    "(for example get or client|kill); got ",
                )
            ],
        )
    )
    access: Access = attrs.field(default=Access.ALLOW, metadata=_access("command"))


@described(
    "ValkeyRoleSpec is a reusable set of command permissions for ACL users. Rules apply in order: "
    "categories as listed, then commands as listed; later rules override earlier ones."
)
@attrs.frozen(kw_only=True)
class ValkeyRoleSpec(Model):
    categories: tuple[CategoryRule, ...] = attrs.field(
        metadata=schema(
            "ACL command categories the role allows or denies, at least one. Unique by name.",
            min_items=1,
            max_items=len(AclCategory),
            list_type="map",
            map_keys=("name",),
        )
    )
    commands: tuple[CommandRule, ...] = attrs.field(
        default=(),
        metadata=schema(
            "Individual commands (or command|subcommand) the role allows or denies, applied after the "
            "categories. Unique by name.",
            max_items=128,
            list_type="map",
            map_keys=("name",),
        ),
    )


@described("ValkeyRoleStatus is written by the operator.")
@attrs.frozen(kw_only=True)
class ValkeyRoleStatus(Model):
    observed_generation: int | None = observed_generation()
    summary: str | None = attrs.field(
        default=None,
        metadata=schema(
            "The role's rules in ACL notation, for example +@read +@write -@dangerous.", max_length=8192
        ),
    )
    """Such as "+read +write -dangerous", for the Categories printer column."""
    conditions: tuple[Condition, ...] = conditions("Conditions reported by the operator about this role.")


@described(
    "ValkeyRole is a reusable command permission set for ACL users, referenced by "
    "ValkeyCluster.spec.acl[].permissions[].roleRef. Editing a role re-applies the ACLs of every "
    "cluster that uses it, without restarts. Protected from deletion while referenced."
)
@attrs.frozen(kw_only=True)
class ValkeyRole(Model):
    RESOURCE: ClassVar[Resource] = VALKEY_ROLES

    metadata: ObjectMeta
    spec: ValkeyRoleSpec
    status: ValkeyRoleStatus | None = None
