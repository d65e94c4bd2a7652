"""Builders of observed facts for the unit tests: pods as the cache shows them, nodes' reports, bus lines.

The planner's, the spread's and the backup's pure tests each need a few pods and node reports built
by hand; they take them from here, so a field added to PodObservation or NodeObservation is filled
in one place. Defaults are an ordinary running, Ready pod and a reachable 9.1.0 node; every keyword
of the model can still be set. (tests/unit/conftest.py puts this directory on the import path.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controllers.shared.observation import NodeObservation, PodObservation, PodPhase
from controllers.shared.versions import Version
from valkey_operator.api.cluster import NodeRole
from valkey_operator.valkey.replies import KnownNode, NodeFlag, SlotMigration
from valkey_operator.valkey.slots import SlotRange

VERSION: Version = (9, 1, 0)


def pod(
    name: str,
    shard: int | None,
    ip: str | None = None,
    *,
    template: str = "t1",
    ready: bool = True,
    created: str = "",
    **fields: Any,
) -> PodObservation:
    """A running pod of shard, not going away (PodObservation's other fields by keyword)."""
    return PodObservation(
        name=name,
        shard=shard,
        template_hash=template,
        phase=fields.pop("phase", PodPhase.RUNNING),
        ready=ready,
        ip=ip,
        deleting=fields.pop("deleting", False),
        created=created,
        **fields,
    )


def line(
    node_id: str,
    ip: str | None,
    *,
    slots: tuple[SlotRange, ...] = (),
    me: bool = False,
    flags: Iterable[NodeFlag] = (NodeFlag.PRIMARY,),
    **fields: Any,
) -> KnownNode:
    """A CLUSTER NODES line about node_id (a primary's unless flags say otherwise; `me`: myself)."""
    found = frozenset(flags) | ({NodeFlag.MYSELF} if me else frozenset())
    return KnownNode(node_id=node_id, ip=ip, flags=found, slots=slots, **fields)


def primary(
    node_id: str,
    *,
    slots: tuple[SlotRange, ...] = (),
    known: tuple[KnownNode, ...] = (),
    jobs: tuple[SlotMigration, ...] | None = (),
    ok: bool | None = True,
    version: Version | None = VERSION,
    **fields: Any,
) -> NodeObservation:
    """A reachable primary's report: its slots, the lines it knows, its migration jobs."""
    return NodeObservation(
        reachable=True,
        version=version,
        node_id=node_id,
        role=NodeRole.PRIMARY,
        slots=slots,
        cluster_ok=ok,
        known_nodes=known,
        migrations=jobs,
        **fields,
    )


def replica(
    node_id: str,
    primary_id: str,
    *,
    offset: int = 0,
    link_up: bool | None = True,
    version: Version | None = VERSION,
    **fields: Any,
) -> NodeObservation:
    """A reachable replica's report of primary_id, at offset."""
    return NodeObservation(
        reachable=True,
        version=version,
        node_id=node_id,
        role=NodeRole.REPLICA,
        primary_id=primary_id,
        repl_offset=offset,
        link_up=link_up,
        **fields,
    )
