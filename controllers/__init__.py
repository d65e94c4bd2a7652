"""Reconcilers for ValkeyImage, ValkeyConfig, ValkeyRole, ValkeyCluster and ValkeyBackup."""

from __future__ import annotations

from collections.abc import Mapping

from controllers import backup_schedule, image, role
from controllers.backup import reconciler as backup
from controllers.cluster import reconciler as cluster
from controllers.config import reconciler as config
from controllers.indexes import ReferenceIndex
from controllers.options import ControllerOptions
from controllers.shared.names import MANAGED_BY_LABEL, MANAGER
from valkey_operator.core.controller import Controller
from valkey_operator.core.manager import Manager
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.store import keep_metadata

CACHE_LABEL_SELECTORS = {SECRETS: f"{MANAGED_BY_LABEL}={MANAGER}"}
"""Pass to the Manager: Secrets are cached in full only when the operator owns them; the TLS Secrets
clusters reference are watched metadata-only and read when they change (controllers/cluster/secrets.py)."""
SECRET_METADATA_KEPT = ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences")
"""All the operator reads of a Secret it does not own (ReferencedSecrets: its resourceVersion tells
when to read it again; the key and labels find it; ownerReferences name who controls a Secret of one
of a cluster's names, decision/conflicts.py)."""
CACHE_METADATA_TRANSFORMS = {SECRETS: keep_metadata(SECRET_METADATA_KEPT)}
"""Pass to the Manager: the metadata-only Secret informer keeps SECRET_METADATA_KEPT only. A Secret
applied with client-side `kubectl apply` carries its whole data in the last-applied-configuration
annotation, so keeping annotations would cache every such Secret's values in the cluster."""


def setup_all(manager: Manager, workers: Mapping[str, int], options: ControllerOptions) -> list[Controller]:
    """Install the shared reference index and every reconciler on manager.

    options is required so that every caller (tests included) states the networks it may dial.
    """
    index = ReferenceIndex.install(manager)
    return [
        image.setup(manager, index, workers.get("image", 2)),
        config.setup(manager, index, workers.get("config", 2)),
        role.setup(manager, index, workers.get("role", 2)),
        cluster.setup(manager, index, workers.get("cluster", 2), options),
        backup.setup(manager, workers.get("backup", 2), options),
        backup_schedule.setup(manager, index, 1, options),
    ]
