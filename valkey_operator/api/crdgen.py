"""Generate the five CustomResourceDefinitions (crds/*.yaml) from the attrs models in valkey_operator/api/.

    python -m valkey_operator.api.crdgen            # write crds/*.yaml and the chart's copies
    python -m valkey_operator.api.crdgen --check    # exit 1 if any of them is stale

Each field's schema (description, bounds, enum, default, list type, CEL rules)
is its attrs metadata (valkey_operator.api.fields); this module turns the
models into OpenAPI and adds what belongs to the CRD alone: names, short
names, categories, printer columns and versions (`CRDS`, at the bottom).

The Helm chart carries its own copies (charts/valkey-operator/files/crds/*.yaml,
regular files, so a packaged chart renders every CRD); both places are written
from the same text and checked together.

Admission validation is done by the API server itself: the OpenAPI schema
and CEL `x-kubernetes-validations`. Every CEL function used exists on every
Kubernetes version the chart supports (1.34 and newer); see `CEL_FUNCTIONS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from valkey_operator.api.backup import ValkeyBackup
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.api.config import ValkeyConfig
from valkey_operator.api.convert import fields_of, shape, unwrap
from valkey_operator.api.fields import OBJECTS, Schema, field_schema, json_name, lit, rule
from valkey_operator.api.image import ValkeyImage
from valkey_operator.api.limits import MAX_CLUSTER_NAME
from valkey_operator.api.resources import GROUP, VERSION
from valkey_operator.api.role import ValkeyRole

Doc = dict[str, Any]

MIN_KUBERNETES_VERSION = "1.34"
"""The oldest Kubernetes minor whose CEL the CRDs may use (semver: introduced in 1.33, usable in new
CRD rules from 1.34). The minors tested and claimed are those of docs/kubernetes-compat.json."""

CEL_FUNCTIONS: Mapping[str, str] = {
    "has, size, all, exists, filter, matches, startsWith, endsWith, contains, type, string": (
        "CEL standard (1.25+)"
    ),
    "lowerAscii": "CEL strings extension (1.25+)",
    "isQuantity, quantity, isGreaterThan, isLessThan": "Kubernetes quantity library (1.28+)",
    "semver, compareTo": "Kubernetes semver library (1.33+; usable in new CRDs from 1.34)",
    "isCIDR, cidr, containsCIDR, prefixLength": "Kubernetes CIDR library (1.31+)",
}
"""Every CEL function the rules call, with the Kubernetes version that introduced it."""

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "crds"
CHART_CRD_DIR = ROOT / "charts" / "valkey-operator" / "files" / "crds"
OUTPUT_DIRS = (CRD_DIR, CHART_CRD_DIR)
"""Where the CRDs are written: the repository's crds/ and the chart's copies."""


# ---- models -> OpenAPI ---------------------------------------------------------------------------
def _put(doc: Doc, **knobs: Any) -> Doc:
    """Add the knobs that are set, in the order given (the YAML keeps it)."""
    doc.update((key, value) for key, value in knobs.items() if value is not None and value != [])
    return doc


def _rules(doc: Doc, rules: Sequence[Doc]) -> Doc:
    return _put(doc, **{"x-kubernetes-validations": list(rules)})


def _string(s: Schema, choices: list[str] | None = None, default: Any = None) -> Doc:
    doc = _put(
        {"description": s.description, "type": "string"},
        format=s.fmt,
        minLength=s.min_length,
        maxLength=s.max_length,
        enum=choices,
        default=default,
    )
    return _rules(doc, s.rules)


def _quantity(s: Schema) -> Doc:
    """A Kubernetes resource quantity (int-or-string), positive, checked with the quantity library;
    then the field's own rules (a transition rule, for example)."""
    message = f"must be a positive Kubernetes quantity, for example {s.quantity}"
    check = rule(
        "type(self) == int ? self > 0 : (isQuantity(self) && quantity(self).isGreaterThan(quantity('0')))",
        message,
        message_expression=lit(message + "; got ") + " + string(self)",
    )
    return {
        "description": s.description,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "maxLength": 64,
        "x-kubernetes-int-or-string": True,
        "x-kubernetes-validations": [check, *s.rules],
    }


def field_doc(tp: Any, s: Schema, default: Any) -> Doc:
    """The OpenAPI schema of one field of type `tp`."""
    base = unwrap(tp)[0]
    kind, inner = shape(base)
    default = default if s.publish_default else None
    if s.quantity is not None:
        return _quantity(s)
    if kind == "list":
        item_kind, item_type = shape(unwrap(inner)[0])
        choices = [member.value for member in item_type] if item_kind == "enum" else None
        items = object_doc(item_type) if item_kind == "model" else _string(s.items or Schema(), choices)
        doc = _put(
            {"description": s.description, "type": "array"}, minItems=s.min_items, maxItems=s.max_items
        )
        doc.update({"items": items, "x-kubernetes-list-type": s.list_type})
        return _rules(_put(doc, **{"x-kubernetes-list-map-keys": list(s.map_keys)}), s.rules)
    if kind == "map":
        values = s.items or Schema()
        value = {"description": values.description, "type": "string", "maxLength": values.max_length}
        doc = {"description": s.description, "type": "object", "maxProperties": s.max_properties}
        return _rules({**doc, "additionalProperties": value}, s.rules)
    if kind == "enum":
        return _string(s, [member.value for member in inner], default and default.value)
    if kind == "model":
        return object_doc(inner, s.description, s.rules)
    if base is bool:
        return _rules(_put({"description": s.description, "type": "boolean"}, default=default), s.rules)
    if base is int:
        doc = {"description": s.description, "type": "integer", "format": s.fmt or "int64"}
        return _rules(_put(doc, minimum=s.minimum, maximum=s.maximum, default=default), s.rules)
    if base is bool:
        return _rules(_put({"description": s.description, "type": "boolean"}, default=default), s.rules)
    assert base is str, (tp, s)
    return _string(s, default=default)


def object_doc(cls: type, description: str = "", rules: Sequence[Doc] = ()) -> Doc:
    """An object from an attrs class: its fields' schemas, required ones, the class's rules, then `rules`."""
    described = OBJECTS.get(cls)
    description = description or (described.description if described else "")
    if not description:
        raise ValueError(f"{cls.__qualname__} needs @described(...) or a description on the field using it")
    doc: Doc = {"description": description, "type": "object"}
    properties, required = {}, []
    for field in fields_of(cls):
        s = field_schema(field)
        _check(cls, field, s)
        default = field.default
        if s.required if s.required is not None else default is attrs.NOTHING:
            required.append(json_name(field))
        properties[json_name(field)] = field_doc(field.type, s, default)
    doc = _put(doc, required=required, properties=properties or None)
    return _rules(doc, [*(described.rules if described else ()), *rules])


def _check(cls: type, field: attrs.Attribute[Any], s: Schema) -> None:
    """Every field needs a description, and every string, list and map a bound (the CEL cost budget)."""
    kind, inner = shape(unwrap(field.type)[0])
    is_string = kind == "enum" or unwrap(field.type)[0] is str
    item_string = kind == "list" and shape(unwrap(inner)[0])[0] != "model"
    missing = [
        what
        for what, lacking in (
            ("a description", not s.description),
            ("max_length", is_string and s.quantity is None and s.max_length is None),
            ("max_items", kind == "list" and s.max_items is None),
            ("max_properties", kind == "map" and s.max_properties is None),
            ("items=item(description, max_length=...)", (kind == "map" or item_string) and s.items is None),
        )
        if lacking
    ]
    if missing:
        raise ValueError(
            f"{cls.__qualname__}.{field.name} needs {', '.join(missing)} in its "
            "attrs.field(metadata=schema(...)) (see 'Adding a field' in docs/reference/README.md)"
        )


# ---- the CRD around a kind ------------------------------------------------------------------------
def column(name: str, json_path: str, description: str, type_: str = "string") -> Doc:
    return {"name": name, "type": type_, "jsonPath": json_path, "description": description}


AGE = column("Age", ".metadata.creationTimestamp", "Time since the object was created.", type_="date")


def crd(
    kind: type,
    *,
    singular: str,
    columns: Sequence[Doc],
    wide_columns: Sequence[Doc] = (),
    short_names: Sequence[str] = (),
    max_name: int | None = None,
) -> Doc:
    """The CustomResourceDefinition of a kind (a model class with RESOURCE, metadata, spec and status)."""
    resource = kind.RESOURCE  # type: ignore[attr-defined]
    names: Doc = {
        "kind": resource.kind,
        "listKind": resource.kind + "List",
        "plural": resource.plural,
        "singular": singular,
    }
    if short_names:
        names["shortNames"] = list(short_names)
    names["categories"] = ["valkey"]
    metadata: Doc = {"type": "object"}
    if max_name is not None:
        metadata["properties"] = {"name": {"type": "string", "maxLength": max_name}}
    fields = {field.name: field for field in fields_of(kind)}
    described = OBJECTS[kind]
    root = {
        "description": described.description,
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": _string(
                Schema(
                    description="APIVersion defines the versioned schema of this representation of an "
                    f"object: {GROUP}/{VERSION}.",
                    max_length=64,
                )
            ),
            "kind": _string(
                Schema(
                    description=f"Kind is the REST resource this object represents: {resource.kind}.",
                    max_length=64,
                )
            ),
            "metadata": metadata,
            "spec": object_doc(unwrap(fields["spec"].type)[0]),
            "status": object_doc(unwrap(fields["status"].type)[0]),
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{resource.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    # `-o wide` adds the priority-1 columns after Age, as for Deployments.
                    "additionalPrinterColumns": [
                        *columns,
                        AGE,
                        *({**wide, "priority": 1} for wide in wide_columns),
                    ],
                    "schema": {"openAPIV3Schema": _rules(root, described.rules)},
                }
            ],
        },
    }


def all_crds() -> dict[str, Doc]:
    """File name (in crds/) -> CRD document. The CRD-level parts of each kind live here."""
    return {
        "valkeyimages.yaml": crd(
            ValkeyImage,
            singular="valkeyimage",
            columns=[
                column("Repository", ".spec.repository", "Container image repository."),
                column("Tag", ".spec.tag", "Container image tag."),
                column("Version", ".spec.version", "The Valkey version the image declares."),
            ],
            short_names=("vkimg",),
        ),
        "valkeyconfigs.yaml": crd(
            ValkeyConfig,
            singular="valkeyconfig",
            columns=[
                column(
                    "Image",
                    ".status.resolvedImage.name",
                    "The effective ValkeyImage (resolved from the chain).",
                ),
                column("Base", ".spec.baseRef", "The config this one inherits from."),
                column(
                    "Resolved",
                    '.status.conditions[?(@.type=="Resolved")].status',
                    "Whether the base chain and the image resolve.",
                ),
            ],
            short_names=("vkcfg",),
        ),
        "valkeyroles.yaml": crd(
            ValkeyRole,
            singular="valkeyrole",
            columns=[
                column("Categories", ".status.summary", "Summary of the role's category and command rules.")
            ],
            short_names=("vkrole",),
        ),
        "valkeyclusters.yaml": crd(
            ValkeyCluster,
            singular="valkeycluster",
            columns=[
                column("State", ".status.state", "Lifecycle state."),
                column(
                    "Ready", ".status.ready", "Ready nodes / desired nodes (shards x (1 + replicasPerShard))."
                ),
                column("Shards", ".spec.shards", "Desired number of shards.", type_="integer"),
                column("Replicas", ".spec.replicasPerShard", "Desired replicas per shard.", type_="integer"),
                column("Config", ".spec.configRef", "The ValkeyConfig the cluster is built from."),
            ],
            wide_columns=[
                column("Endpoint", ".status.endpoint", "The seed address clients connect to."),
                column("Image", ".status.currentImage", "The image every node runs."),
                column("Message", ".status.message", "Why the cluster is in its state."),
            ],
            short_names=("vkc",),
            max_name=MAX_CLUSTER_NAME,
        ),
        "valkeybackups.yaml": crd(
            ValkeyBackup,
            singular="valkeybackup",
            columns=[
                column("Cluster", ".spec.clusterName", "The ValkeyCluster backed up."),
                column("Phase", ".status.phase", "Pending, Running, Completed or Failed."),
                column("Size", ".status.size", "Bytes stored, for people (status.totalBytes)."),
            ],
            short_names=("vkbackup",),
        ),
    }


# ---- output ------------------------------------------------------------------------------------------
HEADER = (
    "# Generated by `python -m valkey_operator.api.crdgen` from the models in valkey_operator/api/: "
    "do not edit.\n"
)


def render(document: Doc) -> str:
    return HEADER + yaml.safe_dump(document, sort_keys=False, width=110, allow_unicode=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if any written file is stale")
    parser.add_argument(
        "--out",
        type=Path,
        action="append",
        help="output directory, repeatable (default: crds/ and charts/valkey-operator/files/crds/)",
    )
    args = parser.parse_args(argv)
    stale = []
    for name, document in all_crds().items():
        text = render(document)
        for directory in args.out or OUTPUT_DIRS:
            path = directory / name
            if args.check:
                if not path.is_file() or path.is_symlink() or path.read_text() != text:
                    stale.append(str(path))
            else:
                path.unlink(missing_ok=True)  # never write through a link into another file
                path.write_text(text)
    if stale:
        print("stale, run `python -m valkey_operator.api.crdgen`: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
