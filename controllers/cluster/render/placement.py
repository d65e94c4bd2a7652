"""Scheduling fields of a Valkey pod (SPEC 1.4 "Placement").

- zones: a required node affinity on topology.kubernetes.io/zone;
- nodeSelector, tolerations, priorityClassName: passed verbatim;
- per shard, a zone spread with maxSkew 1: ScheduleAnyway for bestEffort,
  DoNotSchedule for required; in required mode also a cluster-wide soft
  zone spread, so shards do not pile into one zone either;
- always a soft per-shard hostname spread, so a shard's copies avoid sharing a node.

An unsatisfiable required spread leaves the new pod Pending; the planner then
stalls that shard's rollout with the old pods still serving.
"""

from __future__ import annotations

from controllers.cluster.render.context import RenderContext
from controllers.shared import names
from valkey_operator.api.cluster import ZoneSpread
from valkey_operator.core.rest import Obj

ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"


def _spread(topology_key: str, selector: dict[str, str], *, required: bool) -> Obj:
    return {
        "maxSkew": 1,
        "topologyKey": topology_key,
        "whenUnsatisfiable": "DoNotSchedule" if required else "ScheduleAnyway",
        "labelSelector": {"matchLabels": selector},
    }


def topology_spread(ctx: RenderContext, shard: int) -> list[Obj]:
    shard_pods = names.shard_selector(ctx.name, shard)
    required = ctx.zone_spread == ZoneSpread.REQUIRED
    constraints = [_spread(ZONE_KEY, shard_pods, required=required)]
    if required:
        constraints.append(_spread(ZONE_KEY, names.cluster_selector(ctx.name), required=False))
    constraints.append(_spread(HOSTNAME_KEY, shard_pods, required=False))
    return constraints


def node_affinity(ctx: RenderContext) -> Obj | None:
    zones = sorted(set(ctx.placement.zones))
    if not zones:
        return None
    term = {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": zones}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def scheduling(ctx: RenderContext, shard: int) -> Obj:
    """The pod spec's scheduling fields; unset ones are left out."""
    placement = ctx.placement
    fields: Obj = {"topologySpreadConstraints": topology_spread(ctx, shard)}
    affinity = node_affinity(ctx)
    if affinity is not None:
        fields["affinity"] = affinity
    if placement.node_selector:
        fields["nodeSelector"] = dict(placement.node_selector)
    if placement.tolerations:
        fields["tolerations"] = [toleration.to_dict() for toleration in placement.tolerations]
    if placement.priority_class_name:
        fields["priorityClassName"] = placement.priority_class_name
    return fields
