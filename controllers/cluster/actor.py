"""Carry out a Plan: thin and idempotent (SPEC 5).

- CreatePod: before creating, the shard's live pods are counted with a fresh
  label-selected LIST from the API server, not the cache: a cache that lags
  behind the previous pass's creates would otherwise create duplicates. Each
  new pod gets a fresh unique name (names.pod_name) and the rendered template.
- DeletePod: with a uid precondition, so only the incarnation the plan saw goes.
- Meet / AssignSlots / Replicate / MigrateSlots / Promote / Forget: one admin
  call each on the named node (Forget on every listed node at once, within the
  forget window). MIGRATESLOTS only starts a job; the next passes read its
  progress from CLUSTER GETSLOTMIGRATIONS.
- Failpoints `before:<Action>` / `after:<Action>` (valkey_operator.failpoints)
  let tests kill the process around each step.
- The other owned objects (Service, ConfigMap, internal Secret, PDBs) are
  server-side applied when the cached copy lacks what the renderer says.

Failures are collected and returned, never raised half-way: the next pass
re-observes and re-plans from whatever did happen.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import structlog

from controllers.cluster.failures import FailedPod
from controllers.cluster.observe import NodeObservation, PodPhase
from controllers.cluster.plan import (
    AssignSlots,
    CreatePod,
    DeletePod,
    Forget,
    Meet,
    MigrateSlots,
    Plan,
    Promote,
    TopologyAction,
)
from controllers.cluster.render import names
from controllers.cluster.render.acl import RenderedAcl, UserAcl
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.objects import render_config_map, render_pdbs, render_service
from controllers.cluster.render.pods import render_pod
from valkey_operator import failpoints
from valkey_operator.api.resources import ADMIN_USER, GROUP, REPLICATION_USER
from valkey_operator.core.client import ApiError, Client
from valkey_operator.core.resource import (
    CONFIG_MAPS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
)
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient, ValkeyAdminError

log = structlog.get_logger(__name__)

CachedLookup = Callable[[Resource, str, str], Obj | None]
"""(resource, namespace, name) -> the cached object, or None."""

_RNG = random.SystemRandom()


def contains(actual: Any, wanted: Any) -> bool:
    """Whether actual holds every field of wanted with the same value (lists compared item by item)."""
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            key in actual and contains(actual[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(wanted)
            and all(contains(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def live_pod(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase", PodPhase.PENDING)
    return "deletionTimestamp" not in pod["metadata"] and phase not in {PodPhase.SUCCEEDED, PodPhase.FAILED}


def pods_to_create(wanted: Mapping[int, int], existing: Sequence[Obj], pods_per_shard: int) -> dict[int, int]:
    """How many pods of each shard to create now: the plan's count, capped by what the API shows live."""
    live: dict[int, int] = {}
    for pod in existing:
        shard = names.shard_of(pod["metadata"].get("labels") or {})
        if shard is not None and live_pod(pod):
            live[shard] = live.get(shard, 0) + 1
    return {
        shard: min(count, max(pods_per_shard - live.get(shard, 0), 0))
        for shard, count in wanted.items()
        if min(count, pods_per_shard - live.get(shard, 0)) > 0
    }


ACL_ANNOTATION = f"{GROUP}/acl-fingerprint"
"""On each pod: the fingerprint of the ACL its node has (from its startup file, or applied at runtime)."""
INTERNAL_USERS = frozenset({ADMIN_USER, REPLICATION_USER})


def listed_usernames(lines: Iterable[str]) -> list[str]:
    """Usernames from ACL LIST lines ('user <name> <rules...>')."""
    names_found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "user":
            names_found.append(fields[1])
    return names_found


def acl_changes(acl: RenderedAcl, listed: Iterable[str]) -> tuple[list[UserAcl], list[str]]:
    """(users to ACL SETUSER, usernames to ACL DELUSER); the operator's own users are left alone."""
    wanted = set(acl.usernames)
    setuser = [user for user in acl.users if user.username not in INTERNAL_USERS]
    deluser = [name for name in listed_usernames(listed) if name not in wanted and name not in INTERNAL_USERS]
    return setuser, deluser


class Actor:
    def __init__(self, client: Client, cached: CachedLookup) -> None:
        self.client = client
        self.cached = cached

    # --- owned objects ---

    async def apply_if_changed(self, resource: Resource, obj: Obj) -> bool:
        """Server-side apply obj unless the cached copy already holds it; True when applied."""
        metadata = obj["metadata"]
        current = self.cached(resource, metadata["namespace"], metadata["name"])
        if current is not None and contains(current, {k: v for k, v in obj.items() if k != "apiVersion"}):
            return False
        await self.client.apply(resource, obj)
        return True

    async def ensure_objects(self, ctx: RenderContext, secret: Obj) -> list[str]:
        """Service, ConfigMap, internal Secret and PDBs; returns the kinds applied."""
        applied = []
        wanted: list[tuple[Resource, Obj]] = [
            (SERVICES, render_service(ctx)),
            (CONFIG_MAPS, render_config_map(ctx)),
            (SECRETS, secret),
            *((POD_DISRUPTION_BUDGETS, pdb) for pdb in render_pdbs(ctx)),
        ]
        for resource, obj in wanted:
            if await self.apply_if_changed(resource, obj):
                applied.append(f"{resource.kind}/{obj['metadata']['name']}")
        if applied:
            log.info("applied owned objects", cluster=f"{ctx.namespace}/{ctx.name}", objects=applied)
        return applied

    # --- plan actions ---

    async def act(
        self,
        plan: Plan,
        ctx: RenderContext,
        pods: Sequence[Obj],
        admin: AdminClient | None,
        *,
        blocked_shards: Collection[int] = (),
        acl_fingerprint: str | None = None,
    ) -> list[str]:
        """Every action of the plan (no pod for a blocked shard); returns one message per failed action."""
        errors: list[str] = []
        by_name = {pod["metadata"]["name"]: pod for pod in pods}
        creates: dict[int, int] = {}
        for action in plan.actions:
            if isinstance(action, CreatePod) and action.shard not in blocked_shards:
                creates[action.shard] = creates.get(action.shard, 0) + 1
        if creates:
            errors += await self._create_pods(ctx, creates, acl_fingerprint)
        topology = [a for a in plan.actions if isinstance(a, TopologyAction)]
        if topology and admin is None:
            errors.append("no admin credentials to change the cluster topology with")
        elif topology and admin is not None:
            for action in topology:
                try:
                    await self._topology(action, by_name, admin)
                except ValkeyAdminError as exc:
                    errors.append(str(exc))
        for action in plan.actions:
            if isinstance(action, DeletePod):
                failpoints.hit("before:DeletePod")
                errors += await self._delete_pod(action, by_name)
                failpoints.hit("after:DeletePod")
        return errors

    async def _create_pods(
        self, ctx: RenderContext, wanted: Mapping[int, int], acl_fingerprint: str | None
    ) -> list[str]:
        listed = await self.client.list(
            PODS, ctx.namespace, label_selector=f"{names.CLUSTER_LABEL}={ctx.name}"
        )
        uid = ctx.cluster.metadata.uid
        existing = [
            pod
            for pod in listed
            if any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences") or [])
        ]
        taken = {pod["metadata"]["name"] for pod in listed}
        errors = []
        for shard, count in sorted(
            pods_to_create(wanted, existing, ctx.cluster.spec.replicas_per_shard + 1).items()
        ):
            for _ in range(count):
                name = names.pod_name(ctx.name, shard, _RNG, taken)
                taken.add(name)
                body = render_pod(ctx, shard, name)
                if acl_fingerprint is not None:  # the node starts with the Secret's ACL file
                    body["metadata"].setdefault("annotations", {})[ACL_ANNOTATION] = acl_fingerprint
                try:
                    await self.client.create(PODS, body)
                    log.info("created pod", pod=name, shard=shard, cluster=f"{ctx.namespace}/{ctx.name}")
                except ApiError as exc:
                    errors.append(f"create pod {name}: {exc}")
        return errors

    async def sync_acl(
        self, pods: Sequence[Obj], nodes: Mapping[str, NodeObservation], acl: RenderedAcl, admin: AdminClient
    ) -> list[str]:
        """ACL SETUSER/DELUSER on every answering node whose pod does not carry the ACL's fingerprint yet."""
        errors = []
        for pod in pods:
            metadata = pod["metadata"]
            node = nodes.get(metadata["name"])
            ip = (pod.get("status") or {}).get("podIP")
            if node is None or not node.reachable or node.node_id is None or not ip:
                continue  # not answering, or below the version floor: it never joins
            if (metadata.get("annotations") or {}).get(ACL_ANNOTATION) == acl.fingerprint:
                continue
            try:
                async with admin.connect(ip) as connection:
                    setuser, _ = acl_changes(acl, [])
                    for user in setuser:
                        await connection.acl_setuser(user.username, user.rules)
                    _, deluser = acl_changes(acl, await connection.acl_list())
                    if deluser:
                        await connection.acl_deluser(*deluser)
                patch = {"metadata": {"annotations": {ACL_ANNOTATION: acl.fingerprint}}}
                await self.client.patch(PODS, metadata["name"], patch, metadata["namespace"])
            except (ValkeyAdminError, ApiError) as exc:
                errors.append(f"ACL on {metadata['name']}: {exc}")
        return errors

    async def prune(self, namespace: str, failed: Iterable[FailedPod]) -> list[str]:
        """Delete old failed pods (each incarnation by uid)."""
        errors = []
        for pod in failed:
            try:
                await self.client.delete(PODS, pod.name, namespace, uid=pod.uid or None)
            except ApiError as exc:
                if not exc.conflict:
                    errors.append(f"delete failed pod {pod.name}: {exc}")
        return errors

    async def _delete_pod(self, action: DeletePod, by_name: Mapping[str, Obj]) -> list[str]:
        pod = by_name.get(action.pod)
        if pod is None:
            return []
        metadata = pod["metadata"]
        try:
            await self.client.delete(PODS, action.pod, metadata["namespace"], uid=metadata.get("uid"))
            log.info("deleted pod", pod=action.pod, reason=action.reason)
        except ApiError as exc:
            if exc.conflict:  # another incarnation by that name: nothing of ours to delete
                return []
            return [f"delete pod {action.pod}: {exc}"]
        return []

    async def _topology(self, action: TopologyAction, by_name: Mapping[str, Obj], admin: AdminClient) -> None:
        failpoints.hit(f"before:{type(action).__name__}")
        try:
            await self._topology_step(action, by_name, admin)
        except ValkeyAdminError as exc:
            raise ValkeyAdminError(f"{action!r}: {exc}") from exc
        log.info("cluster step", action=repr(action))
        failpoints.hit(f"after:{type(action).__name__}")

    async def _topology_step(
        self, action: TopologyAction, by_name: Mapping[str, Obj], admin: AdminClient
    ) -> None:
        def ip_of(pod: str) -> str:
            ip = ((by_name.get(pod) or {}).get("status") or {}).get("podIP")
            if not ip:
                raise ValkeyAdminError(f"pod {pod} has no IP")
            return str(ip)

        if isinstance(action, Forget):
            await self._forget(action, ip_of, admin)
            return
        async with admin.connect(ip_of(action.node)) as node:
            if isinstance(action, Meet):
                await node.cluster_meet(action.peer_ip)
            elif isinstance(action, AssignSlots):
                await node.cluster_addslotsrange([(item.start, item.end) for item in action.slots])
            elif isinstance(action, MigrateSlots):
                await node.cluster_migrateslots(
                    [(item.start, item.end) for item in action.slots], action.target_id
                )
            elif isinstance(action, Promote):
                await node.cluster_failover("TAKEOVER")
            else:
                await node.cluster_replicate(action.primary_id)

    async def _forget(self, action: Forget, ip_of: Callable[[str], str], admin: AdminClient) -> None:
        async def one(pod: str) -> None:
            async with admin.connect(ip_of(pod)) as node:
                await node.cluster_forget(action.node_id)

        results = await asyncio.gather(*(one(pod) for pod in action.on), return_exceptions=True)
        failures = [str(result) for result in results if isinstance(result, BaseException)]
        if failures:
            raise ValkeyAdminError(f"forget {action.node_id}: " + "; ".join(failures))
