"""Named indexes on the shared cache: who references whom (SPEC section 2).

Reconcilers ask these, never the API server, whether an object is still
referenced and which objects a change affects.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from valkey_operator.api.resources import (
    VALKEY_BACKUPS,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
)
from valkey_operator.core.informer import NAMESPACE_ALL, SharedInformer
from valkey_operator.core.manager import Manager
from valkey_operator.core.rest import Obj

CONFIGS_BY_IMAGE = "configs-by-imageRef"
CONFIGS_BY_BASE = "configs-by-baseRef"
CLUSTERS_BY_CONFIG = "clusters-by-configRef"
CLUSTERS_BY_ROLE = "clusters-by-roleRef"
CLUSTERS_ROLLING = "clusters-rolling"
CLUSTERS_BY_TLS_SECRET = "clusters-by-tls-secret"
CLUSTERS_BY_PASSWORD_SECRET = "clusters-by-password-secret"
BACKUPS_BY_CLUSTER = "backups-by-valkeycluster"
CLUSTERS_BY_RESTORE = "clusters-by-restore-backup"
ROLLING = "rolling"


def config_image_ref(config: Obj) -> list[str]:
    ref = config.get("spec", {}).get("imageRef")
    return [ref] if ref else []


def config_base_ref(config: Obj) -> list[str]:
    ref = config.get("spec", {}).get("baseRef")
    return [ref] if ref else []


def cluster_config_ref(cluster: Obj) -> list[str]:
    ref = cluster.get("spec", {}).get("configRef")
    return [ref] if ref else []


def cluster_rolling(cluster: Obj) -> list[str]:
    """A cluster whose status shows a rolling update under way (status.rollout)."""
    return [ROLLING] if (cluster.get("status") or {}).get("rollout") else []


def cluster_tls_secret(cluster: Obj) -> list[str]:
    """namespace/name of the Secret spec.tls.secretRef names (in the cluster's namespace)."""
    ref = (cluster.get("spec", {}).get("tls") or {}).get("secretRef")
    return [f"{cluster['metadata'].get('namespace', '')}/{ref}"] if ref else []


def cluster_password_secrets(cluster: Obj) -> list[str]:
    """namespace/name of every Secret a spec.acl user's passwordSecretName names (generated user
    Secrets are owned by the cluster, so their events reach it without an index)."""
    namespace = cluster["metadata"].get("namespace", "")
    names = {
        user["passwordSecretName"]
        for user in cluster.get("spec", {}).get("acl") or []
        if user.get("passwordSecretName")
    }
    return [f"{namespace}/{name}" for name in sorted(names)]


def backup_cluster(backup: Obj) -> list[str]:
    """namespace/name of the cluster a ValkeyBackup reads."""
    cluster = (backup.get("spec") or {}).get("clusterName")
    return [f"{backup['metadata'].get('namespace', '')}/{cluster}"] if cluster else []


def cluster_restore_backup(cluster: Obj) -> list[str]:
    """namespace/name of the ValkeyBackup spec.restore names."""
    backup = ((cluster.get("spec") or {}).get("restore") or {}).get("backupName")
    return [f"{cluster['metadata'].get('namespace', '')}/{backup}"] if backup else []


def cluster_role_refs(cluster: Obj) -> list[str]:
    refs = {
        permission["roleRef"]
        for user in cluster.get("spec", {}).get("acl", [])
        for permission in user.get("permissions", [])
        if permission.get("roleRef")
    }
    return sorted(refs)


@attrs.frozen
class ReferenceIndex:
    """The shared informers of the four kinds, with the reference indexes installed.

    ValkeyClusters are watched in every namespace even when the operator
    reconciles only one, so protection of cluster-scoped objects stays correct.
    """

    images: SharedInformer
    configs: SharedInformer
    roles: SharedInformer
    clusters: SharedInformer
    backups: SharedInformer

    @classmethod
    def install(cls, manager: Manager) -> ReferenceIndex:
        """Install the indexes on the manager's shared informers (once per manager)."""
        configs = manager.informer(VALKEY_CONFIGS)
        clusters = manager.informer(VALKEY_CLUSTERS, namespace=NAMESPACE_ALL)
        configs.add_indexers({CONFIGS_BY_IMAGE: config_image_ref, CONFIGS_BY_BASE: config_base_ref})
        clusters.add_indexers(
            {
                CLUSTERS_BY_CONFIG: cluster_config_ref,
                CLUSTERS_BY_ROLE: cluster_role_refs,
                CLUSTERS_ROLLING: cluster_rolling,
                CLUSTERS_BY_TLS_SECRET: cluster_tls_secret,
                CLUSTERS_BY_PASSWORD_SECRET: cluster_password_secrets,
                CLUSTERS_BY_RESTORE: cluster_restore_backup,
            }
        )
        backups = manager.informer(VALKEY_BACKUPS)
        backups.add_indexers({BACKUPS_BY_CLUSTER: backup_cluster})
        return cls(
            manager.informer(VALKEY_IMAGES), configs, manager.informer(VALKEY_ROLES), clusters, backups
        )

    # -- lookups -------------------------------------------------------------------

    def image(self, name: str) -> Obj | None:
        return self.images.store.get_by_key(name)

    def config(self, name: str) -> Obj | None:
        return self.configs.store.get_by_key(name)

    def role(self, name: str) -> Obj | None:
        return self.roles.store.get_by_key(name)

    def backup(self, namespace: str, name: str) -> Obj | None:
        return self.backups.store.get_by_key(f"{namespace}/{name}")

    def backups_of(self, namespace: str, cluster: str) -> list[Obj]:
        """The ValkeyBackups whose spec.clusterName is cluster, in its namespace."""
        return self.backups.store.by_index(BACKUPS_BY_CLUSTER, f"{namespace}/{cluster}")

    def configs_using_image(self, image: str) -> list[str]:
        return self.configs.store.index_keys(CONFIGS_BY_IMAGE, image)

    def configs_based_on(self, config: str) -> list[str]:
        return self.configs.store.index_keys(CONFIGS_BY_BASE, config)

    def clusters_using_config(self, config: str) -> list[str]:
        """namespace/name keys of the clusters whose spec.configRef is config."""
        return self.clusters.store.index_keys(CLUSTERS_BY_CONFIG, config)

    def clusters_using_role(self, role: str) -> list[str]:
        return self.clusters.store.index_keys(CLUSTERS_BY_ROLE, role)

    def clusters_using_tls_secret(self, namespace: str, secret: str) -> list[str]:
        return self.clusters.store.index_keys(CLUSTERS_BY_TLS_SECRET, f"{namespace}/{secret}")

    def clusters_using_password_secret(self, namespace: str, secret: str) -> list[str]:
        return self.clusters.store.index_keys(CLUSTERS_BY_PASSWORD_SECRET, f"{namespace}/{secret}")

    def clusters_restoring_from(self, namespace: str, backup: str) -> list[str]:
        return self.clusters.store.index_keys(CLUSTERS_BY_RESTORE, f"{namespace}/{backup}")

    def clusters_rolling(self) -> list[str]:
        """namespace/name keys of the clusters whose status shows a rolling update under way."""
        return self.clusters.store.index_keys(CLUSTERS_ROLLING, ROLLING)

    def clusters_through_configs(self, configs: Iterable[str]) -> list[str]:
        """namespace/name keys of every cluster that resolves through any of configs: its configRef is
        one of them or a config whose baseRef chain passes through one (a config edit's fan-out)."""
        names = list(configs)
        every = {*names, *self.descendants(names)}
        return sorted({key for config in every for key in self.clusters_using_config(config)})

    def clusters_through_image(self, image: str) -> list[str]:
        """Every cluster resolving through a config whose imageRef is image (an image edit's fan-out)."""
        return self.clusters_through_configs(self.configs_using_image(image))

    def config_needed(self, name: str) -> bool:
        """Whether config `name` must stay: a cluster names it, or a config whose baseRef chain passes
        through it stays itself (it is not being deleted, or a cluster still names it). A config
        being deleted holds no base of its own, so a deleted baseRef cycle, or a config that is its
        own base, can go."""
        if self.clusters_using_config(name):
            return True
        for descendant in self.descendants([name]):
            found = self.config(descendant) if descendant != name else None
            if found is not None and (
                "deletionTimestamp" not in found["metadata"] or self.clusters_using_config(descendant)
            ):
                return True
        return False

    def ancestors(self, base: str | None) -> list[str]:
        """base and the configs its baseRef chain passes through, in order (cycle-safe): the configs
        whose config_needed may change when a config naming base changes."""
        chain: list[str] = []
        while base and base not in chain:
            chain.append(base)
            found = self.config(base)
            base = (found or {}).get("spec", {}).get("baseRef") or None
        return chain

    def descendants(self, configs: Iterable[str]) -> list[str]:
        """Every config whose baseRef chain passes through any of configs (cycle-safe)."""
        seen: set[str] = set()
        pending = list(configs)
        while pending:
            for child in self.configs_based_on(pending.pop()):
                if child not in seen:
                    seen.add(child)
                    pending.append(child)
        return sorted(seen)
