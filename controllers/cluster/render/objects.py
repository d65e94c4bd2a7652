"""The other objects a ValkeyCluster owns: peer and client Services, ConfigMap, internal Secret, PDBs.

All carry the cluster's labels and a controller ownerReference, so deleting
the cluster garbage-collects them (SPEC 1.4: the cluster has no finalizer).
"""

from __future__ import annotations

import base64

from controllers.cluster.render import archiver, exporter
from controllers.cluster.render.acl import RenderedAcl
from controllers.cluster.render.config import render_valkey_conf, replication_auth_conf
from controllers.cluster.render.context import RenderContext
from controllers.shared import layout, names
from controllers.shared.credentials import InternalCredentials
from valkey_operator.api.resources import REPLICATION_USER
from valkey_operator.core.rest import Obj


def _headless(ctx: RenderContext, name: str, selector: dict[str, str], not_ready: bool) -> Obj:
    """publishNotReadyAddresses only when true: the API server drops a false one (omitempty), and a
    rendered field the stored object lacks would count as drift on every pass."""
    spec: Obj = {"clusterIP": "None", **({"publishNotReadyAddresses": True} if not_ready else {})}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(name),
        "spec": {
            **spec,
            "selector": selector,
            "ports": [
                {"name": "valkey", "port": layout.VALKEY_PORT, "targetPort": "valkey", "protocol": "TCP"}
            ],
        },
    }


def render_service(ctx: RenderContext) -> Obj:
    """The peer Service, named after the cluster (the pods' subdomain): `<pod>.<cluster>.<ns>.svc`.

    Every pod, publishNotReadyAddresses: a node has its name before it is Ready or has joined.
    """
    return _headless(ctx, names.service_name(ctx.name), names.cluster_selector(ctx.name), True)


def render_client_service(ctx: RenderContext) -> Obj:
    """The client Service (`status.endpoint`): Ready pods with the member label (membership.py).

    Headless, so a cluster-aware client gets the members' addresses to bootstrap from and then
    follows the slot map; never a node that has not joined, is below the floor or is leaving.
    """
    return _headless(ctx, names.client_service_name(ctx.name), names.client_selector(ctx.name), False)


def render_config_map(ctx: RenderContext) -> Obj:
    """valkey.conf, shared by every pod of the cluster (per-pod values come from the command line)."""
    tls = ctx.cluster.spec.tls
    text = render_valkey_conf(
        ctx.config,
        tls=ctx.tls_secret is not None,
        client_certificates=tls is not None and tls.clients_need_certificates,
        archived=archiver.TIMESTAMPS if archiver.enabled(ctx) else None,
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": ctx.metadata(names.config_map_name(ctx.name)),
        "data": {layout.CONFIG_KEY: text},
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def render_internal_secret(ctx: RenderContext, credentials: InternalCredentials, acl: RenderedAcl) -> Obj:
    """Internal passwords (the operator reads them back), the startup ACL file and primaryauth.

    `data` (base64) rather than stringData, so the rendered object compares equal to the stored one.
    """
    data = {
        layout.ADMIN_PASSWORD_KEY: credentials.admin_password,
        layout.REPLICATION_PASSWORD_KEY: credentials.replication_password,
        layout.ACL_KEY: acl.text,
        layout.REPLICATION_AUTH_KEY: replication_auth_conf(
            REPLICATION_USER, credentials.replication_password
        ),
        **exporter.secret_data(ctx, credentials),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": ctx.metadata(names.secret_name(ctx.name)),
        "type": "Opaque",
        "data": {key: _b64(value) for key, value in data.items()},
    }


def min_available(replicas_per_shard: int) -> int:
    """The shard's replicas: one pod of the shard may be disrupted at a time.

    With replicasPerShard 0 this is 0, which honestly says an eviction loses that shard's data:
    a budget of 1 would only block node drains forever, since nothing can move a lone copy.
    """
    return replicas_per_shard


def render_pdb(ctx: RenderContext, shard: int) -> Obj:
    """Integer minAvailable (percentages and maxUnavailable need a scale subresource; SPEC 1.4).

    unhealthyPodEvictionPolicy AlwaysAllow: a pod that is not Ready serves nothing, so it must
    not block a drain.
    """
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": ctx.metadata(
            names.pdb_name(ctx.name, shard), {**names.common_labels(ctx.name), names.SHARD_LABEL: str(shard)}
        ),
        "spec": {
            "minAvailable": min_available(ctx.cluster.spec.replicas_per_shard),
            "selector": {"matchLabels": names.shard_selector(ctx.name, shard)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def render_pdbs(ctx: RenderContext) -> list[Obj]:
    return [render_pdb(ctx, shard) for shard in range(ctx.cluster.spec.shards)]
