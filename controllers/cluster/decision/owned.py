"""The objects a cluster owns besides its pods, as rendered (pure), and their names for the gatherer.

`owned_names` lists what `owned_objects` renders, so the reconciler can look each one up in its
cache before deciding (tests/unit keeps the two equal).
"""

from __future__ import annotations

from controllers.cluster.decision.desired import OwnedObject
from controllers.cluster.render.acl import RenderedAcl
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.network_policy import enabled as network_policy_enabled
from controllers.cluster.render.network_policy import render_network_policy
from controllers.cluster.render.objects import (
    render_client_service,
    render_config_map,
    render_internal_secret,
    render_pdbs,
    render_service,
)
from controllers.cluster.render.user_passwords import user_secret_name
from controllers.shared import names
from controllers.shared.credentials import InternalCredentials
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.api.network import network_policy_enabled as network_policy_on
from valkey_operator.core.resource import (
    CONFIG_MAPS,
    NETWORK_POLICIES,
    POD_DISRUPTION_BUDGETS,
    SECRETS,
    SERVICES,
    Resource,
)


def owned_objects(
    ctx: RenderContext, internal: tuple[InternalCredentials, RenderedAcl] | None
) -> tuple[OwnedObject, ...]:
    """The peer and client Services, ConfigMap, PDBs, the NetworkPolicy unless switched off, and
    (once the passwords are known) the internal Secret, first."""
    objects = [
        OwnedObject(SERVICES, render_service(ctx)),
        OwnedObject(SERVICES, render_client_service(ctx)),
        OwnedObject(CONFIG_MAPS, render_config_map(ctx)),
        *(OwnedObject(POD_DISRUPTION_BUDGETS, pdb) for pdb in render_pdbs(ctx)),
    ]
    if network_policy_enabled(ctx):
        objects.append(OwnedObject(NETWORK_POLICIES, render_network_policy(ctx)))
    if internal is not None:
        objects.insert(0, OwnedObject(SECRETS, render_internal_secret(ctx, *internal)))
    return tuple(objects)


def owned_names(cluster: ValkeyCluster) -> tuple[tuple[Resource, str], ...]:
    """(resource, name) of every object owned_objects may render for cluster."""
    name = cluster.metadata.name
    return (
        (SECRETS, names.secret_name(name)),
        (SERVICES, names.service_name(name)),
        (SERVICES, names.client_service_name(name)),
        (CONFIG_MAPS, names.config_map_name(name)),
        *((POD_DISRUPTION_BUDGETS, names.pdb_name(name, shard)) for shard in range(cluster.spec.shards)),
        (NETWORK_POLICIES, names.network_policy_name(name)),
    )


def retired_objects(ctx: RenderContext) -> tuple[tuple[Resource, str], ...]:
    """(resource, name) of what the cluster may have owned but must not now: the NetworkPolicy
    once switched off. upkeep deletes each that exists and is this cluster's (uid checked)."""
    if network_policy_enabled(ctx):
        return ()
    return ((NETWORK_POLICIES, names.network_policy_name(ctx.name)),)


def written_names(cluster: ValkeyCluster) -> tuple[tuple[Resource, str], ...]:
    """(resource, name) of every object the cluster writes by name: owned_names (the NetworkPolicy
    only while on) and the generated user Secrets. An existing one controlled by another is never
    taken over (conflicts.py)."""
    name = cluster.metadata.name
    users = tuple(
        (SECRETS, user_secret_name(name, user.username))
        for user in cluster.spec.acl
        if user.generated_password
    )
    policy_on = network_policy_on(cluster.spec.network_policy)
    owned = tuple(pair for pair in owned_names(cluster) if policy_on or pair[0] != NETWORK_POLICIES)
    return (*owned, *users)
