"""What the operator's configuration (flags and the `valkey-operator-config` ConfigMap) tells the
reconcilers (SPEC 1.5). Validated before anything starts; the reconcilers only read it."""

from __future__ import annotations

import ipaddress

import attrs

from controllers.shared.layout import DEFAULT_EXPORTER_IMAGE
from valkey_operator.api.cluster import ZoneSpread
from valkey_operator.objectstore import REFUSE_LOCAL, EndpointPolicy
from valkey_operator.valkey.admin import Network

ANY_NETWORK: tuple[Network, ...] = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))


@attrs.frozen(kw_only=True)
class ControllerOptions:
    default_zone_spread: ZoneSpread = ZoneSpread.BEST_EFFORT
    """Placement's zoneSpread for clusters that set none (ConfigMap key defaultZoneSpread)."""
    max_concurrent_rollouts: int = 0
    """How many clusters may roll at once (ConfigMap key maxConcurrentRollouts; 0: no limit)."""
    node_networks: tuple[Network, ...] = ANY_NETWORK
    """The networks the operator may dial Valkey nodes in (--node-networks)."""
    backup_endpoints: EndpointPolicy = REFUSE_LOCAL
    """Where backup endpoints may be (--backup-endpoint-allowed-networks): never loopback nor
    link-local, except within the networks that flag allows (objectstore/endpoints.py)."""
    cluster_domain: str = "cluster.local"
    """The cluster's DNS domain, for status.endpoint (--cluster-domain)."""
    secret_sync_seconds: float = 120.0
    """How long the kubelet may take to update a pod's mounted Secret files after the Secret changes
    (ConfigMap key secretSyncSeconds; a kubelet's default sync period plus cache TTL is 2 minutes)."""
    exporter_image: str = DEFAULT_EXPORTER_IMAGE
    """The metrics sidecar's image (--exporter-image), for clusters with spec.metrics.exporter.enabled."""
    operator_image: str = ""
    """The operator's own image (--operator-image): a restoring pod's init container runs it. Empty:
    unknown, and a restore is held until the operator is started with it."""
    steady_probe_max_seconds: float = 300.0
    """The longest a quiet Active cluster goes unprobed (--steady-probe-max-seconds; cadence.py)."""
    operator_namespace: str | None = None
    """The operator's own namespace (--operator-namespace, $POD_NAMESPACE): each cluster's
    NetworkPolicy admits the operator's pods there to the client port. None: not in a cluster."""
    operator_pod_labels: tuple[tuple[str, str], ...] = ()
    """The operator pods' labels (--operator-pod-labels), narrowing that peer to them (empty: every
    pod of the operator's namespace)."""
    tls_expiry_warning_days: float = 7.0
    """A certificate a node presents that expires sooner is reported (ConfigMap key tlsExpiryWarningDays)."""
