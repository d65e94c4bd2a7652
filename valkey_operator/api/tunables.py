"""The valkey.conf directives a ValkeyConfig may set (SPEC 1.2): one table, matched case-insensitively.

Everything else (ports, bind, TLS, persistence files, users and auth,
replication wiring, modules, renamed commands, cluster wiring) is the
operator's and is rejected at admission. The CRD's CEL rule carries this same
list; a test keeps them equal.

Per directive the table says whether Valkey accepts it at runtime (CONFIG SET,
no restart) or only at start, how Valkey reads and prints its value
(tunable_values), and its default: what `CONFIG GET` prints on a server
started without it, which is what a node returns to when the directive leaves
the config chain (a CONFIG SET of the default). Valkey 9.0 and 9.1 print the
same default for every directive here and accept the same ranges; they differ
only in how a few out-of-the-way numbers parse (tunable_values.Dialect).
tests/integration/api/test_tunables_server.py checks all of it against real
9.0 and 9.1 servers.

`maxclients` is the one default a node may not report: at start Valkey lowers
it to what the process's open-files limit allows (the hard limit minus 32
reserved descriptors) when that is below 10000, and at runtime it refuses a
value above that ("The operating system is not able to handle the specified
number of clients, try with N"). With the usual container limits (far above
10032) the default holds.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from valkey_operator.api.tunable_values import (
    INT_MAX,
    INT_MIN,
    LLONG_MAX,
    LONG_MAX,
    SSIZE_MAX,
    UINT_MAX,
    ULLONG_MAX,
    Boolean,
    Enum,
    Integer,
    KeyspaceEvents,
    Memory,
    Percentiles,
    ValueType,
    dialect_for,
)

Version = tuple[int, ...]
"""MAJOR, MINOR[, PATCH] of the node's Valkey release."""


@attrs.frozen
class Tunable:
    """One allowlisted directive: how it applies, how Valkey reads its value, and its default."""

    name: str
    runtime: bool
    value: ValueType
    default: str
    """What CONFIG GET prints on a server (9.0 or 9.1) started without the directive."""

    def canonical(self, value: str, version: Version | None = None) -> str | None:
        """What CONFIG GET prints after CONFIG SET of value on that release, or None if refused."""
        return self.value.canonical(value, dialect_for(version))


_BOOL = Boolean()
_MEMORY_POLICIES = (
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
)


def _t(name: str, value: ValueType, default: str, *, runtime: bool = True) -> Tunable:
    return Tunable(name=name, runtime=runtime, value=value, default=default)


# Grouped as the reference page lists them: memory and eviction, lazy freeing, timeouts, slow log
# and latency, encodings, defragmentation and rehashing, notifications and clients, cluster, threads.
TABLE: tuple[Tunable, ...] = (
    _t("maxmemory", Memory(0, ULLONG_MAX), "0"),
    _t("maxmemory-policy", Enum(_MEMORY_POLICIES), "noeviction"),
    _t("maxmemory-samples", Integer(1, 64), "5"),
    _t("maxmemory-eviction-tenacity", Integer(0, 100), "10"),
    _t("maxmemory-clients", Memory(0, SSIZE_MAX, percent=True, signed=True), "0"),
    _t("lazyfree-lazy-eviction", _BOOL, "yes"),
    _t("lazyfree-lazy-expire", _BOOL, "yes"),
    _t("lazyfree-lazy-server-del", _BOOL, "yes"),
    _t("lazyfree-lazy-user-del", _BOOL, "yes"),
    _t("lazyfree-lazy-user-flush", _BOOL, "yes"),
    _t("replica-lazy-flush", _BOOL, "yes"),
    _t("timeout", Integer(0, INT_MAX), "0"),
    _t("tcp-keepalive", Integer(0, INT_MAX), "300"),
    _t("busy-reply-threshold", Integer(0, LONG_MAX), "5000"),
    _t("slowlog-log-slower-than", Integer(-1, LLONG_MAX), "10000"),
    _t("slowlog-max-len", Integer(0, LONG_MAX, unsigned=True), "128"),
    _t("latency-monitor-threshold", Integer(0, LLONG_MAX), "0"),
    _t("latency-tracking", _BOOL, "yes"),
    _t("latency-tracking-info-percentiles", Percentiles(), "50 99 99.9"),
    _t("hash-max-listpack-entries", Integer(0, LONG_MAX, unsigned=True), "512"),
    _t("hash-max-listpack-value", Memory(0, LONG_MAX), "64"),
    _t("list-max-listpack-size", Integer(INT_MIN, INT_MAX), "-2"),
    _t("list-compress-depth", Integer(0, INT_MAX), "0"),
    _t("set-max-intset-entries", Integer(0, LONG_MAX, unsigned=True), "512"),
    _t("set-max-listpack-entries", Integer(0, LONG_MAX, unsigned=True), "128"),
    _t("set-max-listpack-value", Integer(0, LONG_MAX, unsigned=True), "64"),
    _t("zset-max-listpack-entries", Integer(0, LONG_MAX, unsigned=True), "128"),
    _t("zset-max-listpack-value", Memory(0, LONG_MAX), "64"),
    _t("hll-sparse-max-bytes", Memory(0, LONG_MAX), "3000"),
    _t("stream-node-max-bytes", Memory(0, LONG_MAX), "4096"),
    _t("stream-node-max-entries", Integer(0, LLONG_MAX), "100"),
    _t("activedefrag", _BOOL, "no"),
    _t("active-defrag-ignore-bytes", Memory(1, LLONG_MAX), "104857600"),
    _t("active-defrag-threshold-lower", Integer(0, 1000), "10"),
    _t("active-defrag-threshold-upper", Integer(0, 1000), "100"),
    _t("active-defrag-cycle-min", Integer(1, 99), "1"),
    _t("active-defrag-cycle-max", Integer(1, 99), "25"),
    _t("active-defrag-max-scan-fields", Integer(1, LONG_MAX, unsigned=True), "1000"),
    _t("activerehashing", _BOOL, "yes"),
    _t("hz", Integer(0, INT_MAX, clamp=(1, 500)), "10"),
    _t("notify-keyspace-events", KeyspaceEvents(), ""),
    _t("maxclients", Integer(1, UINT_MAX, unsigned=True), "10000"),
    _t("cluster-require-full-coverage", _BOOL, "yes"),
    _t("cluster-allow-reads-when-down", _BOOL, "no"),
    _t("cluster-allow-pubsubshard-when-down", _BOOL, "yes"),
    _t("cluster-node-timeout", Integer(0, LLONG_MAX), "15000"),
    _t("io-threads", Integer(1, 256), "1"),
)

BY_NAME: Mapping[str, Tunable] = {tunable.name: tunable for tunable in TABLE}

# Directives Valkey accepts with CONFIG SET at runtime: a change is applied in place.
RUNTIME_TUNABLES: frozenset[str] = frozenset(t.name for t in TABLE if t.runtime)

# Directives only read at start-up (none on 9.0 and 9.1): a change reaches pods created afterwards.
STARTUP_TUNABLES: frozenset[str] = frozenset(t.name for t in TABLE if not t.runtime)

TUNABLES: frozenset[str] = RUNTIME_TUNABLES | STARTUP_TUNABLES

RUNTIME_NAMES: tuple[str, ...] = tuple(sorted(RUNTIME_TUNABLES))
"""Every runtime directive, sorted: the user-settable part of the probe's CONFIG GET (PROBED_NAMES)."""

OPERATOR_RUNTIME: Mapping[str, str] = {"repl-diskless-sync-delay": "5"}
"""Runtime directives no ValkeyConfig may set, which the operator itself changes for a moment and
keeps at this value (as CONFIG GET prints it) otherwise.

`repl-diskless-sync-delay`: Valkey's default, 5 s. A primary waits that long before it forks for
a diskless full sync, so that replicas arriving together share one snapshot. A backup's RDB
stream wants no wait: it sets the delay to 0 on its source just before its SYNC and back to this
value as soon as the node answers (rdb_stream.py). Should that second step not happen (the
operator stopped in between, the connection broke), the cluster's next pass without a Running
backup sets it back like any runtime setting (View.runtime_changes)."""

SYNC_MAX_REPLICAS = "repl-diskless-sync-max-replicas"
"""Runtime directive the operator sets to the cluster's replicas per shard (operator_runtime)."""


def operator_runtime(replicas_per_shard: int) -> dict[str, str]:
    """Every runtime directive the operator owns, with the value a node of a cluster with
    `replicas_per_shard` replicas per shard should run.

    `repl-diskless-sync-max-replicas` at replicas_per_shard: a primary starts a full sync as soon
    as that many replicas wait for one, not after the 5 s delay. A shard's replicas are attached
    in one pass (a bootstrap, a new shard), and a one-replica shard's replacement is alone anyway:
    none of them waits the delay, and replicas that ask together still share one snapshot. A
    single replacement in a shard of two replicas still waits it (one of two is not "all")."""
    return {**OPERATOR_RUNTIME, SYNC_MAX_REPLICAS: str(replicas_per_shard)}


ANNOUNCE_HOSTNAME = "cluster-announce-hostname"
ANNOUNCE_CLIENT_PORT = "cluster-announce-client-port"
ANNOUNCE_CLIENT_TLS_PORT = "cluster-announce-client-tls-port"
PREFERRED_ENDPOINT = "cluster-preferred-endpoint-type"
ANNOUNCE_NAMES: tuple[str, ...] = (
    ANNOUNCE_CLIENT_PORT,
    ANNOUNCE_CLIENT_TLS_PORT,
    ANNOUNCE_HOSTNAME,
    PREFERRED_ENDPOINT,
)
"""Runtime directives no ValkeyConfig may set, which the operator sets per node: the address a node
announces to clients (spec.externalAccess; controllers/cluster/decision/external.py)."""

TLS_AUTH_CLIENTS = "tls-auth-clients"
TLS_AUTH_CLIENTS_USER = "tls-auth-clients-user"
CLIENT_AUTH_NAMES: tuple[str, ...] = (TLS_AUTH_CLIENTS, TLS_AUTH_CLIENTS_USER)
"""Runtime directives the operator sets on every node of a TLS cluster from spec.tls.clientAuth
(controllers/cluster/render/config.py client_auth_directives)."""

PROBED_NAMES: tuple[str, ...] = (
    RUNTIME_NAMES + tuple(sorted(operator_runtime(0))) + ANNOUNCE_NAMES + CLIENT_AUTH_NAMES
)
"""The arguments of the one CONFIG GET that reads a node's runtime values (the observer's probe)."""


def is_tunable(directive: str) -> bool:
    return directive.lower() in TUNABLES


def canonical(directive: str, value: str, version: Version | None = None) -> str | None:
    """What CONFIG GET prints after CONFIG SET of value, or None when Valkey refuses it.

    The directive is matched case-insensitively (an unknown one raises KeyError); version is
    the node's release, None for the newest. A value refused only by a live node's state (see
    the module docstring and tunable_values) still has a canonical form.
    """
    return BY_NAME[directive.lower()].canonical(value, version)


@attrs.frozen
class DesiredRuntime:
    """What every runtime directive of a node should read, as CONFIG GET prints it.

    `values` holds every runtime directive: the given ones canonicalised, the rest at their
    default. A given value Valkey would refuse is in `invalid` (as written)
    instead: it has no canonical form, so there is nothing to compare the node's value with.
    """

    values: Mapping[str, str]
    invalid: Mapping[str, str]


def desired_runtime(settings: Mapping[str, str], version: Version | None = None) -> DesiredRuntime:
    """The full desired runtime map for a node of `version` running `settings` (name -> value).

    `settings` is what the node should run (operator defaults and the config chain, as
    rendered); names are matched case-insensitively; startup-only and unknown names are ignored.
    Compare `values` with one `CONFIG GET` of RUNTIME_NAMES; each difference is a CONFIG SET.
    """
    given = {name.lower(): value for name, value in settings.items()}
    values: dict[str, str] = {}
    invalid: dict[str, str] = {}
    for name in RUNTIME_NAMES:
        tunable = BY_NAME[name]
        if name not in given:
            values[name] = tunable.default
            continue
        printed = tunable.canonical(given[name], version)
        if printed is None:
            invalid[name] = given[name]
        else:
            values[name] = printed
    return DesiredRuntime(values=values, invalid=invalid)
