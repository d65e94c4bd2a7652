"""What every renderer needs: the cluster, its resolved config, and the operator's defaults."""

from __future__ import annotations

import attrs

from controllers.shared import names
from controllers.shared.config_resolve import ResolvedConfig
from controllers.shared.layout import DEFAULT_EXPORTER_IMAGE
from controllers.shared.persistence import Persistence
from valkey_operator.api.cluster import Placement, ValkeyCluster, ZoneSpread
from valkey_operator.api.resources import API_VERSION
from valkey_operator.core.rest import Obj


@attrs.frozen(kw_only=True)
class RenderContext:
    """Inputs shared by the renderers; the cluster must carry its namespace and uid (it was read back)."""

    cluster: ValkeyCluster
    config: ResolvedConfig
    default_zone_spread: ZoneSpread = ZoneSpread.BEST_EFFORT
    """The operator configuration's defaultZoneSpread (SPEC 1.5)."""
    exporter_image: str = DEFAULT_EXPORTER_IMAGE
    """The operator's --exporter-image: the metrics sidecar's image (render/exporter.py)."""
    operator_peer: Obj | None = None
    """The operator's pods as a NetworkPolicy peer (render/network_policy.py; None: unknown)."""
    operator_image: str = ""
    """The operator's --operator-image: the archiver sidecar's image (render/archiver.py; empty:
    unknown, and no pod archives)."""
    endpoint_networks: tuple[str, ...] = ()
    """The operator's --backup-endpoint-allowed-networks, passed on to the archiver."""

    def __attrs_post_init__(self) -> None:
        meta = self.cluster.metadata
        if not meta.namespace or not meta.uid:
            raise ValueError(f"ValkeyCluster {meta.name} needs metadata.namespace and metadata.uid to render")

    @property
    def name(self) -> str:
        return self.cluster.metadata.name

    @property
    def namespace(self) -> str:
        return self.cluster.metadata.namespace or ""

    @property
    def persistence(self) -> Persistence:
        """What the nodes keep and on what claims (SPEC 1.6): the config chain's, mode none by default."""
        return self.config.persistence

    @property
    def placement(self) -> Placement:
        return self.cluster.spec.placement or Placement()

    @property
    def zone_spread(self) -> ZoneSpread:
        return self.placement.zone_spread or self.default_zone_spread

    @property
    def tls_secret(self) -> str | None:
        tls = self.cluster.spec.tls
        return tls.secret_ref if tls else None

    def owner_reference(self) -> Obj:
        """Controller reference to the cluster: garbage collection deletes what it owns (SPEC 1.4)."""
        return {
            "apiVersion": API_VERSION,
            "kind": self.cluster.RESOURCE.kind,
            "name": self.name,
            "uid": self.cluster.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def metadata(self, name: str, labels: dict[str, str] | None = None) -> Obj:
        """Metadata of an owned object: namespace, labels, owner reference."""
        return {
            "name": name,
            "namespace": self.namespace,
            "labels": labels if labels is not None else names.common_labels(self.name),
            "ownerReferences": [self.owner_reference()],
        }
