"""Admission rules of the five CRDs on the real API server: each rule accepted and rejected, with its message.

Most cases are server-side dry runs (`dryRun=All`): the API server runs the
full admission chain (schema, defaulting, CEL) and persists nothing. The TLS
transition rule and `kubectl apply` use real objects, deleted afterwards.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from valkey_operator.api import tunables
from valkey_operator.api.resources import (
    API_VERSION,
    RESERVED_USERNAMES,
    VALKEY_BACKUPS,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
    VERSION_FLOOR_TEXT,
)
from valkey_operator.api.role import AclCategory
from valkey_operator.core.client import Client
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import ApiError, Obj

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

HASH = hashlib.sha256(b"correct horse battery staple").hexdigest()
OTHER_HASH = hashlib.sha256(b"rotated").hexdigest()
DIGEST = "sha256:" + hashlib.sha256(b"an image").hexdigest()
FLOOR_MESSAGE = f"at least {VERSION_FLOOR_TEXT}"


# ---- valid objects of each kind -----------------------------------------------------------------------
def image(name: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyImage",
        "metadata": {"name": name},
        "spec": {"repository": "valkey/valkey", "tag": "9.0.1", "version": "9.0.1"},
    }


def config(name: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyConfig",
        "metadata": {"name": name},
        "spec": {
            "imageRef": "valkey-9-0",
            "resources": {"cpu": "500m", "memory": "1Gi"},
            "valkey": {"maxmemory-policy": "allkeys-lru", "timeout": "300"},
            "podSecurity": {"runAsUser": 999, "runAsGroup": 999, "fsGroup": 999},
        },
    }


def role(name: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyRole",
        "metadata": {"name": name},
        "spec": {
            "categories": [{"name": "read", "access": "allow"}, {"name": "dangerous", "access": "deny"}],
            "commands": [{"name": "client|kill", "access": "deny"}],
        },
    }


def cluster(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "configRef": "standard",
            "shards": 3,
            "replicasPerShard": 1,
            "acl": [
                {
                    "username": "app",
                    "passwordHashes": [HASH],
                    "permissions": [
                        {
                            "roleRef": "reader",
                            "keys": [{"pattern": "app:*", "access": "readwrite"}],
                            "channels": ["events:*"],
                        }
                    ],
                }
            ],
            "tls": {"secretRef": "cache-tls"},
            "placement": {
                "zones": ["zone-a", "zone-b"],
                "zoneSpread": "bestEffort",
                "nodeSelector": {"example.com/pool": "cache"},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "cache", "effect": "NoSchedule"}
                ],
                "priorityClassName": "high",
            },
            "podAnnotations": {"example.com/team": "cache"},
        },
    }


DESTINATION: Obj = {
    "endpoint": "https://s3.eu-west-1.amazonaws.com",
    "bucket": "shop-valkey-backups",
    "path": "team-a/cache",
    "region": "eu-west-1",
    "credentialsSecretName": "s3-credentials",
    "caSecretName": "s3-ca",
}


def backup(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyBackup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterName": "cache", "destination": copy.deepcopy(DESTINATION)},
    }


KINDS: dict[str, Resource] = {
    "image": VALKEY_IMAGES,
    "config": VALKEY_CONFIGS,
    "role": VALKEY_ROLES,
    "cluster": VALKEY_CLUSTERS,
    "backup": VALKEY_BACKUPS,
}


def sample(kind: str, namespace: str) -> Obj:
    if kind == "cluster":
        return cluster("cache", namespace)
    if kind == "backup":
        return backup("cache-nightly", namespace)
    return {"image": image, "config": config, "role": role}[kind](f"{kind}-{namespace}")


def put(obj: Obj, path: str, value: Any) -> Obj:
    """A deep copy of obj with the dotted path set (numbers index lists); DROP removes the key."""
    result = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node: Any = result
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    elif value is DROP:
        node.pop(last, None)
    else:
        node[last] = value
    return result


DROP = object()


async def dry_run_create(api: Client, resource: Resource, obj: Obj) -> Obj:
    return await api.rest.request(
        "POST", resource.path(obj["metadata"].get("namespace")), body=obj, query={"dryRun": "All"}
    )


def causes(error: ApiError) -> list[tuple[str, str]]:
    return [(cause.get("field", ""), cause.get("message", "")) for cause in error.body["details"]["causes"]]


async def rejected(api: Client, resource: Resource, obj: Obj) -> list[tuple[str, str]]:
    with pytest.raises(ApiError) as error:
        await dry_run_create(api, resource, obj)
    assert error.value.status == 422, error.value
    assert error.value.reason == "Invalid", error.value
    return causes(error.value)


def assert_cause(found: list[tuple[str, str]], field_path: str, *fragments: str) -> None:
    for cause_field, message in found:
        if cause_field == field_path and all(fragment in message for fragment in fragments):
            return
    raise AssertionError(f"no cause at {field_path!r} containing {fragments!r}; got {found!r}")


# ---- the table ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    kind: str
    name: str
    changes: tuple[tuple[str, Any], ...]
    at: str | None = None  # the field the API server blames; None: accepted
    fragments: tuple[str, ...] = ()
    expect: tuple[tuple[str, Any], ...] = ()  # accepted: (dotted path, value after admission)

    @property
    def id(self) -> str:
        return f"{self.kind}: {self.name}"


def ok(kind: str, name: str, *changes: tuple[str, Any], expect: dict[str, Any] | None = None) -> Case:
    return Case(kind, name, changes, expect=tuple((expect or {}).items()))


def bad(
    kind: str, name: str, field_path: str, fragments: str | tuple[str, ...], *changes: tuple[str, Any]
) -> Case:
    return Case(kind, name, changes, field_path, (fragments,) if isinstance(fragments, str) else fragments)


def version_floor_cases() -> list[Case]:
    cases = [ok("image", f"version {good}", ("spec.version", good)) for good in ("9.0.1", "9.1.0", "10.0.0")]
    cases += [
        bad(
            "image",
            f"version {wrong}",
            "spec.version",
            (FLOOR_MESSAGE, f"got {wrong}"),
            ("spec.version", wrong),
        )
        for wrong in ("9.0.0", "8.1.8", "9.1", "v9.1.0", "9.01.0", "9.0.1-rc1", "9.1.0+build", "latest", "")
    ]
    return cases


IMAGE_CASES = [
    *version_floor_cases(),
    bad("image", "repository required", "spec.repository", "Required value", ("spec.repository", DROP)),
    bad("image", "tag required", "spec.tag", "Required value", ("spec.tag", DROP)),
    bad("image", "version required", "spec.version", "Required value", ("spec.version", DROP)),
    bad("image", "spec required", "spec", "Required value", ("spec", DROP)),
    bad("image", "version too long", "spec.version", "Too long", ("spec.version", "9." * 20 + "0")),
    ok("image", "digest", ("spec.digest", DIGEST)),
    *[
        bad(
            "image",
            f"digest {why}",
            "spec.digest",
            ("sha256: followed by exactly 64", "got"),
            ("spec.digest", d),
        )
        for why, d in (
            ("without algorithm", DIGEST.removeprefix("sha256:")),
            ("uppercase", DIGEST.upper().replace("SHA256", "sha256")),
            ("short", DIGEST[:-1]),
            ("sha512", "sha512:" + "0" * 64),
        )
    ],
    bad("image", "digest too long", "spec.digest", "Too long", ("spec.digest", DIGEST + "0")),
]

CONFIG_CASES = [
    ok("config", "limits above requests", ("spec.resources.limits", {"cpu": "2", "memory": "2Gi"})),
    ok("config", "limits equal to requests", ("spec.resources.limits", {"cpu": "500m", "memory": "1Gi"})),
    ok("config", "limits without requests", ("spec.resources", {"limits": {"cpu": 1, "memory": "1Gi"}})),
    ok("config", "integer limit over a string request", ("spec.resources.limits", {"cpu": 1})),
    bad(
        "config",
        "cpu limit below the request",
        "spec.resources.limits.cpu",
        ("limits.cpu 250m is below the cpu request 500m",),
        ("spec.resources.limits", {"cpu": "250m"}),
    ),
    bad(
        "config",
        "memory limit below the request",
        "spec.resources.limits.memory",
        ("limits.memory 512Mi is below the memory request 1Gi",),
        ("spec.resources.limits", {"memory": "512Mi"}),
    ),
    bad(
        "config",
        "limit not a quantity",
        "spec.resources.limits.memory",
        ("positive Kubernetes quantity", "got lots"),
        ("spec.resources.limits", {"memory": "lots"}),
    ),
    ok("config", "imageRef only", ("spec.baseRef", DROP)),
    ok("config", "baseRef only", ("spec.imageRef", DROP), ("spec.baseRef", "standard")),
    ok("config", "imageRef and baseRef", ("spec.baseRef", "standard")),
    bad(
        "config",
        "neither imageRef nor baseRef",
        "spec",
        "must set imageRef (the ValkeyImage to run), baseRef (a ValkeyConfig to inherit from), or both",
        ("spec.imageRef", DROP),
    ),
    bad(
        "config",
        "imageRef not a name",
        "spec.imageRef",
        ("name of a ValkeyImage", "got Valkey_9"),
        ("spec.imageRef", "Valkey_9"),
    ),
    bad(
        "config",
        "baseRef not a name",
        "spec.baseRef",
        ("name of a ValkeyConfig", "got -base"),
        ("spec.baseRef", "-base"),
    ),
    ok("config", "cpu as integer", ("spec.resources.cpu", 2), expect={"spec.resources.cpu": 2}),
    ok("config", "cpu millicores", ("spec.resources.cpu", "250m")),
    ok("config", "memory binary suffix", ("spec.resources.memory", "512Mi")),
    ok("config", "memory decimal exponent", ("spec.resources.memory", "1e9")),
    bad(
        "config",
        "cpu not a quantity",
        "spec.resources.cpu",
        ("positive Kubernetes quantity", "got two"),
        ("spec.resources.cpu", "two"),
    ),
    bad(
        "config",
        "cpu zero",
        "spec.resources.cpu",
        ("positive Kubernetes quantity", "got 0"),
        ("spec.resources.cpu", 0),
    ),
    bad(
        "config",
        "cpu negative",
        "spec.resources.cpu",
        ("positive Kubernetes quantity", "got -1"),
        ("spec.resources.cpu", "-1"),
    ),
    bad(
        "config",
        "memory not a quantity",
        "spec.resources.memory",
        ("positive Kubernetes quantity", "got 1GB"),
        ("spec.resources.memory", "1GB"),
    ),
    bad(
        "config",
        "memory zero",
        "spec.resources.memory",
        ("positive Kubernetes quantity", "got 0Gi"),
        ("spec.resources.memory", "0Gi"),
    ),
    bad(
        "config",
        "runAsUser root",
        "spec.podSecurity.runAsUser",
        "greater than or equal to 1",
        ("spec.podSecurity.runAsUser", 0),
    ),
    bad(
        "config",
        "runAsGroup root",
        "spec.podSecurity.runAsGroup",
        "greater than or equal to 1",
        ("spec.podSecurity.runAsGroup", 0),
    ),
    bad(
        "config",
        "fsGroup negative",
        "spec.podSecurity.fsGroup",
        "greater than or equal to 1",
        ("spec.podSecurity.fsGroup", -5),
    ),
    ok(
        "config",
        "non-default pod ids",
        ("spec.podSecurity", {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000}),
    ),
    ok(
        "config",
        "every allowlisted tunable at once",
        ("spec.valkey", {name: "1" for name in sorted(tunables.TUNABLES)}),
    ),
    ok(
        "config",
        "directive names are case-insensitive",
        ("spec.valkey", {"MaxMemory": "2gb", "MAXMEMORY-POLICY": "noeviction"}),
    ),
    ok("config", "empty value", ("spec.valkey", {"notify-keyspace-events": ""})),
    ok("config", "value with spaces", ("spec.valkey", {"latency-tracking-info-percentiles": "50 99 99.9"})),
    bad(
        "config",
        "directive not allowed, uppercase",
        "spec.valkey",
        ("not allowed: PORT",),
        ("spec.valkey", {"PORT": "7000"}),
    ),
    bad(
        "config",
        "line feed in a value",
        "spec.valkey",
        ("single line", "offending directives: maxmemory"),
        ("spec.valkey", {"maxmemory": "1gb\nport 7000"}),
    ),
    bad(
        "config",
        "carriage return in a value",
        "spec.valkey",
        ("single line", "offending directives: timeout"),
        ("spec.valkey", {"timeout": "0\r"}),
    ),
    bad(
        "config",
        "one directive in two spellings",
        "spec.valkey",
        ("names the directive maxmemory more than once", "case-insensitive"),
        ("spec.valkey", {"maxmemory": "1gb", "MaxMemory": "2gb"}),
    ),
    bad(
        "config",
        "too many directives",
        "spec.valkey",
        "must have at most 64 items",
        ("spec.valkey", {f"x{i}": "1" for i in range(65)}),
    ),
]

# ---- persistence (SPEC 1.6): each config alone; the chain is resolve.py's -------------------------------
P = "spec.persistence"
SIZE_REQUIRED = "persistence.size is required when persistence.mode is rdb or aof"
AOF_ONLY = "persistence.appendfsync applies only to persistence.mode aof"
PERSISTENCE_CASES = [
    ok("config", "persistence rdb", (P, {"mode": "rdb", "size": "10Gi"})),
    ok(
        "config",
        "persistence aof with every field",
        (
            P,
            {
                "mode": "aof",
                "size": "1Gi",
                "appendfsync": "always",
                "storageClassName": "local-path",
                "reclaimPolicy": "Retain",
            },
        ),
    ),
    ok("config", "persistence size as an integer", (P, {"mode": "rdb", "size": 10737418240})),
    ok("config", "persistence none with a size", (P, {"mode": "none", "size": "1Gi"})),
    ok(
        "config",
        "persistence fields are stored as sent, no default is written (a child inherits)",
        (P, {"size": "5Gi"}),
        expect={f"{P}.mode": DROP, f"{P}.appendfsync": DROP, f"{P}.reclaimPolicy": DROP},
    ),
    ok(
        "config",
        "persistence mode without size, inherited through baseRef",
        ("spec.baseRef", "base"),
        (P, {"mode": "aof"}),
    ),
    ok(
        "config",
        "persistence appendfsync alone, the mode inherited through baseRef",
        ("spec.baseRef", "base"),
        (P, {"appendfsync": "always"}),
    ),
    bad("config", "persistence rdb without size", f"{P}.size", SIZE_REQUIRED, (P, {"mode": "rdb"})),
    bad(
        "config",
        "persistence aof without size",
        f"{P}.size",
        SIZE_REQUIRED,
        (P, {"mode": "aof", "appendfsync": "always"}),
    ),
    bad(
        "config",
        "persistence appendfsync with rdb",
        f"{P}.appendfsync",
        AOF_ONLY,
        (P, {"mode": "rdb", "size": "1Gi", "appendfsync": "always"}),
    ),
    bad(
        "config",
        "persistence appendfsync with rdb, even with baseRef",
        f"{P}.appendfsync",
        AOF_ONLY,
        ("spec.baseRef", "base"),
        (P, {"mode": "rdb", "appendfsync": "everysec"}),
    ),
    bad(
        "config",
        "persistence appendfsync without a mode and without a base (mode none)",
        f"{P}.appendfsync",
        AOF_ONLY,
        (P, {"size": "1Gi", "appendfsync": "everysec"}),
    ),
    bad("config", "persistence mode unknown", f"{P}.mode", "Unsupported value", (P, {"mode": "both"})),
    bad(
        "config",
        "persistence appendfsync no is not offered",
        f"{P}.appendfsync",
        "Unsupported value",
        (P, {"mode": "aof", "size": "1Gi", "appendfsync": "no"}),
    ),
    bad(
        "config",
        "persistence reclaimPolicy is case-sensitive",
        f"{P}.reclaimPolicy",
        "Unsupported value",
        (P, {"mode": "rdb", "size": "1Gi", "reclaimPolicy": "retain"}),
    ),
    *[
        bad(
            "config",
            f"persistence size {size!r}",
            f"{P}.size",
            ("must be a positive Kubernetes quantity, for example 10Gi", f"got {size}"),
            (P, {"mode": "rdb", "size": size}),
        )
        for size in ("10GB", "0", "-1Gi", "lots", 0)
    ],
    bad(
        "config",
        "persistence storageClassName is a name",
        f"{P}.storageClassName",
        ("must be the name of a StorageClass", "got Fast_SSD"),
        (P, {"mode": "rdb", "size": "1Gi", "storageClassName": "Fast_SSD"}),
    ),
]

# Directives the operator owns (SPEC 1.2): every one is rejected, and the message names it.
OPERATOR_OWNED_DIRECTIVES = (
    "port",
    "bind",
    "protected-mode",
    "tls-port",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-replication",
    "tls-cluster",
    "tls-auth-clients",
    "dir",
    "dbfilename",
    "save",
    "appendonly",
    "appendfilename",
    "requirepass",
    "aclfile",
    "user",
    "masteruser",
    "masterauth",
    "primaryuser",
    "primaryauth",
    "replicaof",
    "slaveof",
    "include",
    "loadmodule",
    "enable-debug-command",
    "enable-module-command",
    "enable-protected-configs",
    "rename-command",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-announce-ip",
    "cluster-announce-hostname",
    "cluster-announce-port",
    "cluster-announce-bus-port",
    "cluster-allow-replica-migration",
    "cluster-port",
    "daemonize",
    "logfile",
    "unixsocket",
    "pidfile",
)

ROLE_CASES = [
    ok(
        "role",
        "access defaults to allow",
        ("spec.categories", [{"name": "write"}]),
        expect={"spec.categories.0.access": "allow"},
    ),
    ok("role", "category all", ("spec.categories", [{"name": "all", "access": "allow"}])),
    ok(
        "role",
        "every category",
        (
            "spec.categories",
            [{"name": category.value} for category in AclCategory],
        ),
    ),
    ok("role", "no commands", ("spec.commands", DROP)),
    ok("role", "plain command", ("spec.commands", [{"name": "flushall", "access": "deny"}])),
    bad(
        "role",
        "unknown category",
        "spec.categories[0].name",
        ('Unsupported value: "reads"', '"read"'),
        ("spec.categories.0.name", "reads"),
    ),
    bad(
        "role",
        "category with @",
        "spec.categories[0].name",
        "Unsupported value",
        ("spec.categories.0.name", "@read"),
    ),
    bad(
        "role",
        "category access not allow|deny",
        "spec.categories[0].access",
        ('Unsupported value: "maybe"', '"allow"', '"deny"'),
        ("spec.categories.0.access", "maybe"),
    ),
    bad(
        "role",
        "command access not allow|deny",
        "spec.commands[0].access",
        ('Unsupported value: "+"', '"allow"'),
        ("spec.commands.0.access", "+"),
    ),
    bad("role", "categories required", "spec.categories", "Required value", ("spec.categories", DROP)),
    bad("role", "categories empty", "spec.categories", "at least 1 items", ("spec.categories", [])),
    bad(
        "role",
        "category listed twice",
        "spec.categories[1]",
        "Duplicate value",
        ("spec.categories", [{"name": "read"}, {"name": "read", "access": "deny"}]),
    ),
    bad(
        "role",
        "command listed twice",
        "spec.commands[1]",
        "Duplicate value",
        ("spec.commands", [{"name": "get"}, {"name": "get"}]),
    ),
    bad(
        "role",
        "uppercase command",
        "spec.commands[0].name",
        ("lowercase command name", "got GET"),
        ("spec.commands.0.name", "GET"),
    ),
    bad(
        "role",
        "command with a space",
        "spec.commands[0].name",
        ("lowercase command name", "got config get"),
        ("spec.commands.0.name", "config get"),
    ),
    bad(
        "role",
        "two subcommands",
        "spec.commands[0].name",
        ("one |subcommand", "got config|get|x"),
        ("spec.commands.0.name", "config|get|x"),
    ),
]


def user(username: str) -> dict[str, Any]:
    return {"username": username, "passwordHashes": [HASH], "permissions": [{"roleRef": "reader"}]}


def secret_user(username: str, secret: str) -> dict[str, Any]:
    return {"username": username, "passwordSecretName": secret, "permissions": [{"roleRef": "reader"}]}


def generated_user(username: str) -> dict[str, Any]:
    return {"username": username, "permissions": [{"roleRef": "reader"}]}


def cert_user(username: str) -> dict[str, Any]:
    return {"username": username, "authentication": "Certificate", "permissions": [{"roleRef": "reader"}]}


NEITHER = "has neither passwordHashes nor passwordSecretName"


CLUSTER_CASES = [
    ok(
        "cluster",
        "defaults",
        ("spec", {"configRef": "standard"}),
        expect={"spec.shards": 3, "spec.replicasPerShard": 1},
    ),
    ok(
        "cluster",
        "key access defaults to readwrite",
        ("spec.acl.0.permissions.0.keys", [{"pattern": "a:*"}]),
        expect={"spec.acl.0.permissions.0.keys.0.access": "readwrite"},
    ),
    ok("cluster", "one shard", ("spec.shards", 1)),
    ok("cluster", "64 shards", ("spec.shards", 64)),
    ok("cluster", "no replicas", ("spec.replicasPerShard", 0)),
    ok("cluster", "5 replicas", ("spec.replicasPerShard", 5)),
    bad("cluster", "zero shards", "spec.shards", "greater than or equal to 1", ("spec.shards", 0)),
    bad("cluster", "65 shards", "spec.shards", "less than or equal to 64", ("spec.shards", 65)),
    bad(
        "cluster",
        "negative replicas",
        "spec.replicasPerShard",
        "greater than or equal to 0",
        ("spec.replicasPerShard", -1),
    ),
    bad(
        "cluster",
        "6 replicas",
        "spec.replicasPerShard",
        "less than or equal to 5",
        ("spec.replicasPerShard", 6),
    ),
    bad("cluster", "configRef required", "spec.configRef", "Required value", ("spec.configRef", DROP)),
    bad(
        "cluster",
        "configRef not a name",
        "spec.configRef",
        ("name of a ValkeyConfig", "got My Config"),
        ("spec.configRef", "My Config"),
    ),
    bad(
        "cluster",
        "name must start with a letter",
        "metadata.name",
        ("DNS-1035 label", "got 1cache"),
        ("metadata.name", "1cache"),
    ),
    bad(
        "cluster",
        "name longer than 50",
        "metadata.name",
        "may not be more than 50",
        ("metadata.name", "c" * 51),
    ),
    ok("cluster", "name of 50 characters", ("metadata.name", "c" * 50)),
    bad(
        "cluster",
        "name ending with -client",
        "metadata.name",
        ("may not end with -client", "client Service is <x>-client", "got web-client"),
        ("metadata.name", "web-client"),
    ),
    ok("cluster", "a name that only contains client", ("metadata.name", "client-web")),
    ok("cluster", "a name ending with client but not -client", ("metadata.name", "webclient")),
    ok("cluster", "no acl", ("spec.acl", DROP)),
    ok("cluster", "two users", ("spec.acl", [user("app"), user("reporting")])),
    ok("cluster", "username with dots and dashes", ("spec.acl.0.username", "team.app-1_x")),
    ok("cluster", "reserved names are case-sensitive like Valkey's", ("spec.acl.0.username", "Default")),
    bad(
        "cluster",
        "usernames unique",
        "spec.acl[1]",
        ("Duplicate value", "app"),
        ("spec.acl", [user("app"), user("app")]),
    ),
    *[
        bad(
            "cluster",
            f"reserved username {name}",
            "spec.acl[0].username",
            (f"username {name} is reserved",),
            ("spec.acl.0.username", name),
        )
        for name in RESERVED_USERNAMES
    ],
    bad(
        "cluster",
        "username with a space",
        "spec.acl[0].username",
        ("letters, digits", "got two words"),
        ("spec.acl.0.username", "two words"),
    ),
    bad("cluster", "username empty", "spec.acl[0].username", "at least 1 chars", ("spec.acl.0.username", "")),
    ok("cluster", "rotation with two hashes", ("spec.acl.0.passwordHashes", [HASH, OTHER_HASH])),
    ok("cluster", "password from a Secret", ("spec.acl", [secret_user("app", "app-passwords")])),
    ok("cluster", "generated password", ("spec.acl", [generated_user("app.v2")])),
    *[
        bad(
            "cluster",
            f"generated password for a username with a dash: {name}",
            "spec.acl[0].username",
            (f"user {name} " + NEITHER, "no '-'", "no two clusters' Secrets share a name"),
            ("spec.acl", [generated_user(name)]),
        )
        for name in ("app-x", "b-internal")
    ],
    ok("cluster", "a dashed username with hashes", ("spec.acl", [user("b-internal")])),
    ok(
        "cluster",
        "the three sources side by side",
        ("spec.acl", [user("a"), secret_user("b", "b-pw"), generated_user("c")]),
    ),
    bad(
        "cluster",
        "hashes and a Secret",
        "spec.acl[0].passwordSecretName",
        "set passwordHashes or passwordSecretName, not both",
        ("spec.acl.0.passwordSecretName", "app-passwords"),
    ),
    ok(
        "cluster",
        "a certificate user with clientAuth Required (a dashed name, no Secret generated)",
        ("spec.tls.clientAuth", "Required"),
        ("spec.acl", [cert_user("app-x"), user("b")]),
    ),
    bad(
        "cluster",
        "a certificate user with a password",
        "spec.acl[0].authentication",
        "a user with authentication Certificate has no password",
        ("spec.tls.clientAuth", "Required"),
        ("spec.acl", [{**cert_user("app"), "passwordHashes": [HASH]}]),
    ),
    bad(
        "cluster",
        "a certificate user without clientAuth Required",
        "spec.acl",
        "a user with authentication Certificate needs spec.tls.clientAuth Required",
        ("spec.acl", [cert_user("app")]),
    ),
    ok(
        "cluster",
        "external access through load balancers with annotations",
        (
            "spec.externalAccess",
            {"type": "LoadBalancer", "serviceAnnotations": {"example.com/lb": "internal"}},
        ),
    ),
    ok("cluster", "external access through node ports", ("spec.externalAccess", {"type": "NodePort"})),
    bad(
        "cluster",
        "external access without a type",
        "spec.externalAccess.type",
        "Required value",
        ("spec.externalAccess", {"serviceAnnotations": {}}),
    ),
    bad(
        "cluster",
        "external access through a ClusterIP",
        "spec.externalAccess.type",
        "Unsupported value",
        ("spec.externalAccess", {"type": "ClusterIP"}),
    ),
    bad(
        "cluster",
        "an external Service annotation key that is no key",
        "spec.externalAccess.serviceAnnotations",
        "keys must be valid annotation keys",
        ("spec.externalAccess", {"type": "NodePort", "serviceAnnotations": {"not a key": "x"}}),
    ),
    bad(
        "cluster",
        "an unknown clientAuth",
        "spec.tls.clientAuth",
        "Unsupported value",
        ("spec.tls.clientAuth", "Sometimes"),
    ),
    bad(
        "cluster",
        "password Secret not a name",
        "spec.acl[0].passwordSecretName",
        ("name of a Secret", "got App_Passwords"),
        ("spec.acl", [secret_user("app", "App_Passwords")]),
    ),
    bad(
        "cluster",
        "generated password for an uppercase username",
        "spec.acl[0].username",
        ("user App " + NEITHER, "<cluster>-<username>"),
        ("spec.acl", [generated_user("App")]),
    ),
    bad(
        "cluster",
        "generated password for an underscored username",
        "spec.acl[0].username",
        ("user app_1 " + NEITHER,),
        ("spec.acl", [generated_user("app_1")]),
    ),
    bad(
        "cluster",
        "generated password for the internal Secret's name",
        "spec.acl[0].username",
        ("user internal " + NEITHER, "not internal"),
        ("spec.acl", [generated_user("internal")]),
    ),
    ok("cluster", "a user named internal with hashes", ("spec.acl", [user("internal")])),
    ok("cluster", "uppercase username with a Secret", ("spec.acl", [secret_user("App", "app-pw")])),
    ok("cluster", "image pull secrets", ("spec.imagePullSecrets", ["registry", "mirror.example"])),
    bad(
        "cluster",
        "image pull secret not a name",
        "spec.imagePullSecrets[0]",
        ("name of a Secret", "got Registry"),
        ("spec.imagePullSecrets", ["Registry"]),
    ),
    bad(
        "cluster",
        "image pull secret twice",
        "spec.imagePullSecrets[1]",
        "Duplicate value",
        ("spec.imagePullSecrets", ["registry", "registry"]),
    ),
    bad(
        "cluster",
        "17 image pull secrets",
        "spec.imagePullSecrets",
        "at most 16 items",
        ("spec.imagePullSecrets", [f"r{i}" for i in range(17)]),
    ),
    bad(
        "cluster",
        "hash uppercase",
        "spec.acl[0].passwordHashes[0]",
        ("64 lowercase hex", "uppercase"),
        ("spec.acl.0.passwordHashes", [HASH.upper()]),
    ),
    bad(
        "cluster",
        "hash 63 characters",
        "spec.acl[0].passwordHashes[0]",
        ("64 lowercase hex", "another length"),
        ("spec.acl.0.passwordHashes", [HASH[:63]]),
    ),
    bad(
        "cluster",
        "hash 65 characters",
        "spec.acl[0].passwordHashes[0]",
        "may not be more than 64",
        ("spec.acl.0.passwordHashes", [HASH + "0"]),
    ),
    bad(
        "cluster",
        "hash not hex",
        "spec.acl[0].passwordHashes[0]",
        ("64 lowercase hex", "other than 0-9 and a-f"),
        ("spec.acl.0.passwordHashes", ["g" * 64]),
    ),
    bad(
        "cluster",
        "hash listed twice",
        "spec.acl[0].passwordHashes[1]",
        "Duplicate value",
        ("spec.acl.0.passwordHashes", [HASH, HASH]),
    ),
    bad(
        "cluster",
        "no hashes",
        "spec.acl[0].passwordHashes",
        "at least 1 items",
        ("spec.acl.0.passwordHashes", []),
    ),
    bad(
        "cluster",
        "nine hashes",
        "spec.acl[0].passwordHashes",
        "at most 8 items",
        ("spec.acl.0.passwordHashes", [hashlib.sha256(bytes([i])).hexdigest() for i in range(9)]),
    ),
    bad(
        "cluster",
        "no permissions",
        "spec.acl[0].permissions",
        "at least 1 items",
        ("spec.acl.0.permissions", []),
    ),
    bad(
        "cluster",
        "roleRef required",
        "spec.acl[0].permissions[0].roleRef",
        "Required value",
        ("spec.acl.0.permissions.0.roleRef", DROP),
    ),
    bad(
        "cluster",
        "roleRef not a name",
        "spec.acl[0].permissions[0].roleRef",
        ("name of a ValkeyRole", "got Reader"),
        ("spec.acl.0.permissions.0.roleRef", "Reader"),
    ),
    ok("cluster", "key access read", ("spec.acl.0.permissions.0.keys.0.access", "read")),
    ok("cluster", "key access write", ("spec.acl.0.permissions.0.keys.0.access", "write")),
    bad(
        "cluster",
        "key access not read|write|readwrite",
        "spec.acl[0].permissions[0].keys[0].access",
        ('Unsupported value: "all"', '"readwrite"'),
        ("spec.acl.0.permissions.0.keys.0.access", "all"),
    ),
    bad(
        "cluster",
        "key pattern with a space",
        "spec.acl[0].permissions[0].keys[0].pattern",
        ("key pattern is a glob without spaces", "got a *"),
        ("spec.acl.0.permissions.0.keys.0.pattern", "a *"),
    ),
    bad(
        "cluster",
        "key pattern closing a selector",
        "spec.acl[0].permissions[0].keys[0].pattern",
        "without spaces, parentheses",
        ("spec.acl.0.permissions.0.keys.0.pattern", "x)(~*"),
    ),
    bad(
        "cluster",
        "channel pattern with a newline",
        "spec.acl[0].permissions[0].channels[0]",
        "channel pattern is a glob",
        ("spec.acl.0.permissions.0.channels.0", "a\n+@all"),
    ),
    ok(
        "cluster",
        "glob characters in patterns",
        ("spec.acl.0.permissions.0.keys.0.pattern", "app:{user}:[a-z]?*"),
        ("spec.acl.0.permissions.0.channels.0", "news.*"),
    ),
    ok("cluster", "without tls", ("spec.tls", DROP)),
    bad("cluster", "tls without secretRef", "spec.tls.secretRef", "Required value", ("spec.tls", {})),
    bad(
        "cluster",
        "tls secretRef not a name",
        "spec.tls.secretRef",
        ("name of a Secret", "got tls/secret"),
        ("spec.tls.secretRef", "tls/secret"),
    ),
    ok("cluster", "zoneSpread required", ("spec.placement.zoneSpread", "required")),
    ok(
        "cluster",
        "zoneSpread unset has no schema default",
        ("spec.placement.zoneSpread", DROP),
        expect={"spec.placement.zoneSpread": DROP},
    ),
    bad(
        "cluster",
        "zoneSpread not an enum value",
        "spec.placement.zoneSpread",
        ('Unsupported value: "strict"', '"bestEffort"', '"required"'),
        ("spec.placement.zoneSpread", "strict"),
    ),
    bad(
        "cluster",
        "zone not a label value",
        "spec.placement.zones[0]",
        "valid label value",
        ("spec.placement.zones", ["-zone"]),
    ),
    bad(
        "cluster",
        "zone listed twice",
        "spec.placement.zones[1]",
        "Duplicate value",
        ("spec.placement.zones", ["a", "a"]),
    ),
    bad(
        "cluster",
        "nodeSelector key invalid",
        "spec.placement.nodeSelector",
        ("valid label keys", "got pool type"),
        ("spec.placement.nodeSelector", {"pool type": "x"}),
    ),
    bad(
        "cluster",
        "nodeSelector value invalid",
        "spec.placement.nodeSelector",
        ("valid label values", "the value of pool"),
        ("spec.placement.nodeSelector", {"pool": "a b"}),
    ),
    ok("cluster", "toleration Exists without key", ("spec.placement.tolerations", [{"operator": "Exists"}])),
    ok(
        "cluster",
        "toleration NoExecute with seconds",
        (
            "spec.placement.tolerations",
            [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
        ),
    ),
    bad(
        "cluster",
        "toleration Exists with a value",
        "spec.placement.tolerations[0]",
        "operator Exists must not set a value",
        ("spec.placement.tolerations", [{"key": "k", "operator": "Exists", "value": "v"}]),
    ),
    bad(
        "cluster",
        "toleration without key needs Exists",
        "spec.placement.tolerations[0]",
        "without a key must use operator Exists",
        ("spec.placement.tolerations", [{"operator": "Equal", "value": "v"}]),
    ),
    bad(
        "cluster",
        "tolerationSeconds without NoExecute",
        "spec.placement.tolerations[0]",
        "tolerationSeconds requires effect NoExecute",
        ("spec.placement.tolerations", [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]),
    ),
    bad(
        "cluster",
        "toleration operator unknown",
        "spec.placement.tolerations[0].operator",
        'Unsupported value: "In"',
        ("spec.placement.tolerations", [{"key": "k", "operator": "In"}]),
    ),
    bad(
        "cluster",
        "toleration effect unknown",
        "spec.placement.tolerations[0].effect",
        'Unsupported value: "Evict"',
        ("spec.placement.tolerations", [{"key": "k", "effect": "Evict"}]),
    ),
    bad(
        "cluster",
        "priorityClassName not a name",
        "spec.placement.priorityClassName",
        ("name of a PriorityClass", "got High"),
        ("spec.placement.priorityClassName", "High"),
    ),
    ok(
        "cluster",
        "annotation prefix outside the operator's",
        ("spec.podAnnotations", {"prometheus.io/scrape": "true", "valkey.gomomento.com.example/x": "1"}),
    ),
    bad(
        "cluster",
        "operator annotation prefix",
        "spec.podAnnotations",
        ("annotation valkey.gomomento.com/paused is not allowed", "reserved for the operator"),
        ("spec.podAnnotations", {"valkey.gomomento.com/paused": "true"}),
    ),
    bad(
        "cluster",
        "annotation key invalid",
        "spec.podAnnotations",
        ("valid annotation keys", "got not valid!"),
        ("spec.podAnnotations", {"not valid!": "1"}),
    ),
]

# ---- backups (SPEC 1.7): a ValkeyBackup's destination, and a cluster's spec.backup / spec.restore ------
D = "spec.destination"
BUCKET = "must be an S3 bucket name"
URL = "must be an http:// or https:// URL with a host"


def without(obj: Obj, key: str) -> Obj:
    return {name: value for name, value in obj.items() if name != key}


def destination_cases(kind: str, at: str, *base: tuple[str, Any]) -> list[Case]:
    """The destination's rules, the same wherever it sits (a ValkeyBackup's spec or a schedule);
    `base` changes the sample first (gives a cluster its spec.backup)."""
    cases = [
        ok(
            kind,
            f"{at}: minimal",
            (at, {"endpoint": "http://127.0.0.1:9000", "bucket": "b-1", "credentialsSecretName": "s"}),
        ),
        ok(
            kind,
            f"{at}: endpoint with a port and a path",
            (f"{at}.endpoint", "https://minio.storage:9000/s3"),
        ),
        ok(kind, f"{at}: bucket of 3 with dots", (f"{at}.bucket", "a.b")),
        ok(kind, f"{at}: bucket of 63", (f"{at}.bucket", "b" * 63)),
        ok(kind, f"{at}: nested path", (f"{at}.path", "a/b/c/")),
        bad(kind, f"{at}: endpoint required", f"{at}.endpoint", "Required value", (f"{at}.endpoint", DROP)),
        bad(kind, f"{at}: bucket required", f"{at}.bucket", "Required value", (f"{at}.bucket", DROP)),
        bad(
            kind,
            f"{at}: credentials required",
            f"{at}.credentialsSecretName",
            "Required value",
            (f"{at}.credentialsSecretName", DROP),
        ),
        *[
            bad(
                kind,
                f"{at}: endpoint {endpoint!r}",
                f"{at}.endpoint",
                (URL, f"got {endpoint}"),
                (f"{at}.endpoint", endpoint),
            )
            for endpoint in (
                "s3.example.com",
                "ftp://s3.example.com",
                "https://",
                "https://s3 example.com",
                "HTTPS://s3",
            )
        ],
        bad(
            kind,
            f"{at}: endpoint too long",
            f"{at}.endpoint",
            "Too long",
            (f"{at}.endpoint", "https://" + "a" * 2041),
        ),
        *[
            bad(
                kind,
                f"{at}: bucket {bucket!r}",
                f"{at}.bucket",
                (BUCKET, f"got {bucket}"),
                (f"{at}.bucket", bucket),
            )
            for bucket in ("My_Bucket", "-bucket", "bucket-", "a..b", "bucket.", "UPPER")
        ],
        bad(kind, f"{at}: bucket of 2", f"{at}.bucket", "at least 3 chars", (f"{at}.bucket", "ab")),
        bad(kind, f"{at}: bucket of 64", f"{at}.bucket", "Too long", (f"{at}.bucket", "b" * 64)),
        bad(
            kind,
            f"{at}: path with a leading slash",
            f"{at}.path",
            ("must not start with '/'", "got /backups"),
            (f"{at}.path", "/backups"),
        ),
        bad(kind, f"{at}: path too long", f"{at}.path", "Too long", (f"{at}.path", "p" * 1025)),
        bad(
            kind,
            f"{at}: region with a slash",
            f"{at}.region",
            ("a region is", "got eu/west"),
            (f"{at}.region", "eu/west"),
        ),
        bad(
            kind,
            f"{at}: credentials Secret not a name",
            f"{at}.credentialsSecretName",
            ("name of a Secret", "got S3 Keys"),
            (f"{at}.credentialsSecretName", "S3 Keys"),
        ),
        bad(
            kind,
            f"{at}: CA Secret not a name",
            f"{at}.caSecretName",
            ("name of a Secret", "got CA"),
            (f"{at}.caSecretName", "CA"),
        ),
        bad(
            kind,
            f"{at}: caSecretName with an http endpoint",
            f"{at}.caSecretName",
            ("caSecretName requires an https:// endpoint", "got http://s3.example.com"),
            (f"{at}.endpoint", "http://s3.example.com"),
        ),
        ok(
            kind,
            f"{at}: http endpoint without caSecretName",
            (f"{at}.endpoint", "http://s3.example.com"),
            (f"{at}.caSecretName", DROP),
        ),
    ]
    return [dataclasses.replace(case, changes=(*base, *case.changes)) for case in cases]


BACKUP_CASES = [
    ok("backup", "every field"),
    *destination_cases("backup", D),
    ok("backup", "clusterName of 63", ("spec.clusterName", "c" * 63)),
    ok("backup", "clusterName starting with a digit", ("spec.clusterName", "1cache")),
    bad("backup", "clusterName required", "spec.clusterName", "Required value", ("spec.clusterName", DROP)),
    bad("backup", "destination required", D, "Required value", (D, DROP)),
    bad("backup", "spec required", "spec", "Required value", ("spec", DROP)),
    *[
        bad(
            "backup",
            f"clusterName {name!r}",
            "spec.clusterName",
            ("name of a ValkeyCluster", f"got {name}"),
            ("spec.clusterName", name),
        )
        for name in ("Cache", "cache.v2", "-cache", "cache_1")
    ],
    bad("backup", "clusterName of 64", "spec.clusterName", "Too long", ("spec.clusterName", "c" * 64)),
]

SCHEDULE = {"schedule": "0 3 * * *", "destination": DESTINATION, "keep": 7}
ARCHIVE_RESTORE = {"pointInTime": "2026-12-06T07:00:00Z", "clusterName": "cache", "destination": DESTINATION}
CRON = "must be a cron expression of 5 fields"
BACKUP_SCHEDULE_CASES = [
    ok("cluster", "a backup schedule", ("spec.backup", SCHEDULE)),
    ok("cluster", "a restore", ("spec.restore", {"backupName": "cache-nightly.1"})),
    ok("cluster", "restore and a schedule", ("spec.restore", {"backupName": "b"}), ("spec.backup", SCHEDULE)),
    *destination_cases("cluster", "spec.backup.destination", ("spec.backup", SCHEDULE)),
    *[
        ok("cluster", f"schedule {cron!r}", ("spec.backup", {**SCHEDULE, "schedule": cron}))
        for cron in ("*/15 * * * *", "0 3 * * 1-5", "30 2 1,15 * *", "0  3 * * SUN")
    ],
    *[
        bad(
            "cluster",
            f"schedule {cron!r}",
            "spec.backup.schedule",
            (CRON, f"got {cron}".rstrip()),  # the server trims the message
            ("spec.backup", {**SCHEDULE, "schedule": cron}),
        )
        for cron in ("0 3 * * * *", "@daily  a b c", " 0 3 * * *", "0 3 * * * ")
    ],
    bad(
        "cluster",
        "schedule of 4 fields",
        "spec.backup.schedule",
        "at least 9 chars",
        ("spec.backup", {**SCHEDULE, "schedule": "0 3 * *"}),
    ),
    bad(
        "cluster",
        "schedule required",
        "spec.backup.schedule",
        "Required value",
        ("spec.backup", without(SCHEDULE, "schedule")),
    ),
    bad(
        "cluster",
        "keep 0",
        "spec.backup.keep",
        "greater than or equal to 1",
        ("spec.backup", {**SCHEDULE, "keep": 0}),
    ),
    bad(
        "cluster",
        "keep 1001",
        "spec.backup.keep",
        "less than or equal to 1000",
        ("spec.backup", {**SCHEDULE, "keep": 1001}),
    ),
    ok("cluster", "keep 1000", ("spec.backup", {**SCHEDULE, "keep": 1000})),
    ok("cluster", "point in time, no retention", ("spec.backup", {**SCHEDULE, "pointInTime": {}})),
    *[
        ok("cluster", f"retention {text}", ("spec.backup", {**SCHEDULE, "pointInTime": {"retention": text}}))
        for text in ("72h", "7d", "9999d")
    ],
    *[
        bad(
            "cluster",
            f"retention {text!r}",
            "spec.backup.pointInTime.retention",
            ("a retention is a whole number of hours or days, for example 72h or 7d", f"got {text}"),
            ("spec.backup", {**SCHEDULE, "pointInTime": {"retention": text}}),
        )
        for text in ("7w", "0d", "1.5d", "d")
    ],
    bad(
        "cluster",
        "keep required",
        "spec.backup.keep",
        "Required value",
        ("spec.backup", without(SCHEDULE, "keep")),
    ),
    bad(
        "cluster",
        "destination required",
        "spec.backup.destination",
        "Required value",
        ("spec.backup", without(SCHEDULE, "destination")),
    ),
    bad(
        "cluster",
        "a restore names a source",
        "spec.restore",
        "a restore names one source",
        ("spec.restore", {}),
    ),
    ok("cluster", "a restore to a second", ("spec.restore", ARCHIVE_RESTORE)),
    bad(
        "cluster",
        "a backup and a second",
        "spec.restore",
        "a restore names one source",
        ("spec.restore", {**ARCHIVE_RESTORE, "backupName": "nightly"}),
    ),
    bad(
        "cluster",
        "a second without its cluster",
        "spec.restore",
        "pointInTime needs clusterName and destination",
        ("spec.restore", without(ARCHIVE_RESTORE, "clusterName")),
    ),
    bad(
        "cluster",
        "a backup with a destination",
        "spec.restore",
        "backupName takes neither",
        ("spec.restore", {"backupName": "nightly", "destination": DESTINATION}),
    ),
    bad(
        "cluster",
        "a second that is not a time",
        "spec.restore.pointInTime",
        "date-time",
        ("spec.restore", {**ARCHIVE_RESTORE, "pointInTime": "yesterday"}),
    ),
    bad(
        "cluster",
        "backupName not a name",
        "spec.restore.backupName",
        ("name of a ValkeyBackup", "got Nightly"),
        ("spec.restore", {"backupName": "Nightly"}),
    ),
]

NP = "spec.networkPolicy"
APP_PEER = {"podSelector": {"matchLabels": {"role": "app"}}}
NETWORK_POLICY_CASES = [
    ok("cluster", "networkPolicy absent", expect={NP: DROP}),
    ok("cluster", "networkPolicy on by default", (NP, {}), expect={f"{NP}.enabled": True}),
    ok("cluster", "networkPolicy off", (NP, {"enabled": False})),
    ok(
        "cluster",
        "networkPolicy peers: empty selectors kept, selectors ANDed, an ipBlock with except",
        (
            NP,
            {
                "clientFrom": [
                    {"podSelector": {}},
                    {"namespaceSelector": {}},
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "apps"}},
                        "podSelector": {
                            "matchExpressions": [
                                {"key": "tier", "operator": "In", "values": ["web", "api"]},
                                {"key": "canary", "operator": "DoesNotExist"},
                            ]
                        },
                    },
                    {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24"]}},
                    {"ipBlock": {"cidr": "2001:db8::/48"}},
                ],
                "metricsFrom": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}],
            },
        ),
    ),
    bad(
        "cluster",
        "networkPolicy peer empty",
        f"{NP}.clientFrom[0]",
        "a peer sets ipBlock alone, or podSelector and/or namespaceSelector",
        (NP, {"clientFrom": [{}]}),
    ),
    bad(
        "cluster",
        "networkPolicy ipBlock with a selector",
        f"{NP}.clientFrom[0]",
        "a peer sets ipBlock alone",
        (NP, {"clientFrom": [{**APP_PEER, "ipBlock": {"cidr": "10.0.0.0/8"}}]}),
    ),
    bad(
        "cluster",
        "networkPolicy In without values",
        f"{NP}.clientFrom[0].podSelector.matchExpressions[0].values",
        "In and NotIn need values",
        (NP, {"clientFrom": [{"podSelector": {"matchExpressions": [{"key": "tier", "operator": "In"}]}}]}),
    ),
    bad(
        "cluster",
        "networkPolicy Exists with values",
        f"{NP}.metricsFrom[0].namespaceSelector.matchExpressions[0].values",
        "Exists and DoesNotExist take none",
        (
            NP,
            {
                "metricsFrom": [
                    {
                        "namespaceSelector": {
                            "matchExpressions": [{"key": "t", "operator": "Exists", "values": ["x"]}]
                        }
                    }
                ]
            },
        ),
    ),
    bad(
        "cluster",
        "networkPolicy operator enum",
        f"{NP}.clientFrom[0].podSelector.matchExpressions[0].operator",
        "Unsupported value",
        (
            NP,
            {
                "clientFrom": [
                    {"podSelector": {"matchExpressions": [{"key": "t", "operator": "Gt", "values": ["1"]}]}}
                ]
            },
        ),
    ),
    bad(
        "cluster",
        "networkPolicy label key",
        f"{NP}.clientFrom[0].podSelector.matchLabels",
        "a label key is [prefix/]name",
        (NP, {"clientFrom": [{"podSelector": {"matchLabels": {"bad key": "x"}}}]}),
    ),
    bad(
        "cluster",
        "networkPolicy label value",
        f"{NP}.clientFrom[0].namespaceSelector.matchLabels",
        "a label value is at most 63",
        (NP, {"clientFrom": [{"namespaceSelector": {"matchLabels": {"team": "not ok"}}}]}),
    ),
    bad(
        "cluster",
        "networkPolicy cidr",
        f"{NP}.clientFrom[0].ipBlock.cidr",
        ("must be a CIDR", "got 10.0.0.0/33"),
        (NP, {"clientFrom": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}),
    ),
    bad(
        "cluster",
        "networkPolicy except outside cidr",
        f"{NP}.clientFrom[0].ipBlock.except",
        "each except range must lie strictly inside cidr",
        (NP, {"clientFrom": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]}}]}),
    ),
    bad(
        "cluster",
        "networkPolicy except equal to cidr",
        f"{NP}.clientFrom[0].ipBlock.except",
        "each except range must lie strictly inside cidr",
        (NP, {"clientFrom": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.0.0/16"]}}]}),
    ),
]


CASES = (
    IMAGE_CASES
    + CONFIG_CASES
    + PERSISTENCE_CASES
    + ROLE_CASES
    + CLUSTER_CASES
    + NETWORK_POLICY_CASES
    + BACKUP_CASES
    + BACKUP_SCHEDULE_CASES
)


def build(case: Case, namespace: str) -> Obj:
    obj = sample(case.kind, namespace)
    for path, value in case.changes:
        obj = put(obj, path, value)
    return obj


def assert_contains(admitted: Any, sent: Any) -> None:
    """Everything sent is in the admitted object (which may add defaults)."""
    if isinstance(sent, dict):
        assert isinstance(admitted, dict), (admitted, sent)
        for key, value in sent.items():
            assert key in admitted, (key, admitted)
            assert_contains(admitted[key], value)
    elif isinstance(sent, list):
        assert isinstance(admitted, list) and len(admitted) == len(sent), (admitted, sent)
        for admitted_item, sent_item in zip(admitted, sent, strict=True):
            assert_contains(admitted_item, sent_item)
    else:
        assert admitted == sent, (admitted, sent)


def lookup(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(obj, list):
            obj = obj[int(part)]
        elif part not in obj:
            return DROP
        else:
            obj = obj[part]
    return obj


@pytest.mark.parametrize("case", [c for c in CASES if c.at is None], ids=lambda c: c.id)
async def test_accepted(api: Client, namespace: str, case: Case) -> None:
    obj = build(case, namespace)
    admitted = await dry_run_create(api, KINDS[case.kind], obj)
    assert admitted["metadata"]["name"] == obj["metadata"]["name"]
    assert_contains(admitted["spec"], obj["spec"])  # nothing we sent was pruned or changed
    for path, value in case.expect:
        assert lookup(admitted, path) == value, (path, admitted)


@pytest.mark.parametrize("case", [c for c in CASES if c.at is not None], ids=lambda c: c.id)
async def test_rejected(api: Client, namespace: str, case: Case) -> None:
    assert case.at is not None
    found = await rejected(api, KINDS[case.kind], build(case, namespace))
    assert_cause(found, case.at, *case.fragments)


@pytest.mark.parametrize("directive", OPERATOR_OWNED_DIRECTIVES)
async def test_operator_owned_directive_rejected(api: Client, namespace: str, directive: str) -> None:
    assert directive not in tunables.TUNABLES
    obj = put(config(f"owned-{namespace}"), "spec.valkey", {"maxmemory": "1gb", directive: "x"})
    assert_cause(await rejected(api, VALKEY_CONFIGS, obj), "spec.valkey", f"not allowed: {directive} (")


@pytest.mark.parametrize(
    "directive", sorted(tunables.RUNTIME_TUNABLES)[:3] + sorted(tunables.STARTUP_TUNABLES)
)
async def test_allowlisted_directive_accepted_in_any_case(
    api: Client, namespace: str, directive: str
) -> None:
    for spelling in (directive, directive.upper(), directive.title()):
        obj = put(config(f"case-{namespace}"), "spec.valkey", {spelling: "1"})
        admitted = await dry_run_create(api, VALKEY_CONFIGS, obj)
        assert admitted["spec"]["valkey"] == {spelling: "1"}


async def test_errors_are_reported_together(api: Client, namespace: str) -> None:
    """One request with several CEL violations names each of them (users fix everything in one go)."""
    obj = put(cluster("cache", namespace), "spec.acl.0.username", "default")
    obj = put(obj, "spec.podAnnotations", {"valkey.gomomento.com/x": "1"})
    obj = put(obj, "spec.acl.0.passwordHashes", ["A" * 64])
    found = await rejected(api, VALKEY_CLUSTERS, obj)
    assert_cause(found, "spec.acl[0].username", "is reserved")
    assert_cause(found, "spec.podAnnotations", "reserved for the operator")
    assert_cause(found, "spec.acl[0].passwordHashes[0]", "uppercase")


async def test_rules_also_apply_on_update(api: Client, namespace: str, created: Any) -> None:
    """A valid object cannot be edited into an invalid one (the rules are not create-only)."""
    name = f"update-{namespace}"
    await created.create(VALKEY_IMAGES, image(name))
    with pytest.raises(ApiError) as error:
        await api.patch(VALKEY_IMAGES, name, {"spec": {"version": "8.1.8"}})
    assert_cause(causes(error.value), "spec.version", FLOOR_MESSAGE, "got 8.1.8")
    patched = await api.patch(VALKEY_IMAGES, name, {"spec": {"version": "9.1.0", "tag": "9.1.0"}})
    assert patched["spec"]["version"] == "9.1.0"


# ---- persistence size: may grow, never shrink (transition rule on the field) --------------------------
async def test_persistence_size_may_grow_but_never_shrink(api: Client, namespace: str, created: Any) -> None:
    """Compared as quantities, whatever the spelling: 20Gi may become 21474836480 (equal) or 25Gi,
    never 19Gi or 20000Mi; the refusal names both sizes and the stored size is unchanged."""
    name = f"grow-{namespace}"
    await created.create(VALKEY_CONFIGS, put(config(name), P, {"mode": "rdb", "size": "20Gi"}))
    for smaller in ("19Gi", "20000Mi", 1024):
        with pytest.raises(ApiError) as error:
            await api.patch(VALKEY_CONFIGS, name, {"spec": {"persistence": {"size": smaller}}})
        assert error.value.status == 422
        assert_cause(causes(error.value), f"{P}.size", "may grow but never shrink", f"got {smaller}")
    assert (await api.get(VALKEY_CONFIGS, name))["spec"]["persistence"]["size"] == "20Gi"
    for larger_or_equal in (21474836480, "25Gi", "25Gi"):
        patched = await api.patch(VALKEY_CONFIGS, name, {"spec": {"persistence": {"size": larger_or_equal}}})
        assert patched["spec"]["persistence"]["size"] == larger_or_equal
    with pytest.raises(ApiError) as error:
        await api.patch(VALKEY_CONFIGS, name, {"spec": {"persistence": {"size": "24Gi"}}})
    assert_cause(causes(error.value), f"{P}.size", "was 25Gi, got 24Gi")
    # Other persistence edits pass: the rule only compares sizes.
    patched = await api.patch(
        VALKEY_CONFIGS, name, {"spec": {"persistence": {"mode": "aof", "appendfsync": "always"}}}
    )
    assert patched["spec"]["persistence"] == {"mode": "aof", "size": "25Gi", "appendfsync": "always"}


# ---- TLS: fixed at creation (transition rule on spec) ------------------------------------------------
async def test_tls_cannot_be_removed(api: Client, namespace: str) -> None:
    await api.create(VALKEY_CLUSTERS, cluster("tls", namespace))
    with pytest.raises(ApiError) as error:
        await api.patch(VALKEY_CLUSTERS, "tls", {"spec": {"tls": None}}, namespace)
    assert error.value.status == 422
    assert_cause(causes(error.value), "spec.tls", "tls cannot be removed after the cluster is created")
    current = await api.get(VALKEY_CLUSTERS, "tls", namespace)
    assert current["spec"]["tls"] == {"secretRef": "cache-tls"}


async def test_tls_cannot_be_added(api: Client, namespace: str) -> None:
    await api.create(VALKEY_CLUSTERS, put(cluster("plain", namespace), "spec.tls", DROP))
    with pytest.raises(ApiError) as error:
        await api.patch(VALKEY_CLUSTERS, "plain", {"spec": {"tls": {"secretRef": "new-tls"}}}, namespace)
    assert error.value.status == 422
    assert_cause(causes(error.value), "spec.tls", "tls cannot be added after the cluster is created")
    assert "tls" not in (await api.get(VALKEY_CLUSTERS, "plain", namespace))["spec"]


async def test_tls_secret_ref_may_change_and_other_edits_pass(api: Client, namespace: str) -> None:
    await api.create(VALKEY_CLUSTERS, cluster("rotate", namespace))
    patched = await api.patch(
        VALKEY_CLUSTERS, "rotate", {"spec": {"tls": {"secretRef": "cache-tls-2"}}}, namespace
    )
    assert patched["spec"]["tls"] == {"secretRef": "cache-tls-2"}
    patched = await api.patch(VALKEY_CLUSTERS, "rotate", {"spec": {"shards": 4}}, namespace)
    assert patched["spec"]["shards"] == 4
    plain = await api.create(VALKEY_CLUSTERS, put(cluster("plain", namespace), "spec.tls", DROP))
    assert "tls" not in plain["spec"]
    patched = await api.patch(VALKEY_CLUSTERS, "plain", {"spec": {"replicasPerShard": 2}}, namespace)
    assert patched["spec"]["replicasPerShard"] == 2


# ---- backups: a ValkeyBackup's spec is fixed; a cluster's restore is set at creation only -------------
async def test_backup_spec_is_immutable_but_its_metadata_and_status_may_change(
    api: Client, namespace: str
) -> None:
    await api.create(VALKEY_BACKUPS, backup("nightly", namespace))
    for change in (
        {"clusterName": "other"},
        {"destination": {"bucket": "elsewhere"}},
        {"destination": {"caSecretName": None}},
    ):
        with pytest.raises(ApiError) as error:
            await api.patch(VALKEY_BACKUPS, "nightly", {"spec": change}, namespace)
        assert error.value.status == 422
        assert_cause(causes(error.value), "spec", "spec is immutable", "create a new ValkeyBackup")
    current = await api.get(VALKEY_BACKUPS, "nightly", namespace)
    assert current["spec"] == backup("nightly", namespace)["spec"]
    patched = await api.patch(VALKEY_BACKUPS, "nightly", {"metadata": {"labels": {"kept": "yes"}}}, namespace)
    assert patched["metadata"]["labels"] == {"kept": "yes"}
    status = {"phase": "Running", "startedAt": "2026-12-01T03:00:00Z"}
    written = await api.patch_status(VALKEY_BACKUPS, "nightly", {"status": status}, namespace)
    assert written["status"] == status
    for bad_status, at, fragment in (
        ({"phase": "Done"}, "status.phase", 'Unsupported value: "Done"'),
        ({"reason": "bad reason"}, "status.reason", "one CamelCase word"),
        ({"shards": [{"index": 0, "sha256": "A" * 64}]}, "status.shards[0].sha256", "64 lowercase hex"),
        ({"shards": [{"index": 0, "sourceRole": "leader"}]}, "status.shards[0].sourceRole", "Unsupported"),
        ({"shards": [{"slots": "0-16383"}]}, "status.shards[0].index", "Required value"),
        ({"totalBytes": -1}, "status.totalBytes", "greater than or equal to 0"),
    ):
        with pytest.raises(ApiError) as error:
            await api.patch_status(VALKEY_BACKUPS, "nightly", {"status": bad_status}, namespace)
        assert error.value.status == 422
        assert_cause(causes(error.value), at, fragment)


async def test_restore_cannot_be_added_to_an_existing_cluster(api: Client, namespace: str) -> None:
    await api.create(VALKEY_CLUSTERS, cluster("plain", namespace))
    with pytest.raises(ApiError) as error:
        await api.patch(VALKEY_CLUSTERS, "plain", {"spec": {"restore": {"backupName": "b"}}}, namespace)
    assert error.value.status == 422
    assert_cause(causes(error.value), "spec.restore", "restore cannot be added to an existing cluster")
    assert "restore" not in (await api.get(VALKEY_CLUSTERS, "plain", namespace))["spec"]


async def test_restore_cannot_be_removed_or_changed(api: Client, namespace: str) -> None:
    restored = put(cluster("restored", namespace), "spec.restore", {"backupName": "nightly-1"})
    await api.create(VALKEY_CLUSTERS, restored)
    with pytest.raises(ApiError) as error:
        await api.patch(VALKEY_CLUSTERS, "restored", {"spec": {"restore": None}}, namespace)
    assert error.value.status == 422
    assert_cause(
        causes(error.value), "spec.restore", "restore cannot be removed after the cluster is created"
    )
    with pytest.raises(ApiError) as error:
        await api.patch(
            VALKEY_CLUSTERS, "restored", {"spec": {"restore": {"backupName": "nightly-2"}}}, namespace
        )
    assert error.value.status == 422
    assert_cause(causes(error.value), "spec.restore", "restore cannot change after the cluster is created")
    current = await api.get(VALKEY_CLUSTERS, "restored", namespace)
    assert current["spec"]["restore"] == {"backupName": "nightly-1"}
    # Every other edit passes: scaling a restored cluster, adding, changing and removing a schedule.
    patched = await api.patch(
        VALKEY_CLUSTERS, "restored", {"spec": {"shards": 5, "backup": SCHEDULE}}, namespace
    )
    assert patched["spec"]["shards"] == 5 and patched["spec"]["backup"]["keep"] == 7
    patched = await api.patch(VALKEY_CLUSTERS, "restored", {"spec": {"backup": {"keep": 3}}}, namespace)
    assert patched["spec"]["backup"]["keep"] == 3
    patched = await api.patch(VALKEY_CLUSTERS, "restored", {"spec": {"backup": None}}, namespace)
    assert "backup" not in patched["spec"] and patched["spec"]["restore"] == {"backupName": "nightly-1"}


# ---- kubectl shows the messages ------------------------------------------------------------------------
IMAGE_YAML = """\
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyImage
metadata:
  name: {name}
spec:
  repository: valkey/valkey
  tag: "{version}"
  version: "{version}"
"""


@pytest.mark.parametrize("version", ["9.0.0", "v9.1.0", "9.0.1-rc1"])
async def test_kubectl_apply_shows_the_version_floor(
    api: Client, kubectl: Any, namespace: str, tmp_path: Path, version: str
) -> None:
    name = f"old-{namespace}"
    manifest = tmp_path / "image.yaml"
    manifest.write_text(IMAGE_YAML.format(name=name, version=version))
    code, out, err = await kubectl("apply", "-f", str(manifest))
    assert code != 0, out
    assert f'The ValkeyImage "{name}" is invalid' in err, err
    assert "spec.version" in err, err
    assert FLOOR_MESSAGE in err, err
    assert f"got {version}" in err, err
    assert await api.get_or_none(VALKEY_IMAGES, name) is None


async def test_kubectl_apply_accepts_a_supported_image(
    api: Client, kubectl: Any, namespace: str, created: Any
) -> None:
    name = f"valkey-9-1-{namespace}"
    created.objects.append((VALKEY_IMAGES, name, None))  # deleted after the test
    code, out, err = await kubectl("apply", "-f", "-", stdin=IMAGE_YAML.format(name=name, version="9.1.0"))
    assert code == 0, err
    assert f"valkeyimage.valkey.gomomento.com/{name} created" in out
    assert (await api.get(VALKEY_IMAGES, name))["spec"]["version"] == "9.1.0"


async def test_kubectl_apply_shows_config_and_cluster_messages(
    api: Client, kubectl: Any, namespace: str
) -> None:
    config_yaml = f"""\
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyConfig
metadata:
  name: bad-{namespace}
spec:
  imageRef: valkey-9-0
  valkey:
    maxmemory: 1gb
    requirepass: hunter2
"""
    code, _, err = await kubectl("apply", "-f", "-", stdin=config_yaml)
    assert code != 0
    assert "spec.valkey" in err and "not allowed: requirepass" in err, err
    cluster_yaml = f"""\
apiVersion: valkey.gomomento.com/v1alpha1
kind: ValkeyCluster
metadata:
  name: cache
  namespace: {namespace}
spec:
  configRef: standard
  podAnnotations:
    valkey.gomomento.com/paused: "true"
"""
    code, _, err = await kubectl("apply", "-f", "-", stdin=cluster_yaml)
    assert code != 0
    assert "valkey.gomomento.com/paused is not allowed" in err, err
    assert await api.get_or_none(VALKEY_CLUSTERS, "cache", namespace) is None
