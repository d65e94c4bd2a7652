"""Generate the four CustomResourceDefinitions (crds/*.yaml) from one Python description.

    python -m valkey_operator.api.crdgen            # write crds/*.yaml and the chart's copies
    python -m valkey_operator.api.crdgen --check    # exit 1 if any of them is stale

The Helm chart carries its own copies (charts/valkey-operator/files/crds/*.yaml,
regular files, so a packaged chart renders every CRD); both places are written
from the same text and checked together.

The valkey.conf allowlist, the reserved usernames, the version floor and the
finalizer-free names all come from `valkey_operator.api.resources` and
`valkey_operator.api.tunables`, so the admission rules cannot drift from the
operator's own constants.

Admission validation is done by the API server itself: the OpenAPI schema
(types, enums, bounds, list types) and CEL `x-kubernetes-validations`. Every
CEL function used here exists on every Kubernetes version the chart supports
(1.34 and newer); see `CEL_FUNCTIONS`. Every string, list and map carries a
maxLength / maxItems / maxProperties so the CEL cost estimate stays within the
API server's budget.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from valkey_operator.api import tunables
from valkey_operator.api.resources import (
    GROUP,
    RESERVED_ANNOTATION_PREFIX,
    RESERVED_USERNAMES,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
    VERSION,
    VERSION_FLOOR_TEXT,
)
from valkey_operator.api.role import AclCategory
from valkey_operator.core.resource import Resource

Schema = dict[str, Any]

MIN_KUBERNETES_VERSION = "1.34"
"""The oldest Kubernetes minor whose CEL the CRDs may use (semver: introduced in 1.33, usable in new
CRD rules from 1.34). The minors tested and claimed are those of docs/kubernetes-compat.json."""

CEL_FUNCTIONS: Mapping[str, str] = {
    "has, size, all, filter, matches, startsWith, contains, type, string": "CEL standard (1.25+)",
    "lowerAscii": "CEL strings extension (1.25+)",
    "isQuantity, quantity, isGreaterThan": "Kubernetes quantity library (1.28+)",
    "semver, compareTo": "Kubernetes semver library (1.33+; usable in new CRDs from 1.34)",
}
"""Every CEL function the rules call, with the Kubernetes version that introduced it."""

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "crds"
CHART_CRD_DIR = ROOT / "charts" / "valkey-operator" / "files" / "crds"
OUTPUT_DIRS = (CRD_DIR, CHART_CRD_DIR)
"""Where the CRDs are written: the repository's crds/ and the chart's copies."""

# ---- limits (also stated in the docs) ----------------------------------------------------------
MAX_NAME = 253  # a DNS subdomain: the name of any object these kinds refer to
MAX_CLUSTER_NAME = 50  # leaves room for the "-<shard>-<suffix>" of pod names within a 63-char hostname
MAX_SHARDS = 64
MAX_REPLICAS_PER_SHARD = 5
MAX_ACL_USERS = 64
MAX_PASSWORD_HASHES = 8
MAX_PERMISSIONS = 16
MAX_PATTERNS = 16
MAX_PATTERN = 128
MAX_USERNAME = 64
MAX_VALKEY_SETTINGS = 64
MAX_VALKEY_VALUE = 1024
MAX_ANNOTATIONS = 64
MAX_ANNOTATION_VALUE = 4096
MAX_NODE_SELECTOR = 32
MAX_TOLERATIONS = 32
MAX_ZONES = 16
MAX_CONDITIONS = 16
MAX_STATUS_NODES = 512
MAX_MESSAGE = 32768
MAX_LABEL_VALUE = 63
MAX_QUALIFIED_NAME = 317  # 253-char DNS prefix + "/" + 63-char name

ACL_CATEGORIES = tuple(category.value for category in AclCategory)
"""Valkey's ACL command categories (`ACL CAT`), without the leading '@'."""

CLUSTER_STATES = ("Creating", "Active", "Updating", "Failed")
ZONE_SPREADS = ("bestEffort", "required")
NODE_ROLES = ("primary", "replica")
ACCESS = ("allow", "deny")
KEY_ACCESS = ("read", "write", "readwrite")

# ---- regular expressions (RE2) used by CEL matches() --------------------------------------------
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL_1035 = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
RELEASE_VERSION = r"^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$"
USERNAME = r"^[A-Za-z0-9._-]+$"
PASSWORD_HASH = r"^[0-9a-f]{64}$"
ACL_PATTERN = r"^[^\s()[:cntrl:]]+$"
COMMAND = r"^[a-z0-9_-]+(\|[a-z0-9_-]+)?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


# ---- schema building blocks ----------------------------------------------------------------------
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
) -> Schema:
    """One x-kubernetes-validations entry; `message` is also the fallback of `message_expression`."""
    entry: Schema = {"rule": expression, "message": message}
    if message_expression:
        entry["messageExpression"] = message_expression
    if reason:
        entry["reason"] = reason
    if field_path:
        entry["fieldPath"] = field_path
    return entry


def _with_rules(schema: Schema, rules: Sequence[Schema]) -> Schema:
    if rules:
        schema["x-kubernetes-validations"] = list(rules)
    return schema


def string(
    description: str,
    *,
    max_length: int,
    min_length: int | None = None,
    enum: Sequence[str] | None = None,
    default: str | None = None,
    fmt: str | None = None,
    rules: Sequence[Schema] = (),
) -> Schema:
    schema: Schema = {"description": description, "type": "string"}
    if fmt:
        schema["format"] = fmt
    if min_length is not None:
        schema["minLength"] = min_length
    schema["maxLength"] = max_length
    if enum:
        schema["enum"] = list(enum)
    if default is not None:
        schema["default"] = default
    return _with_rules(schema, rules)


def integer(
    description: str,
    *,
    fmt: str = "int64",
    minimum: int | None = None,
    maximum: int | None = None,
    default: int | None = None,
) -> Schema:
    schema: Schema = {"description": description, "type": "integer", "format": fmt}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    if default is not None:
        schema["default"] = default
    return schema


def obj(
    description: str,
    properties: Mapping[str, Schema],
    *,
    required: Sequence[str] = (),
    rules: Sequence[Schema] = (),
) -> Schema:
    schema: Schema = {"description": description, "type": "object"}
    if required:
        schema["required"] = list(required)
    schema["properties"] = dict(properties)
    return _with_rules(schema, rules)


def array(
    description: str,
    items: Schema,
    *,
    max_items: int,
    min_items: int | None = None,
    list_type: str = "atomic",
    map_keys: Sequence[str] = (),
    rules: Sequence[Schema] = (),
) -> Schema:
    schema: Schema = {"description": description, "type": "array"}
    if min_items is not None:
        schema["minItems"] = min_items
    schema["maxItems"] = max_items
    schema["items"] = items
    schema["x-kubernetes-list-type"] = list_type
    if map_keys:
        schema["x-kubernetes-list-map-keys"] = list(map_keys)
    return _with_rules(schema, rules)


def string_map(
    description: str,
    *,
    max_properties: int,
    value_description: str,
    value_max_length: int,
    rules: Sequence[Schema] = (),
) -> Schema:
    schema: Schema = {
        "description": description,
        "type": "object",
        "maxProperties": max_properties,
        "additionalProperties": {
            "description": value_description,
            "type": "string",
            "maxLength": value_max_length,
        },
    }
    return _with_rules(schema, rules)


def quantity(description: str, example: str) -> Schema:
    """A Kubernetes resource quantity (int-or-string), positive, checked with the quantity library."""
    return {
        "description": description,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "maxLength": 64,
        "x-kubernetes-int-or-string": True,
        "x-kubernetes-validations": [
            rule(
                "type(self) == int ? self > 0 : "
                "(isQuantity(self) && quantity(self).isGreaterThan(quantity('0')))",
                f"must be a positive Kubernetes quantity, for example {example}",
                message_expression=lit(
                    "must be a positive Kubernetes quantity, for example " + example + "; got "
                )
                + " + string(self)",
            )
        ],
    }


def object_name(description: str, kind: str) -> Schema:
    """A reference by name to a cluster-scoped or same-namespace object (a DNS subdomain)."""
    return string(
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


def conditions(description: str) -> Schema:
    """A list of metav1.Condition, as upstream declares it."""
    return array(
        description,
        obj(
            "A condition in the Kubernetes API conventions (metav1.Condition).",
            {
                "type": string("Condition type, in CamelCase (for example Ready).", max_length=316),
                "status": string("True, False or Unknown.", max_length=16, enum=("True", "False", "Unknown")),
                "observedGeneration": integer(
                    "The metadata.generation the condition was computed from.", minimum=0
                ),
                "lastTransitionTime": string(
                    "When the status last changed (RFC 3339).", max_length=64, fmt="date-time"
                ),
                "reason": string(
                    "Machine-readable CamelCase reason for the last transition.", max_length=1024
                ),
                "message": string("Human-readable details of the last transition.", max_length=MAX_MESSAGE),
            },
            required=("type", "status", "lastTransitionTime", "reason", "message"),
        ),
        max_items=MAX_CONDITIONS,
        list_type="map",
        map_keys=("type",),
    )


def observed_generation() -> Schema:
    return integer("The metadata.generation of the spec this status describes.", minimum=0)


def column(name: str, json_path: str, description: str, type_: str = "string") -> Schema:
    return {"name": name, "type": type_, "jsonPath": json_path, "description": description}


AGE = column("Age", ".metadata.creationTimestamp", "Time since the object was created.", type_="date")


def crd(
    resource: Resource,
    *,
    singular: str,
    description: str,
    spec: Schema,
    status: Schema,
    columns: Sequence[Schema],
    short_names: Sequence[str] = (),
    root_rules: Sequence[Schema] = (),
    metadata: Schema | None = None,
) -> Schema:
    names: Schema = {
        "kind": resource.kind,
        "listKind": resource.kind + "List",
        "plural": resource.plural,
        "singular": singular,
    }
    if short_names:
        names["shortNames"] = list(short_names)
    names["categories"] = ["valkey"]
    root = obj(
        description,
        {
            "apiVersion": string(
                "APIVersion defines the versioned schema of this representation of an object: "
                f"{GROUP}/{VERSION}.",
                max_length=64,
            ),
            "kind": string(
                f"Kind is the REST resource this object represents: {resource.kind}.", max_length=64
            ),
            "metadata": metadata if metadata is not None else {"type": "object"},
            "spec": spec,
            "status": status,
        },
        required=("spec",),
        rules=root_rules,
    )
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
                    "additionalPrinterColumns": [*columns, AGE],
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


# ---- ValkeyImage -----------------------------------------------------------------------------------
def valkey_image() -> Schema:
    floor = VERSION_FLOOR_TEXT
    version_rule = rule(
        f"self.matches({raw(RELEASE_VERSION)}) && semver(self).compareTo(semver({lit(floor)})) >= 0",
        f"must be a full MAJOR.MINOR.PATCH Valkey release of at least {floor}, for example {floor} "
        "(no 'v' prefix, no leading zeros, no pre-release or build suffix)",
        message_expression=lit(
            "must be a full MAJOR.MINOR.PATCH Valkey release of at least " + floor + ", got "
        )
        + " + self + "
        + lit(
            f" (the operator runs Valkey {floor} or newer; write the version as, for example, {floor}: "
            "no 'v' prefix, no leading zeros, no pre-release or build suffix)"
        ),
    )
    spec = obj(
        "ValkeyImageSpec names a container image and the Valkey version it provides.",
        {
            "repository": string(
                "Container image repository, for example valkey/valkey.", min_length=1, max_length=512
            ),
            "tag": string("Container image tag, for example 9.0.1.", min_length=1, max_length=128),
            "version": string(
                "The Valkey version the image provides, for example 9.0.1: full MAJOR.MINOR.PATCH, "
                f"at least {floor}. Older declared versions are rejected at admission. It is a promise, "
                "not proof: the operator also checks the running binary before a node joins a cluster.",
                max_length=32,
                rules=[version_rule],
            ),
        },
        required=("repository", "tag", "version"),
    )
    status = {
        "description": "ValkeyImage has a status subresource, but it defines no fields today.",
        "type": "object",
    }
    return crd(
        VALKEY_IMAGES,
        singular="valkeyimage",
        description=(
            "ValkeyImage registers a Valkey container image the operator is allowed to run. It is the "
            "allowlist: if no ValkeyImage exists for an image, no ValkeyCluster can use it. Referenced by "
            "ValkeyConfig.spec.imageRef; protected from deletion while referenced."
        ),
        spec=spec,
        status=status,
        columns=[
            column("Repository", ".spec.repository", "Container image repository."),
            column("Tag", ".spec.tag", "Container image tag."),
            column("Version", ".spec.version", "The Valkey version the image declares."),
        ],
    )


# ---- ValkeyConfig ----------------------------------------------------------------------------------
def valkey_config() -> Schema:
    allowed = cel_list(sorted(tunables.TUNABLES))
    valkey = string_map(
        "valkey.conf directives for the Valkey server, directive name to value (for example maxmemory: "
        "2gb, maxmemory-policy: allkeys-lru). Only the documented tunables are accepted (memory and "
        "eviction, lazy freeing, timeouts and keepalive, slow log and latency, encoding thresholds, "
        "defragmentation, io-threads, keyspace notifications, and a few cluster tunables); names are "
        "matched case-insensitively, values are single lines. Everything else (ports, TLS, persistence, "
        "users and auth, replication and cluster wiring, modules, renamed commands) belongs to the "
        "operator and is rejected. Merged key by key over the base config's settings. When maxmemory is "
        "set nowhere in the chain the operator sets it to about 75% of the memory limit. A change is "
        "applied to live nodes with CONFIG SET and confirmed with CONFIG GET (Valkey 9.0 and 9.1 accept "
        "every allowed directive at runtime); a directive removed from the chain returns to its default.",
        max_properties=MAX_VALKEY_SETTINGS,
        value_description="The directive's value, exactly as valkey.conf takes it (one line).",
        value_max_length=MAX_VALKEY_VALUE,
        rules=[
            rule(
                f"self.all(k, k.lowerAscii() in {allowed})",
                "may only set the documented valkey.conf tunables (see docs/reference/valkeyconfig.md); "
                "ports, TLS, persistence, users and auth, replication and cluster wiring are set by the "
                "operator",
                message_expression=lit("may only set the documented valkey.conf tunables; not allowed: ")
                + f" + self.filter(k, !(k.lowerAscii() in {allowed}))[0] + "
                + lit(
                    " (ports, TLS, persistence, users and auth, replication and cluster wiring are set by "
                    "the operator; see docs/reference/valkeyconfig.md)"
                ),
            ),
            rule(
                "self.all(k, !self[k].contains('\\n') && !self[k].contains('\\r'))",
                "values must be a single line: no carriage return (CR) or line feed (LF)",
                message_expression=lit(
                    "values must be a single line (no carriage return or line feed); offending directives: "
                )
                + " + self.filter(k, self[k].contains('\\n') || self[k].contains('\\r'))[0]",
            ),
            rule(
                "self.all(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() == 1)",
                "names the same directive twice (directive names are case-insensitive)",
                message_expression=lit("names the directive ")
                + " + self.filter(k, self.filter(j, j.lowerAscii() == k.lowerAscii()).size() > 1)[0]"
                + ".lowerAscii() + "
                + lit(" more than once (directive names are case-insensitive)"),
            ),
        ],
    )
    spec = obj(
        "ValkeyConfigSpec is a named profile: the image, container resources and valkey.conf settings of "
        "the clusters that use it. It may inherit from a base config (baseRef): child over parent, key by "
        "key; imageRef from the nearest config in the chain that sets it; at most "
        "8 configs deep. At least one of imageRef and baseRef is required. A change of the image, resources "
        "or podSecurity rolls every cluster that resolves through the config: shard by shard, replicas "
        "first, the primary handed over with a coordinated failover.",
        {
            "imageRef": object_name(
                "Name of the ValkeyImage to run. Optional when baseRef is set: the image then comes from "
                "the nearest config in the base chain that sets imageRef. If the image does not exist, "
                "the config reports Resolved=False (ImageNotFound) and clusters using it do not progress.",
                "ValkeyImage",
            ),
            "baseRef": object_name(
                "Name of another ValkeyConfig to inherit from. This config's settings override the "
                "base's, key by key. A missing base, a cycle or a chain deeper than 8 is reported in "
                "status (BaseNotFound, BaseCycle, TooDeep).",
                "ValkeyConfig",
            ),
            "resources": obj(
                "Container resources of the Valkey container. Requests equal limits (Guaranteed QoS for "
                "the container). Merged key by key over the base config's resources.",
                {
                    "cpu": quantity(
                        "CPU for the Valkey container as a Kubernetes quantity, for example 500m or 2.",
                        "500m or 2",
                    ),
                    "memory": quantity(
                        "Memory for the Valkey container as a Kubernetes quantity, for example 1Gi. "
                        "Unless the chain sets maxmemory, the operator sets maxmemory to about 75% of it.",
                        "512Mi or 2Gi",
                    ),
                },
            ),
            "valkey": valkey,
            "podSecurity": obj(
                "User and group ids of the Valkey pods. Each unset id defaults to 999 (the user of the "
                "official valkey image), applied by the operator. Pods satisfy the restricted Pod Security "
                "Standard either way.",
                {
                    "runAsUser": integer(
                        "User id the Valkey container runs as (default 999). At least 1: the pods never "
                        "run as root.",
                        minimum=1,
                        maximum=2147483647,
                    ),
                    "runAsGroup": integer(
                        "Primary group id of the Valkey container (default 999). At least 1.",
                        minimum=1,
                        maximum=2147483647,
                    ),
                    "fsGroup": integer(
                        "Group id that owns the pod's volumes (default 999). At least 1.",
                        minimum=1,
                        maximum=2147483647,
                    ),
                },
            ),
        },
        rules=[
            rule(
                "has(self.imageRef) || has(self.baseRef)",
                "must set imageRef (the ValkeyImage to run), baseRef (a ValkeyConfig to inherit from), "
                "or both",
            )
        ],
    )
    status = obj(
        "ValkeyConfigStatus is the result of resolving the config's base chain, written by the operator.",
        {
            "observedGeneration": observed_generation(),
            "resolvedImage": obj(
                "The ValkeyImage the chain resolved to, copied so readers need not look it up.",
                {
                    "name": string("Name of the ValkeyImage.", max_length=MAX_NAME),
                    "repository": string("Its container image repository.", max_length=512),
                    "tag": string("Its container image tag.", max_length=128),
                    "version": string("Its declared Valkey version.", max_length=32),
                },
            ),
            "settingsHash": string(
                "Hash of the effective settings (image, resources, podSecurity, valkey); changes exactly "
                "when one of them does. A cluster's status.configHash takes this value once every node "
                "runs these settings.",
                max_length=128,
            ),
            "conditions": conditions(
                "Conditions: Resolved (True when the base chain and image resolve; False with reason "
                "ImageNotFound, BaseNotFound, BaseCycle or TooDeep)."
            ),
        },
    )
    return crd(
        VALKEY_CONFIGS,
        singular="valkeyconfig",
        description=(
            "ValkeyConfig is a named profile of image, container resources and valkey.conf settings that "
            "ValkeyClusters use (spec.configRef); it may inherit from a base config. Protected from "
            "deletion while a cluster or another config references it."
        ),
        spec=spec,
        status=status,
        columns=[
            column(
                "Image", ".status.resolvedImage.name", "The effective ValkeyImage (resolved from the chain)."
            ),
            column("Base", ".spec.baseRef", "The config this one inherits from."),
            column(
                "Resolved",
                '.status.conditions[?(@.type=="Resolved")].status',
                "Whether the base chain and the image resolve.",
            ),
        ],
    )


# ---- ValkeyRole ------------------------------------------------------------------------------------
def access_field(what: str) -> Schema:
    return string(
        f"allow grants the {what} (+), deny revokes it (-). Defaults to allow.",
        max_length=8,
        enum=ACCESS,
        default="allow",
    )


def valkey_role() -> Schema:
    spec = obj(
        "ValkeyRoleSpec is a reusable set of command permissions for ACL users. Rules apply in order: "
        "categories as listed, then commands as listed; later rules override earlier ones.",
        {
            "categories": array(
                "ACL command categories the role allows or denies, at least one. Unique by name.",
                obj(
                    "One ACL category rule.",
                    {
                        "name": string(
                            "ACL category without the '@', for example read, write, admin or dangerous "
                            "(all selects every command).",
                            max_length=32,
                            enum=ACL_CATEGORIES,
                        ),
                        "access": access_field("category"),
                    },
                    required=("name",),
                ),
                min_items=1,
                max_items=len(ACL_CATEGORIES),
                list_type="map",
                map_keys=("name",),
            ),
            "commands": array(
                "Individual commands (or command|subcommand) the role allows or denies, applied after the "
                "categories. Unique by name.",
                obj(
                    "One command rule.",
                    {
                        "name": string(
                            "A command, or command|subcommand, in lowercase: for example get, "
                            "config|get or client|kill.",
                            min_length=1,
                            max_length=64,
                            rules=[
                                rule(
                                    f"self.matches({raw(COMMAND)})",
                                    "must be a lowercase command name, optionally with one |subcommand "
                                    "(for example get or client|kill)",
                                    message_expression=lit(
                                        "must be a lowercase command name, optionally with one |subcommand "
                                        "(for example get or client|kill); got "
                                    )
                                    + " + self",
                                )
                            ],
                        ),
                        "access": access_field("command"),
                    },
                    required=("name",),
                ),
                max_items=128,
                list_type="map",
                map_keys=("name",),
            ),
        },
        required=("categories",),
    )
    status = obj(
        "ValkeyRoleStatus is written by the operator.",
        {
            "observedGeneration": observed_generation(),
            "summary": string(
                "The role's rules in ACL notation, for example +@read +@write -@dangerous.", max_length=8192
            ),
            "conditions": conditions("Conditions reported by the operator about this role."),
        },
    )
    return crd(
        VALKEY_ROLES,
        singular="valkeyrole",
        description=(
            "ValkeyRole is a reusable command permission set for ACL users, referenced by "
            "ValkeyCluster.spec.acl[].permissions[].roleRef. Editing a role re-applies the ACLs of every "
            "cluster that uses it, without restarts. Protected from deletion while referenced."
        ),
        spec=spec,
        status=status,
        columns=[
            column("Categories", ".status.summary", "Summary of the role's category and command rules.")
        ],
    )


# ---- ValkeyCluster ---------------------------------------------------------------------------------
def acl_pattern(description: str, what: str) -> Schema:
    return string(
        description,
        min_length=1,
        max_length=MAX_PATTERN,
        rules=[
            rule(
                f"self.matches({raw(ACL_PATTERN)})",
                f"a {what} pattern is a glob without spaces, parentheses or control characters",
                message_expression=lit(
                    f"a {what} pattern is a glob without spaces, parentheses or control characters; got "
                )
                + " + self",
            )
        ],
    )


def toleration() -> Schema:
    return obj(
        "A toleration, as in a Pod's spec.tolerations.",
        {
            "key": string(
                "Taint key the toleration applies to; empty with operator Exists matches every taint.",
                max_length=MAX_QUALIFIED_NAME,
            ),
            "operator": string("Exists or Equal (the default).", max_length=8, enum=("Exists", "Equal")),
            "value": string(
                "Taint value to match with operator Equal; empty with Exists.", max_length=MAX_LABEL_VALUE
            ),
            "effect": string(
                "Taint effect to match: NoSchedule, PreferNoSchedule or NoExecute; empty matches all.",
                max_length=16,
                enum=("NoSchedule", "PreferNoSchedule", "NoExecute"),
            ),
            "tolerationSeconds": integer(
                "With effect NoExecute: how long the pod stays bound after the taint appears."
            ),
        },
        rules=[
            rule(
                "!(has(self.operator) && self.operator == 'Exists' && has(self.value) && self.value != '')",
                "a toleration with operator Exists must not set a value",
            ),
            rule(
                "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
                "a toleration without a key must use operator Exists",
            ),
            rule(
                "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
                "tolerationSeconds requires effect NoExecute",
            ),
        ],
    )


def valkey_cluster() -> Schema:
    reserved = cel_list(RESERVED_USERNAMES)
    reserved_text = ", ".join(RESERVED_USERNAMES)
    user = obj(
        "One Valkey ACL user.",
        {
            "username": string(
                f"The user's name: letters, digits, '.', '_' and '-'. Unique in the list; {reserved_text} "
                "are reserved (the default user is disabled; the others are the operator's internal users).",
                min_length=1,
                max_length=MAX_USERNAME,
                rules=[
                    rule(
                        f"self.matches({raw(USERNAME)})",
                        "a username may contain only letters, digits, '.', '_' and '-'",
                        message_expression=lit(
                            "a username may contain only letters, digits, '.', '_' and '-'; got "
                        )
                        + " + self",
                    ),
                    rule(
                        f"!(self in {reserved})",
                        f"is reserved: {reserved_text} belong to Valkey and the operator",
                        message_expression=lit("username ")
                        + " + self + "
                        + lit(
                            f" is reserved ({reserved_text} belong to Valkey and the operator); "
                            "choose another name"
                        ),
                    ),
                ],
            ),
            "passwordHashes": array(
                "SHA-256 hashes of the user's passwords as lowercase hex (the first field printed by "
                'printf %s "$PASSWORD" | sha256sum). Any listed password works, so rotate by listing old '
                "and new, then removing the old.",
                string(
                    "SHA-256 of a password: exactly 64 lowercase hex characters.",
                    max_length=64,
                    rules=[
                        rule(
                            f"self.matches({raw(PASSWORD_HASH)})",
                            "a password hash is the SHA-256 of the password as exactly 64 lowercase hex "
                            "characters (0-9, a-f)",
                            message_expression=lit(
                                "a password hash is the SHA-256 of the password as exactly 64 lowercase hex "
                                "characters (0-9, a-f); this one "
                            )
                            + " + (self.size() != 64 ? "
                            + lit("has another length")
                            + " : self.matches('[A-F]') ? "
                            + lit("has uppercase characters")
                            + " : "
                            + lit("has characters other than 0-9 and a-f")
                            + ")",
                        )
                    ],
                ),
                min_items=1,
                max_items=MAX_PASSWORD_HASHES,
                list_type="set",
            ),
            "permissions": array(
                "What the user may do. Each entry becomes its own ACL selector, pairing one role's "
                "commands with that entry's keys and channels, so one entry's keys never gain another "
                "entry's commands.",
                obj(
                    "A role applied to a set of keys and channels.",
                    {
                        "roleRef": object_name("Name of the ValkeyRole whose commands apply.", "ValkeyRole"),
                        "keys": array(
                            "Key patterns the role's commands may touch. Without keys the entry grants no "
                            "key access.",
                            obj(
                                "A key pattern and the access granted to it.",
                                {
                                    "pattern": acl_pattern(
                                        "Glob-style key pattern, for example app:* (ACL ~pattern).", "key"
                                    ),
                                    "access": string(
                                        "read (%R~), write (%W~) or readwrite (~, the default).",
                                        max_length=16,
                                        enum=KEY_ACCESS,
                                        default="readwrite",
                                    ),
                                },
                                required=("pattern",),
                            ),
                            max_items=MAX_PATTERNS,
                        ),
                        "channels": array(
                            "Pub/Sub channel patterns the role's commands may use (ACL &pattern). "
                            "Without channels the entry grants no channel access.",
                            acl_pattern("Glob-style channel pattern, for example events:*.", "channel"),
                            max_items=MAX_PATTERNS,
                        ),
                    },
                    required=("roleRef",),
                ),
                min_items=1,
                max_items=MAX_PERMISSIONS,
            ),
        },
        required=("username", "passwordHashes", "permissions"),
    )
    prefix = RESERVED_ANNOTATION_PREFIX
    spec = obj(
        "ValkeyClusterSpec describes a sharded Valkey cluster built from a ValkeyConfig.",
        {
            "configRef": object_name(
                "Name of the ValkeyConfig (cluster-scoped) the cluster is built from: image, resources "
                "and valkey.conf settings. Until it resolves, the cluster does not progress.",
                "ValkeyConfig",
            ),
            "shards": integer(
                f"Number of shards (primaries); the 16384 slots are spread evenly over them. 1 to "
                f"{MAX_SHARDS}. Scaling moves slots with atomic slot migration; no key is lost.",
                fmt="int32",
                minimum=1,
                maximum=MAX_SHARDS,
                default=3,
            ),
            "replicasPerShard": integer(
                f"Replicas per shard, 0 to {MAX_REPLICAS_PER_SHARD}. With 0 a lost pod loses its shard's "
                "data (a cache); with replicas a replica is promoted.",
                fmt="int32",
                minimum=0,
                maximum=MAX_REPLICAS_PER_SHARD,
                default=1,
            ),
            "acl": array(
                "Valkey ACL users, unique by username. Rendered into each node's startup ACL and kept on "
                "every live node: users whose rules differ from the rendered ones (ACL LIST) are set "
                "again, users the operator did not render are deleted. The default user is disabled.",
                user,
                max_items=MAX_ACL_USERS,
                list_type="map",
                map_keys=("username",),
            ),
            "tls": obj(
                "TLS for clients, replication and the cluster bus (TLS only: the plain port is closed). "
                "Cannot be added or removed after creation. A new secretRef rolls the pods onto the new "
                "Secret; new data in the same Secret (a renewed certificate, a CA bundle) is loaded by "
                "every node without a restart.",
                {
                    "secretRef": object_name(
                        "Name of a kubernetes.io/tls Secret in the cluster's namespace with tls.crt, "
                        "tls.key and ca.crt (one or more CAs). Checked before use: a missing, expired or "
                        "mismatched one holds the cluster with reason TlsSecretInvalid.",
                        "Secret",
                    )
                },
                required=("secretRef",),
            ),
            "placement": obj(
                "Where the pods run. A change of zones, nodeSelector, tolerations or priorityClassName "
                "rolls the pods (shard by shard, replicas first); a zoneSpread change replaces no pod.",
                {
                    "zones": array(
                        "Zones (topology.kubernetes.io/zone) the pods may run in: a required node affinity.",
                        string(
                            "A zone name (a label value).",
                            min_length=1,
                            max_length=MAX_LABEL_VALUE,
                            rules=[
                                rule(
                                    f"self.matches({raw(LABEL_VALUE)})",
                                    "a zone must be a valid label value: letters, digits, '-', '_' and '.', "
                                    "starting and ending with a letter or digit",
                                )
                            ],
                        ),
                        max_items=MAX_ZONES,
                        list_type="set",
                    ),
                    "zoneSpread": string(
                        "How strictly each shard's pods spread over zones: bestEffort (topology spread "
                        "ScheduleAnyway) or required (DoNotSchedule, plus a cluster-wide soft spread). "
                        "Unset: the operator's defaultZoneSpread. A change applies to pods created later.",
                        max_length=16,
                        enum=ZONE_SPREADS,
                    ),
                    "nodeSelector": string_map(
                        "Node labels the pods require, passed verbatim to the pods' nodeSelector.",
                        max_properties=MAX_NODE_SELECTOR,
                        value_description="Required label value.",
                        value_max_length=MAX_LABEL_VALUE,
                        rules=[
                            rule(
                                f"self.all(k, k.matches({raw(QUALIFIED_NAME)}))",
                                "keys must be valid label keys ([prefix/]name)",
                                message_expression=lit("keys must be valid label keys ([prefix/]name); got ")
                                + f" + self.filter(k, !k.matches({raw(QUALIFIED_NAME)}))[0]",
                            ),
                            rule(
                                f"self.all(k, self[k].matches({raw(LABEL_VALUE)}))",
                                "values must be valid label values",
                                message_expression=lit("values must be valid label values; the value of ")
                                + f" + self.filter(k, !self[k].matches({raw(LABEL_VALUE)}))[0] + "
                                + lit(" is not"),
                            ),
                        ],
                    ),
                    "tolerations": array(
                        "Tolerations of the pods, as in a Pod's spec.tolerations.",
                        toleration(),
                        max_items=MAX_TOLERATIONS,
                    ),
                    "priorityClassName": object_name("PriorityClass of the pods.", "PriorityClass"),
                },
            ),
            "podAnnotations": string_map(
                f"Annotations added to every Valkey pod. Keys under {prefix} are the operator's and are "
                "rejected. New and changed keys are patched onto live pods; a removed key stays on a live "
                "pod until the pod is replaced.",
                max_properties=MAX_ANNOTATIONS,
                value_description="Annotation value.",
                value_max_length=MAX_ANNOTATION_VALUE,
                rules=[
                    rule(
                        f"self.all(k, !k.startsWith({lit(prefix)}))",
                        f"keys with the prefix {prefix} are reserved for the operator",
                        message_expression=lit("annotation ")
                        + f" + self.filter(k, k.startsWith({lit(prefix)}))[0] + "
                        + lit(
                            f" is not allowed: keys with the prefix {prefix} are reserved for the operator"
                        ),
                    ),
                    rule(
                        f"self.all(k, k.matches({raw(QUALIFIED_NAME)}))",
                        "keys must be valid annotation keys ([prefix/]name)",
                        message_expression=lit("keys must be valid annotation keys ([prefix/]name); got ")
                        + f" + self.filter(k, !k.matches({raw(QUALIFIED_NAME)}))[0]",
                    ),
                ],
            ),
        },
        required=("configRef",),
        rules=[
            rule(
                "has(self.tls) == has(oldSelf.tls)",
                "tls cannot be added or removed after the cluster is created (TLS mode is fixed for the "
                "life of a cluster; tls.secretRef may change)",
                message_expression=(
                    "has(oldSelf.tls) ? "
                    + lit(
                        "tls cannot be removed after the cluster is created: the cluster stays TLS-only "
                        "(tls.secretRef may change); create a new cluster without tls instead"
                    )
                    + " : "
                    + lit(
                        "tls cannot be added after the cluster is created: the cluster stays plain-text; "
                        "create a new cluster with tls instead"
                    )
                ),
                reason="FieldValueForbidden",
                field_path=".tls",
            )
        ],
    )
    node = obj(
        "One Valkey node (pod) as last observed.",
        {
            "pod": string("Name of the pod running the node.", max_length=MAX_NAME),
            "shard": integer("Shard index the node belongs to.", fmt="int32", minimum=0),
            "role": string("primary or replica, as Valkey reports it.", max_length=16, enum=NODE_ROLES),
            "nodeId": string("Valkey cluster node id.", max_length=64),
            "ip": string("IP address of the pod.", max_length=64),
            "version": string("Valkey version the running binary reports.", max_length=64),
            "slots": string("Slots the node owns, for example 0-5460.", max_length=131072),
        },
    )
    status = obj(
        "ValkeyClusterStatus is observed and written by the operator.",
        {
            "state": string(
                "Lifecycle state: Creating, Active, Updating or Failed.", max_length=16, enum=CLUSTER_STATES
            ),
            "message": string("Human-readable explanation of the state.", max_length=MAX_MESSAGE),
            "endpoint": string(
                "The seed address clients connect to: <cluster>-client.<namespace>.svc.<domain>:<port>, "
                "the domain being the operator's --cluster-domain (default cluster.local). It resolves "
                "only to nodes that are cluster members and serve.",
                max_length=512,
            ),
            "observedGeneration": observed_generation(),
            "shards": integer("Shards that exist.", fmt="int32", minimum=0),
            "readyShards": integer(
                "Shards whose primary and replicas are ready and in sync.", fmt="int32", minimum=0
            ),
            "readyNodes": integer("Nodes that are ready and joined.", fmt="int32", minimum=0),
            "currentImage": string(
                "The image reference every node runs; while any pod runs an outdated pod template it "
                "keeps its previous value and the cluster is Updating.",
                max_length=1024,
            ),
            "configHash": string(
                "The settingsHash of the effective config every node runs (pod template and runtime "
                "settings confirmed with CONFIG GET); until every node runs it, the previous value stays "
                "and the cluster is Updating.",
                max_length=128,
            ),
            "nodes": array("Per-node view.", node, max_items=MAX_STATUS_NODES),
            "rollout": obj(
                "A rolling update under way (absent when every pod runs the current pod template): shard "
                "by shard, replicas first, each primary handed over with a coordinated failover.",
                {
                    "shardsUpdated": integer(
                        "Shards whose every pod runs the current template.", fmt="int32", minimum=0
                    ),
                    "shards": integer("Shards in spec.", fmt="int32", minimum=0),
                    "shard": integer("The shard rolling now.", fmt="int32", minimum=0),
                    "step": string("What the rolling shard does in this pass.", max_length=512),
                    "startedAt": string(
                        "When this rolling update began (RFC 3339).", max_length=64, fmt="date-time"
                    ),
                },
            ),
            "maxPrimariesPerNode": integer(
                "The most slot-serving primaries one Kubernetes node holds; the operator moves primaries "
                "(coordinated failover) toward at most ceil(primaries / nodes hosting the cluster).",
                fmt="int32",
                minimum=0,
            ),
            "tls": obj(
                "TLS clusters only: the certificate material the nodes serve.",
                {
                    "secretHash": string(
                        "Hash of the tls.crt, tls.key and ca.crt the operator last saw in the Secret "
                        "spec.tls.secretRef names.",
                        max_length=64,
                    ),
                    "changedAt": string(
                        "When the operator first saw that content (RFC 3339); every node older than this "
                        "is reloaded once the kubelet has had time to update the mounted files.",
                        max_length=64,
                        fmt="date-time",
                    ),
                    "notAfter": string(
                        "When the earliest certificate a node serves expires (RFC 3339), read from a real "
                        "TLS handshake with each node.",
                        max_length=64,
                        fmt="date-time",
                    ),
                },
            ),
            "conditions": conditions("Conditions: Ready, Progressing and Degraded, each with a reason."),
        },
    )
    name_rule = rule(
        f"self.metadata.name.matches({raw(DNS_LABEL_1035)})",
        f"a ValkeyCluster name must be a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters (lowercase "
        "letters, digits and '-', starting with a letter): it names the cluster's Service and pods",
        message_expression=lit(
            f"a ValkeyCluster name must be a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters "
            "(lowercase letters, digits and '-', starting with a letter), because it names the cluster's "
            "Service and pods; got "
        )
        + " + self.metadata.name",
        field_path=".metadata.name",
    )
    return crd(
        VALKEY_CLUSTERS,
        singular="valkeycluster",
        description=(
            "ValkeyCluster is a sharded Valkey cluster built from a ValkeyConfig. The operator creates its "
            "pods, headless Service, ConfigMap, Secret and PodDisruptionBudgets (all owned, garbage "
            'collected with it). The annotation valkey.gomomento.com/paused: "true" stops all changes.'
        ),
        spec=spec,
        status=status,
        columns=[
            column("State", ".status.state", "Lifecycle state."),
            column("Shards", ".spec.shards", "Desired number of shards.", type_="integer"),
            column("Replicas", ".spec.replicasPerShard", "Desired replicas per shard.", type_="integer"),
            column("Config", ".spec.configRef", "The ValkeyConfig the cluster is built from."),
        ],
        short_names=("vkc",),
        root_rules=[name_rule],
        metadata={
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": MAX_CLUSTER_NAME}},
        },
    )


# ---- output ------------------------------------------------------------------------------------------
def all_crds() -> dict[str, Schema]:
    """File name (in crds/) -> CRD document."""
    return {
        "valkeyimages.yaml": valkey_image(),
        "valkeyconfigs.yaml": valkey_config(),
        "valkeyroles.yaml": valkey_role(),
        "valkeyclusters.yaml": valkey_cluster(),
    }


HEADER = (
    "# Generated by `python -m valkey_operator.api.crdgen` from valkey_operator/api/crdgen.py: do not edit.\n"
)


def render(document: Schema) -> str:
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
