"""valkey.conf (pure): the directives the operator owns, then the tunables of the resolved config.

Operator-owned directives are fixed; the only inputs are TLS on/off and the
resolved config. `bind` and `cluster-announce-ip` are not in the file: the
file is shared by every pod through one ConfigMap and cannot read the
environment, so the pod passes `--bind $(POD_IP) --cluster-announce-ip
$(POD_IP)` on the command line, expanded by the kubelet (see pods.py).

Restart safety (SPEC 1.4): nodes.conf lives wherever the data does, so a node
never starts with its identity but without its data, nor with stale data but
without its identity (docs/cluster-internals.md "Restart safety"). Persistence
none (a cache): nodes.conf on a tmpfs emptyDir of its own and no replication
RDB kept in `dir`. Persistence rdb or aof (SPEC 1.6): `dir` and nodes.conf both
on the pod's claim, mounted at /data (`persistence_directives`).

Settings split in two (SPEC 1.2). Runtime tunables (valkey_operator.api.tunables.
RUNTIME_TUNABLES) are not in the file at all: the planner CONFIG SETs them on
every node, a new one before it joins, so a change never needs new pods and a
value Valkey refuses is reported instead of stopping every new server at start.
Startup-only tunables are in the file; a change of them is a new pod template
(template.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from controllers.shared import layout
from controllers.shared.config_resolve import ResolvedConfig
from controllers.shared.persistence import NONE, Persistence
from valkey_operator.api.config import PersistenceMode
from valkey_operator.api.quantity import quantity_bytes
from valkey_operator.api.tunables import RUNTIME_TUNABLES, TLS_AUTH_CLIENTS, TLS_AUTH_CLIENTS_USER, is_tunable

DEFAULT_CLUSTER_NODE_TIMEOUT_MS = 15000
DEFAULT_MAXMEMORY_POLICY = "allkeys-lru"
"""SPEC 1.2 wants a full cache to evict; Valkey's own default (noeviction) would refuse writes instead."""
MAXMEMORY_FRACTION = (3, 4)
"""maxmemory = 75% of the memory limit: headroom for replication buffers, fork copy-on-write, clients."""
SHUTDOWN_TIMEOUT_S = 10
"""How long a shutting-down primary waits for replicas to catch up (Valkey's default, stated)."""
RDB_SAVE_POINTS = "3600 1 300 100 60 10000"
"""Valkey's default save points (after 1 hour and 1 change, 5 minutes and 100, 1 minute and 10000).
One argument: Valkey splits a multi-argument directive's single value on spaces."""

_BARE = re.compile(r"[A-Za-z0-9_.,:/@%+=*-]+")


def quote(value: str) -> str:
    """One valkey.conf argument: bare when safe, else double-quoted with sdssplitargs escapes."""
    if _BARE.fullmatch(value):
        return value
    escaped = []
    for char in value:
        if char in '"\\':
            escaped.append("\\" + char)
        elif char.isprintable() or ord(char) > 127:
            escaped.append(char)
        else:
            escaped.append("".join(f"\\x{byte:02x}" for byte in char.encode()))
    return '"' + "".join(escaped) + '"'


def default_maxmemory(config: ResolvedConfig) -> int | None:
    """About 75% of the memory limit in bytes (limits.memory, else the memory request: SPEC 1.9);
    None without either (SPEC 1.2)."""
    memory = config.memory_limit
    if memory is None:
        return None
    return maxmemory_of(quantity_bytes(memory))


def maxmemory_of(memory_limit: int) -> int:
    """The maxmemory the operator derives from a memory limit in bytes (MAXMEMORY_FRACTION)."""
    numerator, denominator = MAXMEMORY_FRACTION
    return memory_limit * numerator // denominator


def maxmemory_derived(config: ResolvedConfig) -> bool:
    """maxmemory follows the memory limit: the chain does not set it, and a limit exists. Then each
    node's value follows the limit its own pod runs with (an in-place resize changes it)."""
    if config.memory_limit is None:
        return False
    return not any(key.lower() == "maxmemory" for key in config.valkey)


def tunables(config: ResolvedConfig) -> dict[str, str]:
    """Every tunable the node runs with: operator defaults overridden by the config chain, by name."""
    settings: dict[str, str] = {
        "cluster-node-timeout": str(DEFAULT_CLUSTER_NODE_TIMEOUT_MS),
        "maxmemory-policy": DEFAULT_MAXMEMORY_POLICY,
    }
    maxmemory = default_maxmemory(config)
    if maxmemory is not None:
        settings["maxmemory"] = str(maxmemory)
    # Only allowlisted names: admission already rejects the rest, and a config that slipped past it
    # (an older CRD, a direct etcd write) must still never override an operator-owned directive.
    settings.update({key.lower(): str(value) for key, value in config.valkey.items() if is_tunable(key)})
    return dict(sorted(settings.items()))


def runtime_settings(config: ResolvedConfig) -> dict[str, str]:
    """The runtime tunables a node runs with: the planner compares them with CONFIG GET and sets
    what differs; a runtime tunable not listed runs at Valkey's default (tunables.desired_runtime)."""
    return {key: value for key, value in tunables(config).items() if key in RUNTIME_TUNABLES}


def startup_settings(config: ResolvedConfig) -> dict[str, str]:
    """The config's tunables Valkey only reads at start: a change rolls the pods."""
    return {key: value for key, value in tunables(config).items() if key not in RUNTIME_TUNABLES}


def persistence_directives(persistence: Persistence) -> list[tuple[str, str]]:
    """Where the identity and the data live, and what is written to disk (in file order).

    none: nothing is persisted, nodes.conf on tmpfs; nothing in `dir` may outlive the data either:
    Valkey loads dir/dump.rdb at start even with persistence off, and a replica's full sync leaves
    one there by default. An empty replica (every new one) loads straight from the socket; a re-sync
    that keeps the old data while it downloads goes through disk, and the file is deleted once loaded.

    rdb and aof: nodes.conf beside the data on the claim. rdb loads a full sync through disk
    (`repl-diskless-load disabled`): the synced RDB becomes the replica's dump.rdb at once, where a
    socket load would leave it without one until its next save point (up to an hour). aof keeps
    loading an empty replica from the socket: Valkey rewrites the AOF right after the sync, and an
    RDB on disk would never be read with appendonly yes. rdb-del-sync-files is left out: Valkey
    only acts on it with persistence off, and with persistence on the synced RDB is the data.
    aof takes no save points: at start Valkey reads the AOF (its base has an RDB preamble,
    aof-use-rdb-preamble's default) and never dump.rdb, so snapshots would only cost forks.
    """
    if persistence.mode is PersistenceMode.NONE:
        return [
            # On a tmpfs emptyDir: the identity dies with the in-memory data (layout.CLUSTER_STATE_DIR).
            ("cluster-config-file", layout.NODES_FILE),
            ("cluster-allow-replica-migration", "no"),
            ("dir", layout.DATA_DIR),
            ("save", ""),
            ("appendonly", "no"),
            ("repl-diskless-load", "on-empty-db"),
            ("rdb-del-sync-files", "yes"),
        ]
    on_claim = [
        ("cluster-config-file", layout.PERSISTENT_NODES_FILE),
        ("cluster-allow-replica-migration", "no"),
        ("dir", layout.DATA_DIR),
    ]
    if persistence.mode is PersistenceMode.RDB:
        return [
            *on_claim,
            ("save", RDB_SAVE_POINTS),
            ("appendonly", "no"),
            ("repl-diskless-load", "disabled"),
        ]
    return [
        *on_claim,
        ("save", ""),
        ("appendonly", "yes"),
        ("appendfsync", str(persistence.appendfsync)),
        ("repl-diskless-load", "on-empty-db"),
    ]


def client_auth_directives(required: bool) -> dict[str, str]:
    """How a TLS node treats client certificates (spec.tls.clientAuth), as CONFIG GET prints it:
    written into the file for new pods and CONFIG SET on live nodes (View.runtime_changes)."""
    if required:
        return {TLS_AUTH_CLIENTS: "yes", TLS_AUTH_CLIENTS_USER: "CN"}
    return {TLS_AUTH_CLIENTS: "optional", TLS_AUTH_CLIENTS_USER: "off"}


def owned_directives(
    tls: bool, persistence: Persistence = NONE, client_certificates: bool = False
) -> list[tuple[str, str]]:
    """The directives the operator owns, in file order (admission rejects them in a ValkeyConfig)."""
    if tls:
        network = [
            ("port", "0"),
            ("tls-port", str(layout.VALKEY_PORT)),
            ("tls-cert-file", layout.TLS_CERT_FILE),
            ("tls-key-file", layout.TLS_KEY_FILE),
            ("tls-ca-cert-file", layout.TLS_CA_FILE),
            *client_auth_directives(client_certificates).items(),
            ("tls-replication", "yes"),
            ("tls-cluster", "yes"),
        ]
    else:
        network = [("port", str(layout.VALKEY_PORT))]
    return [
        *network,
        ("cluster-port", str(layout.CLUSTER_BUS_PORT)),
        ("cluster-enabled", "yes"),
        *persistence_directives(persistence),
        ("aclfile", layout.ACL_FILE),
        ("acl-pubsub-default", "resetchannels"),
        ("include", layout.REPLICATION_AUTH_FILE),
        ("shutdown-on-sigterm", "failover"),
        ("shutdown-timeout", str(SHUTDOWN_TIMEOUT_S)),
    ]


def _lines(directives: list[tuple[str, str]] | Mapping[str, str]) -> list[str]:
    items = directives.items() if isinstance(directives, Mapping) else directives
    return [f"{key} {quote(value)}" for key, value in items]


def render_valkey_conf(
    config: ResolvedConfig,
    *,
    tls: bool,
    client_certificates: bool = False,
    archived: tuple[str, str] | None = None,
) -> str:
    """The whole file; deterministic (tunables sorted by name), so its hash is stable. `archived`:
    the directive the archiver needs (render/archiver.py TIMESTAMPS) when the pods carry it."""
    lines = [
        "# Rendered by valkey-operator; edits are overwritten.",
        "# bind and cluster-announce-ip are passed on the command line ($(POD_IP)).",
        "# Owned by the operator:",
        *_lines(owned_directives(tls, config.persistence, client_certificates)),
        *(_lines([archived]) if archived else []),
        "# Startup-only tunables (operator defaults, overridden by the ValkeyConfig chain);",
        "# runtime tunables are applied by the operator with CONFIG SET:",
        *_lines(startup_settings(config)),
    ]
    return "\n".join(lines) + "\n"


def replication_auth_conf(username: str, password: str) -> str:
    """Included by valkey.conf from the Secret: replicas and atomic slot migration authenticate with it."""
    return f"primaryuser {quote(username)}\nprimaryauth {quote(password)}\n"
