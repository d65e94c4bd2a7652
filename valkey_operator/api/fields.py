"""How a model field is written once: its JSON name, description, bounds and CEL rules as attrs metadata.

    password_hashes: tuple[str, ...] = attrs.field(
        default=(), metadata=schema("SHA-256 hashes ...", max_items=8, items=item("...", max_length=64))
    )

`crdgen` builds the OpenAPI schema of each kind from these, and `convert` its
dict converters from the field types and JSON names, so a new field is one
attrs field (see docs/reference/README.md, "Adding a field"). Object-level
rules and the description of a class used as an object go on the class with
`@described(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar

import attrs

from valkey_operator.api.limits import DNS_SUBDOMAIN, MAX_CONDITIONS, MAX_NAME, QUALIFIED_NAME

Rule = dict[str, Any]
C = TypeVar("C", bound=type)
P = ParamSpec("P")

KEY = "valkey_operator.schema"
"""The attrs metadata key holding a field's `Schema`."""


def _tuple(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    return tuple(rules)


@attrs.frozen
class Schema:
    """One field's part of the CRD: JSON name (camelCase of the attribute by default) and OpenAPI knobs."""

    description: str = ""
    json: str | None = None
    required: bool | None = None
    """Listed in the object's `required`; by default exactly the fields without a default."""
    fmt: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    publish_default: bool = False
    """Publish the attrs default as the schema's default (the API server then stores it)."""
    min_items: int | None = None
    max_items: int | None = None
    list_type: str = "atomic"
    map_keys: tuple[str, ...] = ()
    max_properties: int | None = None
    items: Schema | None = None
    """The items of a list of strings, or the values of a map."""
    quantity: str | None = None
    """An int-or-string Kubernetes quantity (kept as a string); the text is the error's example."""
    empty_is_none: bool = False
    """An empty object parses as None (the field is absent)."""
    rules: tuple[Rule, ...] = attrs.field(default=(), converter=_tuple)


def _as_metadata(make: Callable[P, Schema]) -> Callable[P, dict[str, Schema]]:
    def metadata(*args: P.args, **kwargs: P.kwargs) -> dict[str, Schema]:
        return {KEY: make(*args, **kwargs)}

    return metadata


schema = _as_metadata(Schema)
"""attrs field metadata from Schema's arguments: `attrs.field(metadata=schema("What.", max_length=64))`."""

item = Schema
"""The schema of a list's string items or a map's values: `item("What one is.", max_length=64)`."""


@attrs.frozen
class Described:
    description: str
    rules: tuple[Rule, ...]


OBJECTS: dict[type, Described] = {}
"""Class -> its object description and object-level rules, filled by `@described`."""


def described(description: str, *, rules: Iterable[Rule] = ()) -> Callable[[C], C]:
    """Class decorator (above @attrs.frozen): the description and rules of the object the class is."""

    def register(cls: C) -> C:
        OBJECTS[cls] = Described(description, tuple(rules))
        return cls

    return register


def field_schema(field: attrs.Attribute[Any]) -> Schema:
    return field.metadata.get(KEY) or Schema()


def json_name(field: attrs.Attribute[Any]) -> str:
    """The field's JSON name: its Schema's `json`, else the attribute name in lowerCamelCase."""
    explicit = field_schema(field).json
    if explicit:
        return explicit
    head, *rest = field.name.split("_")
    return head + "".join(part.capitalize() for part in rest)


# ---- CEL ------------------------------------------------------------------------------------------
def lit(text: str) -> str:
    """A CEL string literal (double-quoted) holding text exactly."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def raw(pattern: str) -> str:
    """A CEL raw string literal for a regular expression (no escaping needed)."""
    assert "'" not in pattern, pattern
    return "r'" + pattern + "'"


def cel_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(lit(item) for item in items) + "]"


def rule(
    expression: str,
    message: str,
    *,
    message_expression: str | None = None,
    reason: str | None = None,
    field_path: str | None = None,
) -> Rule:
    """One x-kubernetes-validations entry; `message` is also the fallback of `message_expression`."""
    entry: Rule = {"rule": expression, "message": message}
    if message_expression:
        entry["messageExpression"] = message_expression
    if reason:
        entry["reason"] = reason
    if field_path:
        entry["fieldPath"] = field_path
    return entry


def matches(pattern: str, message: str, got: str | None = None) -> Rule:
    """`self` matches the RE2 pattern; with `got`, the message expression appends "<got>" + self."""
    expression = None if got is None else lit(got) + " + self"
    return rule(f"self.matches({raw(pattern)})", message, message_expression=expression)


def qualified_keys(what: str) -> Rule:
    """A map's keys are label or annotation keys ([prefix/]name); the message names the first that is not."""
    return rule(
        f"self.all(k, k.matches({raw(QUALIFIED_NAME)}))",
        f"keys must be valid {what} keys ([prefix/]name)",
        message_expression=lit(f"keys must be valid {what} keys ([prefix/]name); got ")
        + f" + self.filter(k, !k.matches({raw(QUALIFIED_NAME)}))[0]",
    )


# ---- shapes used by several kinds -----------------------------------------------------------------
def name_ref(description: str, kind: str) -> dict[str, Schema]:
    """A reference by name to a cluster-scoped or same-namespace object (a DNS subdomain)."""
    return schema(
        description,
        min_length=1,
        max_length=MAX_NAME,
        rules=[
            rule(
                f"self.matches({raw(DNS_SUBDOMAIN)})",
                f"must be the name of a {kind}: lowercase letters, digits, '-' and '.', "
                "starting and ending with a letter or digit",
                message_expression=lit(
                    f"must be the name of a {kind} (lowercase letters, digits, '-' and '.', "
                )
                + " + "
                + lit("starting and ending with a letter or digit); got ")
                + " + self",
            )
        ],
    )


def observed_generation() -> Any:
    return attrs.field(
        default=None,
        metadata=schema("The metadata.generation of the spec this status describes.", minimum=0),
    )


def conditions(description: str) -> Any:
    """A list of metav1.Condition, as upstream declares it (a map list keyed by type)."""
    return attrs.field(
        default=(),
        metadata=schema(description, max_items=MAX_CONDITIONS, list_type="map", map_keys=("type",)),
    )
