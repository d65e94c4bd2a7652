"""Which API resource an object belongs to, and the REST paths that reach it."""

from __future__ import annotations

from urllib.parse import quote

import attrs


@attrs.frozen(cache_hash=True)  # hashed on every cache read (the informer's key)
class Resource:
    """An API resource kind: enough to build every path the core requests.

    `group` is "" for the core API (pods, configmaps, ...).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """ "group/version", or just the version for the core group ("v1")."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path; without namespace a namespaced resource is listed across all."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


# Built-in resources the core itself needs (leader election, events) or that
# most operators own.
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
NETWORK_POLICIES = Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False)
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
