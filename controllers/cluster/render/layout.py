"""Where things live inside a Valkey pod: ports, mount paths, file and key names.

One module so valkey.conf, the pod's volumes and the Secret's keys cannot
drift apart.
"""

from __future__ import annotations

VALKEY_PORT = 6379
"""Clients (plain, or TLS in TLS mode: TLS is TLS-only, SPEC 1.4)."""
CLUSTER_BUS_PORT = VALKEY_PORT + 10000

CONTAINER_NAME = "valkey"

DATA_DIR = "/data"
"""An emptyDir: nodes.conf and any replication scratch. Nothing here outlives the pod."""
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
NODES_FILE = f"{DATA_DIR}/nodes.conf"
TLS_CERT_FILE = f"{TLS_DIR}/{TLS_CERT_KEY}"
TLS_KEY_FILE = f"{TLS_DIR}/{TLS_KEY_KEY}"
TLS_CA_FILE = f"{TLS_DIR}/{TLS_CA_KEY}"
