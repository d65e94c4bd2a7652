"""Where things live inside a Valkey pod: ports, mount paths, file and key names.

One module so valkey.conf, the pod's volumes and the Secret's keys cannot
drift apart.
"""

from __future__ import annotations

VALKEY_PORT = 6379
"""Clients (plain, or TLS in TLS mode: TLS is TLS-only, SPEC 1.4)."""
CLUSTER_BUS_PORT = VALKEY_PORT + 10000

CONTAINER_NAME = "valkey"

DEFAULT_EXPORTER_IMAGE = "oliver006/redis_exporter:v1.74.0"
"""The operator's default --exporter-image, the metrics sidecar's (render/exporter.py): the release
the test bed builds and the bench measured. Here, not in exporter.py, so that the operator's options
and the render context take it without importing a renderer."""

DATA_DIR = "/data"
"""Valkey's working directory (the root filesystem is read-only).

Persistence none: a disk emptyDir that normally holds nothing (a replica's
re-sync downloads its RDB here and deletes it once loaded: rdb-del-sync-files).
Persistence rdb or aof: the pod's PersistentVolumeClaim, holding the data files
and nodes.conf (PERSISTENT_NODES_FILE) together.
"""
CLUSTER_STATE_DIR = "/var/lib/valkey/cluster"
"""nodes.conf alone, on an emptyDir with medium Memory (tmpfs, a few KiB).

The node's cluster identity (node id, epochs, slot ownership) lives exactly as
long as its dataset, which is only in memory: whatever makes a node start
without its data (a node reboot) also makes it start without its identity, so
it rejoins as a new, empty node instead of an empty primary owning slots
(SPEC 1.4 restart safety; docs/cluster-internals.md "Restart safety").
"""
CONFIG_DIR = "/etc/valkey/config"
"""The ConfigMap (valkey.conf); mounted as a directory so updates reach live pods."""
INTERNAL_DIR = "/etc/valkey/internal"
"""The operator's internal Secret: the startup ACL file and the replication credentials."""
TLS_DIR = "/etc/valkey/tls"
"""The user's kubernetes.io/tls Secret (TLS mode only)."""

CONFIG_KEY = "valkey.conf"
ACL_KEY = "users.acl"
REPLICATION_AUTH_KEY = "replication.conf"
"""valkey.conf includes this file: primaryuser/primaryauth, kept out of the ConfigMap."""
ADMIN_PASSWORD_KEY = "admin-password"
REPLICATION_PASSWORD_KEY = "replication-password"

TLS_CERT_KEY = "tls.crt"
TLS_KEY_KEY = "tls.key"
TLS_CA_KEY = "ca.crt"

CONFIG_FILE = f"{CONFIG_DIR}/{CONFIG_KEY}"
ACL_FILE = f"{INTERNAL_DIR}/{ACL_KEY}"
REPLICATION_AUTH_FILE = f"{INTERNAL_DIR}/{REPLICATION_AUTH_KEY}"
NODES_FILE = f"{CLUSTER_STATE_DIR}/nodes.conf"
"""nodes.conf of a cache (persistence none): on tmpfs, dies with the in-memory data."""
PERSISTENT_NODES_FILE = f"{DATA_DIR}/nodes.conf"
"""nodes.conf with persistence rdb or aof: on the claim, beside the data it describes."""
TLS_CERT_FILE = f"{TLS_DIR}/{TLS_CERT_KEY}"
TLS_KEY_FILE = f"{TLS_DIR}/{TLS_KEY_KEY}"
TLS_CA_FILE = f"{TLS_DIR}/{TLS_CA_KEY}"
