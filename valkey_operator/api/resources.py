"""Names of the API: group, kinds, finalizers, annotations, reserved users."""

from __future__ import annotations

from valkey_operator.core.resource import Resource

GROUP = "valkey.gomomento.com"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

VALKEY_IMAGES = Resource(GROUP, VERSION, "valkeyimages", "ValkeyImage", namespaced=False)
VALKEY_CONFIGS = Resource(GROUP, VERSION, "valkeyconfigs", "ValkeyConfig", namespaced=False)
VALKEY_ROLES = Resource(GROUP, VERSION, "valkeyroles", "ValkeyRole", namespaced=False)
VALKEY_CLUSTERS = Resource(GROUP, VERSION, "valkeyclusters", "ValkeyCluster", namespaced=True)
VALKEY_BACKUPS = Resource(GROUP, VERSION, "valkeybackups", "ValkeyBackup", namespaced=True)

IMAGE_PROTECTION_FINALIZER = f"{GROUP}/image-protection"
CONFIG_PROTECTION_FINALIZER = f"{GROUP}/config-protection"
ROLE_PROTECTION_FINALIZER = f"{GROUP}/role-protection"

PAUSED_ANNOTATION = f"{GROUP}/paused"
SWITCHOVER_ANNOTATION = f"{GROUP}/switchover"
"""On a ValkeyCluster: `<shard>[/<pod>][@<token>]`, a coordinated switchover of that shard's primary,
handled once per distinct value (status.switchover records the last one)."""
RESTARTED_AT_ANNOTATION = f"{GROUP}/restartedAt"
"""On a ValkeyCluster: any string (kubectl-valkey writes RFC 3339 UTC); a new value rolls every pod, as
`kubectl rollout restart` does with the same annotation on a pod template."""
RESERVED_ANNOTATION_PREFIX = f"{GROUP}/"

# Valkey ACL users the operator owns; users may not declare these names.
ADMIN_USER = "valkey-operator"
REPLICATION_USER = "valkey-replication"
EXPORTER_USER = "valkey-exporter"
"""The metrics sidecar's read-only Valkey user (spec.metrics.exporter)."""
RESERVED_USERNAMES = ("default", ADMIN_USER, REPLICATION_USER, EXPORTER_USER)

INTERNAL_SECRET_SUFFIX = "internal"
"""The operator's own Secret is `<cluster>-internal`; a generated user Secret `<cluster>-<user>` must
not take that name, so a user with a generated password may not be called this."""
CLIENT_SERVICE_SUFFIX = "client"
"""The client Service is `<cluster>-client` and the peer Service `<cluster>`: a cluster named
`<x>-client` would have the peer Service of cluster `<x>`'s client Service, so no cluster name ends
with `-client` (docs/reference/valkeycluster.md, "Reserved names")."""
GENERATED_USERNAME = r"^[a-z0-9]+(\.[a-z0-9]+)*$"
"""A user with a generated password: its Secret `<cluster>-<user>` must name one user of one
cluster. Without '-' in the username, the last '-' of the Secret's name splits it back into the
cluster and the user, so cluster `a`'s user `b-x` and cluster `a-b`'s user `x` (both `a-b-x`), or
cluster `a`'s user `b-internal` and cluster `a-b`'s internal Secret, cannot be written."""

# The oldest Valkey release the operator runs (SPEC 1.1): atomic slot migration et al.
VERSION_FLOOR = (9, 0, 1)
VERSION_FLOOR_TEXT = ".".join(map(str, VERSION_FLOOR))

MAX_BASE_CHAIN_DEPTH = 8
