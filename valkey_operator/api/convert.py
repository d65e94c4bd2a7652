"""Dict converters derived from the attrs models: `Model.from_dict` and `Model.to_dict`.

Parsing is tolerant of absent optional fields and never mutates or aliases its
input: an absent optional is its default, an absent list or map is empty.
Rendering leaves out None and empty lists and maps (Go's `omitempty`), so a
document without empty collections round-trips exactly; enums render as their
values, lists are tuples in the models so frozen models stay values. A kind
(a class with a `RESOURCE`) renders with its apiVersion and kind first.

Each class's pair of functions is generated once, as Python source specialised
to its fields (what attrs does for `__init__`): bench/api_convert.py measures
them against the hand-written methods they replaced and against cattrs.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Self

import attrs

from valkey_operator.api.fields import field_schema, json_name
from valkey_operator.core.rest import Obj

_PARSERS: dict[type, Callable[[Obj], Any]] = {}
_RENDERERS: dict[type, Callable[[Any], Obj]] = {}


class Model:
    """Base of every API model: dict conversion derived from its attrs fields."""

    __slots__ = ()

    @classmethod
    def from_dict(cls, obj: Obj) -> Self:
        parse = _PARSERS.get(cls) or _compile(cls)[0]
        return parse(obj)  # type: ignore[no-any-return]

    def to_dict(self) -> Obj:
        render = _RENDERERS.get(type(self)) or _compile(type(self))[1]
        return render(self)


def unwrap(tp: Any) -> tuple[Any, bool]:
    """(the type without `| None`, whether None is allowed)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        assert len(args) == 1, tp
        return args[0], True
    return tp, False


def shape(tp: Any) -> tuple[str, Any]:
    """("list", item type), ("map", None), ("enum", cls), ("model", cls) or ("scalar", None)."""
    origin = typing.get_origin(tp)
    if origin is tuple:
        return "list", typing.get_args(tp)[0]
    if origin is not None and issubclass(origin, Mapping):
        return "map", None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        assert issubclass(tp, enum.StrEnum), f"{tp}: enums are StrEnum, so str() renders them"
        return "enum", tp
    if attrs.has(tp):
        return "model", tp
    return "scalar", None


def fields_of(cls: type) -> tuple[attrs.Attribute[Any], ...]:
    """The attrs fields of cls with their annotations resolved to types."""
    fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(attrs.resolve_types(cls))
    return fields


def _compile(cls: type) -> tuple[Callable[[Obj], Any], Callable[[Any], Obj]]:
    """Generate, cache and return the parser and the renderer of one attrs class (and its nested ones)."""
    names: dict[str, Any] = {"cls": cls}
    resource = getattr(cls, "RESOURCE", None)
    render = ["d = {}"]
    if resource is not None:
        names["API_VERSION"], names["KIND"] = resource.api_version, resource.kind
        render = ["d = {'apiVersion': API_VERSION, 'kind': KIND}"]
    parse_args = []
    for index, field in enumerate(fields_of(cls)):
        parse, rendered = _field_code(field, index, names)
        parse_args.append(f"{field.name}={parse}")
        render.extend([f"v = m.{field.name}", rendered])
    source = (
        "def parse(o):\n    g = o.get\n    return cls(" + ", ".join(parse_args) + ")\n"
        "def render(m):\n" + "".join(f"    {line}\n" for line in render) + "    return d\n"
    )
    exec(compile(source, f"<convert {cls.__qualname__}>", "exec"), names)
    _PARSERS[cls], _RENDERERS[cls] = names["parse"], names["render"]
    return names["parse"], names["render"]


def _field_code(field: attrs.Attribute[Any], index: int, names: dict[str, Any]) -> tuple[str, str]:
    """(the expression parsing the field from `o`, the statement rendering `v` into `d`)."""
    key, (base, optional) = json_name(field), unwrap(field.type)
    kind, inner = shape(base)
    parser, renderer, default = f"P{index}", f"R{index}", field.default
    if kind == "list":
        item_kind, item_type = shape(unwrap(inner)[0])
        items = f"(g({key!r}) or ())"
        if item_kind in ("model", "enum"):
            names[parser] = _parser_of(item_type)
            items = f"map({parser}, {items})"
        if item_kind == "model":
            names[renderer] = _renderer_of(item_type)
        rendered = {"model": f"[{renderer}(x) for x in v]", "enum": "[str(x) for x in v]"}.get(item_kind)
        return f"tuple({items})", f"if v: d[{key!r}] = {rendered or 'list(v)'}"
    if kind == "map":
        return f"dict(g({key!r}) or ())", f"if v: d[{key!r}] = dict(v)"
    convert = ""
    if kind in ("model", "enum"):
        names[parser], convert = _parser_of(inner), parser
    elif field_schema(field).quantity is not None:
        convert = "str"
    if default is attrs.NOTHING:
        parse = f"{convert}(o[{key!r}])"
    elif field_schema(field).empty_is_none:
        parse = f"{convert}(v) if (v := g({key!r})) else None"
    elif default is None:
        parse = f"None if (v := g({key!r})) is None else {convert}(v)" if convert else f"g({key!r})"
    else:
        names[f"D{index}"] = default
        parse = f"{convert}(g({key!r}, D{index}))"
    if kind == "model":
        names[renderer] = _renderer_of(inner)
    rendered = {"model": f"{renderer}(v)", "enum": "str(v)"}.get(kind, "v")
    check = "if v is not None: " if optional or default is None else ""
    return parse, f"{check}d[{key!r}] = {rendered}"


def _parser_of(tp: type) -> Callable[[Any], Any]:
    if issubclass(tp, enum.Enum):
        return tp
    return _PARSERS.get(tp) or _compile(tp)[0]


def _renderer_of(tp: type) -> Callable[[Any], Obj]:
    return _RENDERERS.get(tp) or _compile(tp)[1]


def empty_to_none(value: Any) -> Any:
    """None for a nested model that renders to nothing, for the fields marked `empty_is_none`.

    Parsing reads such a field's `{}` as None, so a model built with an all-empty nested
    model (every field None) must hold None too, or it would not equal its own round trip.
    """
    if isinstance(value, Model) and not value.to_dict():
        return None
    return value
