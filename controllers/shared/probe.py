"""Build a ValkeyCluster's Observation: owned pods from the cache, and what each node reports.

Each pod that is Ready, starting or going away (a terminating pod may still
serve) and has an IP is probed concurrently (`should_probe`); every probe is
bounded (the admin client times out every call, and the whole probe has its
own deadline), and a probe that fails becomes
`NodeObservation.unreachable(reason)`, never an exception (SPEC 5). Reads
whose failure should not make the node unreachable (the migration log, CONFIG
GET, ACL LIST, COMMAND INFO) leave their fact unknown (None) instead, never
"empty": the planner decides nothing from an unknown fact.

A node below the version floor is asked nothing but its version: it never
joins, so its cluster state does not matter, and an old server may not know
CLUSTER MYSHARDID, which would make it look unreachable rather than too old.
Like `should_probe`, that is observation policy, not a decision: the floor is
one rule (versions.meets_floor) that the View applies to every report, a full
one too, so the shortcut changes what is read, never what is done
(tests/unit/controllers/cluster/test_probe_floor.py: the same actions, state
and rejected pods either way). The Observation carries no clock: the pass's
time is the decision's (Context.now).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from controllers.shared.names import CLUSTER_LABEL
from controllers.shared.observation import NodeObservation, Observation, PodObservation
from controllers.shared.tls import Certificate
from controllers.shared.versions import meets_floor, version_from_info
from valkey_operator.api.cluster import NodeRole
from valkey_operator.api.tunables import PROBED_NAMES
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.acl import parse_acl_list
from valkey_operator.valkey.admin import (
    AdminClient,
    NodeConnection,
    ValkeyAdminError,
    ValkeyCommandError,
    parse_commands_known,
    parse_config,
    parse_info,
    parse_lines,
    parse_migrations,
    text_of,
)
from valkey_operator.valkey.replies import SlotMigration, parse_cluster_nodes

T = TypeVar("T")

PROBE_DEADLINE = 8.0
"""Seconds one node's whole probe may take (each call also has the client's own timeout)."""


@attrs.frozen(kw_only=True)
class NodeExtras:
    """Per-node facts for metrics that the planner does not need."""

    used_memory: int | None = None


@attrs.frozen(kw_only=True)
class Observed:
    observation: Observation
    extras: Mapping[str, NodeExtras] = attrs.field(factory=dict)


def owned_pods(pods: Iterable[Obj], cluster_name: str, cluster_uid: str) -> list[Obj]:
    """Pods labelled for the cluster whose controller reference is this incarnation of it."""
    owned = []
    for pod in pods:
        metadata = pod.get("metadata", {})
        if (metadata.get("labels") or {}).get(CLUSTER_LABEL) != cluster_name:
            continue
        if any(
            ref.get("controller") and ref.get("uid") == cluster_uid
            for ref in metadata.get("ownerReferences") or []
        ):
            owned.append(pod)
    return owned


def should_probe(pod: PodObservation) -> bool:
    """Ready or terminating pods with an IP, and starting ones (PodObservation.starting): a new
    server answers well before the readiness probe's next period, and the sooner it is MET the
    sooner it serves.

    Observation policy, not a decision: it reads only the cached pod, never the spec, the stored
    status or the Memory, and it only widens what the pass sees. What is done with a node is
    decided from its report (View: `meetable`, `unreachable` counts a Ready pod that was not
    probed as unreachable), so probing one pod more or less changes what is known, never the
    rule. Like the informer cache's label selector, it belongs to the reader."""
    return pod.ip is not None and (pod.ready or pod.deleting or pod.starting)


def version_text_of(info: Mapping[str, str]) -> str | None:
    if "valkey_version" in info:
        return info["valkey_version"]
    if "redis_version" in info:
        return f"redis_version {info['redis_version']}"
    return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def node_from_replies(
    info: Mapping[str, str],
    cluster_info: Mapping[str, str],
    myid: str,
    shard_id: str | None,
    nodes_text: str,
    migrations: Iterable[Mapping[str, object]] = (),
) -> NodeObservation:
    """Pure: a NodeObservation from the replies of a full probe."""
    known = parse_cluster_nodes(nodes_text)
    myself = next((node for node in known if node.myself or node.node_id == myid), None)
    role_text = info.get("role")
    role = NodeRole.REPLICA if role_text == "slave" else NodeRole.PRIMARY if role_text == "master" else None
    if role is NodeRole.REPLICA:
        offset = _int(info.get("slave_repl_offset")) or _int(info.get("master_repl_offset")) or 0
        link_up: bool | None = info.get("master_link_status") == "up"
        link_down = None if link_up else _int(info.get("master_link_down_since_seconds"))
    else:
        offset = _int(info.get("master_repl_offset")) or 0
        link_up = link_down = None
    parsed_migrations = []
    for entry in migrations:
        try:
            parsed_migrations.append(SlotMigration.from_reply(entry))
        except (ValueError, KeyError):
            continue
    return NodeObservation(
        reachable=True,
        version=version_from_info(info),
        version_text=version_text_of(info),
        node_id=myid,
        role=role,
        primary_id=myself.primary_id if myself is not None and role is NodeRole.REPLICA else None,
        shard_id=shard_id or None,
        slots=myself.slots if myself is not None and role is not NodeRole.REPLICA else (),
        repl_offset=offset,
        link_up=link_up,
        link_down_seconds=link_down,
        cluster_ok=cluster_info.get("cluster_state") == "ok",
        known_nodes=known,
        migrations=tuple(parsed_migrations),
    )


PROBE_INFO = ("INFO", "server", "replication", "memory", "persistence", "keyspace")


def _required(reply: Any) -> Any:
    """A reply the observation cannot do without: an error reply makes the node unreachable."""
    if isinstance(reply, ValkeyAdminError):
        raise reply
    return reply


def _optional(reply: Any, parse: Callable[[Any], T]) -> T | None:
    """A reply whose error leaves its fact unknown (None), not the node unreachable."""
    return None if isinstance(reply, ValkeyAdminError) else parse(reply)


async def probe_connection(
    node: NodeConnection, commands: Sequence[str] = ()
) -> tuple[NodeObservation, NodeExtras]:
    """Every read of a probe in one round trip (a pipeline), parsed as the single reads would be."""
    der = node.peer_certificate()
    served = Certificate.from_der(der) if der else None
    # The migration log before slot ownership: a job that finishes between the two reads then shows
    # as active with the slots still at the source (wait), never as done with them still there
    # (which would start the same batch again). A pipeline runs them in this order.
    batch: list[tuple[str | int, ...]] = [
        PROBE_INFO,
        ("CLUSTER", "GETSLOTMIGRATIONS"),
        ("CLUSTER", "INFO"),
        ("CLUSTER", "MYID"),
        ("CLUSTER", "MYSHARDID"),
        ("CLUSTER", "NODES"),
        ("ACL", "LIST"),
        ("CONFIG", "GET", *PROBED_NAMES),
    ]
    if commands:
        batch.append(("COMMAND", "INFO", *commands))
    replies = await node.pipeline(*batch)
    info = parse_info(text_of(_required(replies[0])))
    extras = NodeExtras(used_memory=_int(info.get("used_memory")))
    version = version_from_info(info)
    if not meets_floor(version):
        floor = NodeObservation(reachable=True, version=version, version_text=version_text_of(info))
        return attrs.evolve(floor, served=served), extras
    migrations_reply = replies[1]
    # A server without atomic slot migration answers with an error: it has no jobs.
    migrations = (
        [] if isinstance(migrations_reply, ValkeyCommandError) else parse_migrations(migrations_reply)
    )
    cluster_info = parse_info(text_of(_required(replies[2])))
    myid, shard_id, nodes_text = (text_of(_required(reply)) for reply in replies[3:6])
    observed = node_from_replies(info, cluster_info, myid, shard_id, nodes_text, migrations)
    listed = _optional(replies[6], parse_lines)
    return attrs.evolve(
        observed,
        config=_optional(replies[7], parse_config),
        acl=parse_acl_list(listed) if listed is not None else None,
        commands=_optional(replies[8], lambda reply: parse_commands_known(commands, reply))
        if commands
        else {},
        served=served,
        loaded_keys=_loaded_keys(info),
        keys=_keys(info),
        loading=info.get("loading") == "1",
    ), extras


async def probe(
    admin: AdminClient, ip: str, commands: Sequence[str] = ()
) -> tuple[NodeObservation, NodeExtras]:
    """What the node at ip reports; a failure of any kind is an unreachable fact."""
    try:
        async with asyncio.timeout(PROBE_DEADLINE), admin.connect(ip) as node:
            return await probe_connection(node, commands)
    except TimeoutError:
        return NodeObservation.unreachable(f"probe of {ip} exceeded {PROBE_DEADLINE}s"), NodeExtras()
    except ValkeyAdminError as exc:
        return NodeObservation.unreachable(str(exc)), NodeExtras()
    except Exception as exc:  # anything else is still a fact about this node, not a failed pass
        return NodeObservation.unreachable(f"{type(exc).__name__}: {exc}"), NodeExtras()


async def observe(
    pods: Iterable[Obj],
    admin: AdminClient | None,
    *,
    commands: Sequence[str] = (),
) -> Observed:
    """The pass's Observation: every owned pod, and a probe of each Ready or terminating one.

    Without an admin client (no credentials yet) no node is probed. `commands` are the role
    commands each node is asked whether it knows.
    """
    pod_observations = tuple(PodObservation.from_pod(pod) for pod in pods)
    targets = [pod for pod in pod_observations if should_probe(pod)] if admin is not None else []
    results = (
        await asyncio.gather(*(probe(admin, pod.ip or "", commands) for pod in targets)) if admin else []
    )
    nodes = {pod.name: result[0] for pod, result in zip(targets, results, strict=True)}
    extras = {pod.name: result[1] for pod, result in zip(targets, results, strict=True)}
    return Observed(
        observation=Observation(pods=pod_observations, nodes=nodes),
        extras=extras,
    )


def _keys(info: Mapping[str, str]) -> int | None:
    """db0's keys (INFO keyspace `db0:keys=N,expires=...`; no line: none); None while loading."""
    if info.get("loading") != "0":
        return None
    fields = dict(field.partition("=")[::2] for field in info.get("db0", "").split(",") if field)
    return _int(fields.get("keys")) or 0


def _loaded_keys(info: Mapping[str, str]) -> int | None:
    """Keys read from the RDB at start, expired ones included; None while loading or unreported."""
    loaded, expired = (
        _int(info.get("rdb_last_load_keys_loaded")),
        _int(info.get("rdb_last_load_keys_expired")),
    )
    if info.get("loading") != "0" or loaded is None:
        return None
    return loaded + (expired or 0)
