"""A field written once (attrs field + schema metadata) reaches the CRD schema and both dict converters."""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs
import pytest

from valkey_operator.api import crdgen
from valkey_operator.api.cluster import ValkeyClusterStatus
from valkey_operator.api.convert import Model
from valkey_operator.api.fields import described, item, matches, rule, schema


class Mode(enum.StrEnum):
    FAST = "fast"
    SAFE = "safe"


@attrs.frozen(kw_only=True)
class Inner(Model):
    size: str | None = attrs.field(default=None, metadata=schema("A quantity.", quantity="1Gi"))


@described("A made-up object.", rules=[rule("has(self.name)", "needs a name")])
@attrs.frozen(kw_only=True)
class Example(Model):
    name: str = attrs.field(
        metadata=schema("Its name.", max_length=8, rules=[matches("^[a-z]+$", "lowercase")])
    )
    pull_secrets: tuple[str, ...] = attrs.field(
        default=(),
        metadata=schema("Secret names.", max_items=4, list_type="set", items=item("A name.", max_length=9)),
    )
    mode: Mode = attrs.field(default=Mode.SAFE, metadata=schema("How.", max_length=4, publish_default=True))
    replicas: int = attrs.field(default=1, metadata=schema("How many.", fmt="int32", minimum=0, json="count"))
    labels: Mapping[str, str] = attrs.field(
        factory=dict, metadata=schema("Labels.", max_properties=2, items=item("A value.", max_length=3))
    )
    inner: Inner | None = attrs.field(
        default=None, metadata=schema("Nested.", empty_is_none=True, rules=[rule("has(self.size)", "sized")])
    )


def test_one_field_declaration_makes_the_schema() -> None:
    doc = crdgen.object_doc(Example)
    assert doc["required"] == ["name"]
    assert doc["x-kubernetes-validations"] == [{"rule": "has(self.name)", "message": "needs a name"}]
    props = doc["properties"]
    assert list(props) == ["name", "pullSecrets", "mode", "count", "labels", "inner"]
    assert props["name"] == {
        "description": "Its name.",
        "type": "string",
        "maxLength": 8,
        "x-kubernetes-validations": [{"rule": "self.matches(r'^[a-z]+$')", "message": "lowercase"}],
    }
    assert props["pullSecrets"] == {
        "description": "Secret names.",
        "type": "array",
        "maxItems": 4,
        "items": {"description": "A name.", "type": "string", "maxLength": 9},
        "x-kubernetes-list-type": "set",
    }
    assert props["mode"] == {
        "description": "How.",
        "type": "string",
        "maxLength": 4,
        "enum": ["fast", "safe"],
        "default": "safe",
    }
    assert props["count"] == {"description": "How many.", "type": "integer", "format": "int32", "minimum": 0}
    assert props["labels"]["additionalProperties"] == {
        "description": "A value.",
        "type": "string",
        "maxLength": 3,
    }
    inner = props["inner"]
    assert inner["description"] == "Nested." and inner["properties"]["size"]["x-kubernetes-int-or-string"]
    assert inner["x-kubernetes-validations"] == [{"rule": "has(self.size)", "message": "sized"}]


def test_one_field_declaration_makes_the_converters() -> None:
    obj = {"name": "a", "pullSecrets": ["s"], "mode": "fast", "count": 3, "labels": {"k": "v"}}
    model = Example.from_dict({**obj, "inner": {"size": 1024}})
    assert model == Example(
        name="a", pull_secrets=("s",), mode=Mode.FAST, replicas=3, labels={"k": "v"}, inner=Inner(size="1024")
    )
    assert model.to_dict() == {**obj, "inner": {"size": "1024"}}
    assert type(model.to_dict()["mode"]) is str
    assert Example.from_dict({"name": "a", "inner": {}}) == Example(name="a")
    assert Example(name="a").to_dict() == {"name": "a", "mode": "safe", "count": 1}
    with pytest.raises(KeyError):
        Example.from_dict({})


def test_empty_rollout_and_tls_status_parse_as_absent() -> None:
    assert ValkeyClusterStatus.from_dict({"rollout": {}, "tls": {}}) == ValkeyClusterStatus()


def test_a_field_without_description_or_bound_is_refused_naming_it() -> None:
    @described("Bad.")
    @attrs.frozen(kw_only=True)
    class Bad(Model):
        note: str = attrs.field(metadata=schema(""))
        tags: tuple[str, ...] = attrs.field(default=(), metadata=schema("Tags."))

    with pytest.raises(ValueError, match=r"Bad.note needs a description, max_length"):
        crdgen.object_doc(Bad)

    @described("Unbounded.")
    @attrs.frozen(kw_only=True)
    class Unbounded(Model):
        tags: tuple[str, ...] = attrs.field(default=(), metadata=schema("Tags."))

    with pytest.raises(ValueError, match=r"Unbounded.tags needs max_items, items="):
        crdgen.object_doc(Unbounded)


@attrs.frozen(kw_only=True)
class Undescribed(Model):
    name: str = attrs.field(metadata=schema("Name.", max_length=3))


@described("Holder.")
@attrs.frozen(kw_only=True)
class Holder(Model):
    items: tuple[Undescribed, ...] = attrs.field(default=(), metadata=schema("Items.", max_items=2))


def test_an_object_without_description_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Undescribed needs @described"):
        crdgen.object_doc(Holder)
