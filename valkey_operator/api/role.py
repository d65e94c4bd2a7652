"""ValkeyRole: a reusable set of ACL category and command permissions (SPEC 1.3)."""

from __future__ import annotations

import enum
from typing import ClassVar, Self

import attrs

from valkey_operator.api.meta import (
    Condition,
    ObjectMeta,
    kind_fields,
    omitempty,
    parse_list,
    render_kind,
)
from valkey_operator.api.resources import VALKEY_ROLES
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj


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


@attrs.frozen(kw_only=True)
class CategoryRule:
    name: AclCategory
    access: Access = Access.ALLOW

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(name=AclCategory(obj["name"]), access=Access(obj.get("access", Access.ALLOW)))

    def to_dict(self) -> Obj:
        return omitempty(name=self.name, access=self.access)


@attrs.frozen(kw_only=True)
class CommandRule:
    """`name` is a command or `command|subcommand`, lowercase."""

    name: str
    access: Access = Access.ALLOW

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(name=obj["name"], access=Access(obj.get("access", Access.ALLOW)))

    def to_dict(self) -> Obj:
        return omitempty(name=self.name, access=self.access)


@attrs.frozen(kw_only=True)
class ValkeyRoleSpec:
    categories: tuple[CategoryRule, ...]
    commands: tuple[CommandRule, ...] = ()

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            categories=parse_list(obj, "categories", CategoryRule.from_dict),
            commands=parse_list(obj, "commands", CommandRule.from_dict),
        )

    def to_dict(self) -> Obj:
        return omitempty(categories=self.categories, commands=self.commands)


@attrs.frozen(kw_only=True)
class ValkeyRoleStatus:
    observed_generation: int | None = None
    summary: str | None = None
    """Such as "+read +write -dangerous", for the Categories printer column."""
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(
            observed_generation=obj.get("observedGeneration"),
            summary=obj.get("summary"),
            conditions=parse_list(obj, "conditions", Condition.from_dict),
        )

    def to_dict(self) -> Obj:
        return omitempty(
            observedGeneration=self.observed_generation, summary=self.summary, conditions=self.conditions
        )


@attrs.frozen(kw_only=True)
class ValkeyRole:
    RESOURCE: ClassVar[Resource] = VALKEY_ROLES

    metadata: ObjectMeta
    spec: ValkeyRoleSpec
    status: ValkeyRoleStatus | None = None

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        return cls(**kind_fields(obj, ValkeyRoleSpec.from_dict, ValkeyRoleStatus.from_dict))

    def to_dict(self) -> Obj:
        return render_kind(self.RESOURCE.kind, self.metadata, self.spec, self.status)
