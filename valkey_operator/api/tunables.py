"""The valkey.conf directives a ValkeyConfig may set (SPEC 1.2), matched case-insensitively.

Everything else (ports, bind, TLS, persistence files, users and auth,
replication wiring, modules, renamed commands, cluster wiring) is the
operator's and is rejected at admission. The CRD's CEL rule carries this same
list; a test keeps them equal.
"""

from __future__ import annotations

# Directives Valkey accepts with CONFIG SET at runtime, so a change is applied
# in place instead of rolling pods.
RUNTIME_TUNABLES: frozenset[str] = frozenset(
    {
        # memory and eviction
        "maxmemory",
        "maxmemory-policy",
        "maxmemory-samples",
        "maxmemory-eviction-tenacity",
        "maxmemory-clients",
        # lazy freeing
        "lazyfree-lazy-eviction",
        "lazyfree-lazy-expire",
        "lazyfree-lazy-server-del",
        "lazyfree-lazy-user-del",
        "lazyfree-lazy-user-flush",
        "replica-lazy-flush",
        # timeouts and keepalive
        "timeout",
        "tcp-keepalive",
        "busy-reply-threshold",
        # slow log and latency
        "slowlog-log-slower-than",
        "slowlog-max-len",
        "latency-monitor-threshold",
        "latency-tracking",
        "latency-tracking-info-percentiles",
        # encoding thresholds
        "hash-max-listpack-entries",
        "hash-max-listpack-value",
        "list-max-listpack-size",
        "list-compress-depth",
        "set-max-intset-entries",
        "set-max-listpack-entries",
        "set-max-listpack-value",
        "zset-max-listpack-entries",
        "zset-max-listpack-value",
        "hll-sparse-max-bytes",
        "stream-node-max-bytes",
        "stream-node-max-entries",
        # active defragmentation and rehashing
        "activedefrag",
        "active-defrag-ignore-bytes",
        "active-defrag-threshold-lower",
        "active-defrag-threshold-upper",
        "active-defrag-cycle-min",
        "active-defrag-cycle-max",
        "active-defrag-max-scan-fields",
        "activerehashing",
        "hz",
        "dynamic-hz",
        # keyspace notifications and clients
        "notify-keyspace-events",
        "maxclients",
        # cluster behaviour users legitimately choose
        "cluster-require-full-coverage",
        "cluster-allow-reads-when-down",
        "cluster-allow-pubsubshard-when-down",
        "cluster-node-timeout",
    }
)

# Directives only read at start-up: a change rolls the cluster's pods.
STARTUP_TUNABLES: frozenset[str] = frozenset({"io-threads"})

TUNABLES: frozenset[str] = RUNTIME_TUNABLES | STARTUP_TUNABLES


def is_tunable(directive: str) -> bool:
    return directive.lower() in TUNABLES
