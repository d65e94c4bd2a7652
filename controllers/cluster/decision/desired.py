"""What one reconcile pass of a ValkeyCluster wants (pure data): the resolved spec the planner
steers toward, the users, and the owned objects as rendered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

import attrs

from controllers.cluster.decision.restore import RestoreSource
from controllers.cluster.render.acl import UserAcl
from controllers.cluster.render.external import DesiredExternal
from controllers.shared.observation import ContainerResources
from controllers.shared.tls import TlsMaterial
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.api.resources import PAUSED_ANNOTATION
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import Obj


@attrs.frozen
class OwnedObject:
    """An object the cluster owns besides its pods, as rendered: server-side applied when it drifts."""

    resource: Resource
    body: Obj

    @property
    def key(self) -> str:
        return object_key(self.resource.kind, self.body["metadata"]["name"])


def object_key(kind: str, name: str) -> str:
    return f"{kind}/{name}"


@attrs.frozen
class DesiredUser:
    """A spec.acl user as rendered, and the role commands it names (each must be one Valkey knows)."""

    user: UserAcl
    commands: tuple[tuple[str, str], ...] = ()
    """(role, command) for every explicit command rule of the user's roles."""


@attrs.frozen(kw_only=True)
class DesiredAcl:
    internal: tuple[UserAcl, ...] = ()
    """default (disabled), the admin and the replication user: always present, never deleted."""
    users: tuple[DesiredUser, ...] = ()
    secret: str = ""
    """The owned Secret whose `key` holds the startup ACL file (it is among Desired.objects)."""
    key: str = ""


@attrs.frozen(kw_only=True)
class DesiredTls:
    """A TLS cluster's checked Secret, and how long the kubelet may take to update mounted files."""

    material: TlsMaterial
    sync_delay: float = 120.0
    """Seconds after a Secret change by which every pod's mounted files hold it (secretSyncSeconds)."""
    expiry_warning: float = 7 * 86400.0
    """A served certificate expiring sooner than this is reported (tlsExpiryWarningDays)."""
    client_certificates: bool = False
    """spec.tls.clientAuth Required: every client presents a certificate; a CN names its user."""


@attrs.frozen(kw_only=True)
class Desired:
    """The resolved spec the planner steers toward."""

    shards: int
    replicas_per_shard: int
    template_hash: str
    """The pod-template hash current pods should carry (from the renderer)."""
    image: str
    """The image reference the pods run, named in version-floor messages."""
    shape_hash: str = ""
    """The template hash without resources (template.shape_hash): a pod labelled with it differs
    from the template in resources at most, which pods/resize changes in place (resize.py)."""
    resources: ContainerResources | None = None
    """The Valkey container's resources as rendered (render/pods.resources): what a resize asks."""
    maxmemory_derived: bool = False
    """maxmemory follows the memory limit (the config chain does not set it): each node's value
    follows the limit its own pod runs with (resize.node_maxmemory)."""
    paused: bool = False
    """The paused annotation: plan nothing, still report status."""
    config_hash: str = ""
    """The resolved config's settings hash: status.configHash once every node runs it."""
    runtime: Mapping[str, str] = attrs.field(factory=dict)
    """Every runtime tunable -> the value each node must run (the config's, the operator's
    default, else Valkey's own default), spelled as CONFIG SET takes it."""
    pod_annotations: Mapping[str, str] = attrs.field(factory=dict)
    """spec.podAnnotations: new and changed keys are patched onto live pods."""
    acl: DesiredAcl = DesiredAcl()
    objects: tuple[OwnedObject, ...] = ()
    retired: tuple[tuple[Resource, str], ...] = ()
    """(resource, name) of owned objects that must not exist (a switched-off NetworkPolicy)."""
    uid: str = ""
    """The cluster's uid: a retired object is deleted only when its controller reference names it."""
    tls: DesiredTls | None = None
    """TLS clusters: the Secret every node must serve (checked; a bad one never reaches the planner)."""
    persistent: bool = False
    """The config asks for durable nodes: every pod runs on a data claim of its own."""
    claim_size: str | None = None
    """persistence.size as written (persistent clusters)."""
    claim_bytes: int | None = None
    """persistence.size in bytes."""
    claim_mode: str | None = None
    """persistence.mode: only claims written in it are started on again."""
    complete_log: bool = False
    """aof always: a restarting node's own file holds every write it acknowledged."""
    backup_running: bool = False
    """A ValkeyBackup of the cluster is Running: no slot moves until it ends, or a slot's keys could
    be in two shards' files, or in none (the backup checks the layout again at its end)."""
    restore: RestoreSource | None = None
    """spec.restore not yet verified: the backup's shards, loaded at its layout (restore.py)."""
    spread_held: bool = False
    """A switchover is requested or Running: the primary spread moves nothing (switchover.py)."""
    pinned_primary: str | None = None
    """The pod a Succeeded switchover made primary: the spread does not move that primary away."""
    external: DesiredExternal | None = None
    """spec.externalAccess: each pod's Service is rendered from it, and each node announces its
    Service's address (external.py)."""

    @property
    def pods_per_shard(self) -> int:
        return 1 + self.replicas_per_shard

    @classmethod
    def of(
        cls,
        cluster: ValkeyCluster,
        *,
        template_hash: str,
        image: str,
        shape_hash: str = "",
        resources: ContainerResources | None = None,
        maxmemory_derived: bool = False,
        config_hash: str = "",
        runtime: Mapping[str, str] | None = None,
        acl: DesiredAcl | None = None,
        objects: tuple[OwnedObject, ...] = (),
        retired: tuple[tuple[Resource, str], ...] = (),
        tls: DesiredTls | None = None,
        claim_size: str | None = None,
        claim_bytes: int | None = None,
        claim_mode: str | None = None,
        complete_log: bool = False,
    ) -> Self:
        return cls(
            shards=cluster.spec.shards,
            replicas_per_shard=cluster.spec.replicas_per_shard,
            template_hash=template_hash,
            image=image,
            shape_hash=shape_hash,
            resources=resources,
            maxmemory_derived=maxmemory_derived,
            paused=cluster.metadata.annotations.get(PAUSED_ANNOTATION, "").lower() == "true",
            config_hash=config_hash,
            runtime=dict(runtime or {}),
            pod_annotations=dict(cluster.spec.pod_annotations),
            acl=acl or DesiredAcl(),
            objects=objects,
            retired=retired,
            uid=cluster.metadata.uid or "",
            tls=tls,
            persistent=claim_size is not None,
            claim_size=claim_size,
            claim_bytes=claim_bytes,
            claim_mode=claim_mode,
            complete_log=complete_log,
            external=external_of(cluster),
        )


def external_of(cluster: ValkeyCluster) -> DesiredExternal | None:
    access = cluster.spec.external_access
    if access is None:
        return None
    return DesiredExternal(
        namespace=cluster.metadata.namespace or "",
        cluster=cluster.metadata.name,
        type=access.type,
        annotations=dict(access.service_annotations),
    )
