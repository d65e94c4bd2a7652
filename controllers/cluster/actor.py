"""Carry out a Plan: a dispatch over its actions, in the plan's order, under one deadline (SPEC 5).

Thin and idempotent; nothing here decides (decide() did). Per action:
- CreateObject: a create (never an apply), so an existing internal Secret is
  never overwritten; a conflict is a failure the next pass reads back.
- ApplyObject: server-side apply of the rendered owned object.
- DeleteObject: an owned object the spec no longer asks for, uid as precondition.
- PatchPodMetadata: a merge patch of the listed annotations and labels, with the pod's uid
  as a precondition (another incarnation of the name is left alone); one
  `after` a reload is skipped when that reload failed this pass.
- ResizePod: a strategic-merge patch of the Valkey container's resources through the pods/resize
  subresource (the uid rides along; the subresource keeps only the resources of a patch).
- MarkMember: a merge patch of the member label (null removes it), uid as precondition.
- CreatePod: the body decide rendered, under the name it drew; a new data claim
  (persistence) is created first (a conflict: created by an earlier try).
- DeletePod / PruneFailedPod: with a uid precondition, so only the incarnation
  the plan saw goes; a planned DeletePod deletes the pod's data claim first.
- DeleteClaim / PatchClaim: a claim nobody needs goes (uid precondition); the
  node id its server reported and a larger size are merge-patched onto it.
- SetConfig: one CONFIG SET of every listed directive, as decided. An error
  answer is reported as such (`Failure.command_error`, Valkey's words);
  decision/refusals.py decides whether and what it refused, and the next pass's
  memory leaves the refused value out (or sends the directives one by one).
- SyncAcl: ACL SETUSER per listed user (a refused user does not stop the
  others), then one ACL DELUSER.
- Meet / AssignSlots / Replicate / MigrateSlots / Promote / Failover / Forget: one admin
  call each on the named node (Forget on every listed node at once, within the
  forget window). MIGRATESLOTS only starts a job; the next passes read its
  progress from CLUSTER GETSLOTMIGRATIONS.
Failpoints `before:<Action>` / `after:<Action>` (valkey_operator.failpoints)
let tests kill the process around each step.

Failures are collected and returned, never raised half-way: the next pass
re-observes and re-plans from whatever did happen. The whole dispatch has one
deadline (ACT_DEADLINE), so a node that swallows packets cannot hold a worker
for longer than that; what did not run by then is a failure of this pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager

import attrs
import structlog

from controllers.cluster.decision.actions import (
    Action,
    ApplyObject,
    AssignSlots,
    CreateObject,
    CreatePod,
    DeleteClaim,
    DeleteObject,
    DeletePod,
    Failover,
    Failure,
    Forget,
    MarkMember,
    Meet,
    MigrateSlots,
    PatchClaim,
    PatchPodMetadata,
    Promote,
    PruneFailedPod,
    ReloadTls,
    Replicate,
    ResizePod,
    SetConfig,
    SyncAcl,
    skipped,
)
from controllers.cluster.render.context import RenderContext
from controllers.shared import layout, names
from valkey_operator import failpoints
from valkey_operator.core.client import STRATEGIC_MERGE_PATCH, ApiError, Client
from valkey_operator.core.resource import PERSISTENT_VOLUME_CLAIMS, PODS
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient, NodeConnection, ValkeyAdminError, ValkeyCommandError

log = structlog.get_logger(__name__)

ACT_DEADLINE = 20.0
"""Seconds one pass may spend carrying out its plan (each Valkey call is also bounded on its own)."""


@attrs.frozen(kw_only=True)
class Outcome:
    failures: tuple[Failure, ...] = ()
    created: tuple[str, ...] = ()
    """Pods created, by name: the cache shows them a moment later."""
    deleted: tuple[str, ...] = ()
    """Pods whose deletion was requested."""
    annotated: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)
    """Pods patched, with the annotations they now carry."""


class Actor:
    """Carries out one pass's actions for one cluster (made per pass: it holds that pass's pods)."""

    def __init__(
        self, client: Client, ctx: RenderContext, pods: Sequence[Obj], admin: AdminClient | None
    ) -> None:
        self.client = client
        self.ctx = ctx
        self.pods = {pod["metadata"]["name"]: pod for pod in pods}
        self.admin = admin
        self.failures: list[Failure] = []
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.annotated: dict[str, dict[str, str]] = {}

    async def run(self, actions: Sequence[Action], deadline: float = ACT_DEADLINE) -> Outcome:
        done = 0
        try:
            async with asyncio.timeout(deadline):
                for action in actions:
                    await self._one(action)
                    done += 1
        except TimeoutError:
            for action in actions[done:]:
                self.failures.append(
                    Failure(action, f"{_describe(action)}: not carried out within {deadline}s")
                )
        return Outcome(
            failures=tuple(self.failures),
            created=tuple(self.created),
            deleted=tuple(self.deleted),
            annotated=self.annotated,
        )

    async def _one(self, action: Action) -> None:
        if skipped(action, self.failures):
            return  # what it records did not happen; that failure is reported
        name = type(action).__name__
        failpoints.hit(f"before:{name}")
        try:
            await self._dispatch(action)
        except (ApiError, ValkeyAdminError) as exc:
            status = exc.status if isinstance(exc, ApiError) else None
            self.failures.append(Failure(action, f"{_describe(action)}: {exc}", http_status=status))
            return
        failpoints.hit(f"after:{name}")

    async def _dispatch(self, action: Action) -> None:
        match action:
            case CreateObject():
                await self.client.create(action.object.resource, action.object.body)
                log.info("created owned object", object=action.object.key, cluster=self._key())
            case ApplyObject():
                await self.client.apply(action.object.resource, action.object.body)
                log.info("applied owned object", object=action.object.key, cluster=self._key())
            case DeleteObject():
                await self._delete_object(action)
            case PatchPodMetadata():
                metadata: Obj = {"uid": action.uid}
                if action.annotations:
                    metadata["annotations"] = dict(action.annotations)
                if action.labels:
                    metadata["labels"] = dict(action.labels)
                await self.client.patch(PODS, action.pod, {"metadata": metadata}, self.ctx.namespace)
                self.annotated.setdefault(action.pod, {}).update(action.annotations)
            case ResizePod():
                await self._resize(action)
            case MarkMember():
                label = names.MEMBER if action.member else None
                patch = {"metadata": {"uid": action.uid, "labels": {names.MEMBER_LABEL: label}}}
                await self.client.patch(PODS, action.pod, patch, self.ctx.namespace)
            case CreatePod():
                await self._create_pod(action)
            case DeletePod():
                if action.claim:
                    await self._delete_claim(action.claim, None)
                await self._delete_pod(action.pod, action.uid)
            case PruneFailedPod():
                await self._delete_pod(action.pod, action.uid)
            case DeleteClaim():
                await self._delete_claim(action.claim, action.uid)
            case PatchClaim():
                await self._patch_claim(action)
            case SetConfig():
                await self._set_config(action)
            case ReloadTls():
                await self._reload_tls(action)
            case SyncAcl():
                await self._sync_acl(action)
            case Forget():
                await self._forget(action)
            case _:
                async with self._connect(action.node) as node:
                    await _topology(node, action)
                log.info("cluster step", action=repr(action), cluster=self._key())

    def _key(self) -> str:
        return f"{self.ctx.namespace}/{self.ctx.name}"

    def _connect(self, pod: str) -> AbstractAsyncContextManager[NodeConnection]:
        if self.admin is None:
            raise ValkeyAdminError("no admin credentials to talk to the nodes with")
        ip = ((self.pods.get(pod) or {}).get("status") or {}).get("podIP")
        if not ip:
            raise ValkeyAdminError(f"pod {pod} has no IP")
        return self.admin.connect(str(ip))

    async def _create_pod(self, action: CreatePod) -> None:
        if action.claim_body is not None:
            try:
                await self.client.create(PERSISTENT_VOLUME_CLAIMS, action.claim_body)
            except ApiError as exc:
                if not exc.conflict:  # it exists: a retry of a pass that created it
                    raise
            log.info("created claim", claim=action.claim, shard=action.shard, cluster=self._key())
        self.created.append(action.name)  # even if the create fails half-way: the cache is then waited for
        await self.client.create(PODS, action.body)
        log.info("created pod", pod=action.name, shard=action.shard, cluster=self._key())

    async def _delete_pod(self, pod: str, uid: str) -> None:
        try:
            await self.client.delete(PODS, pod, self.ctx.namespace, uid=uid or None)
        except ApiError as exc:
            if exc.conflict:  # another incarnation by that name: nothing of ours to delete
                return
            raise
        self.deleted.append(pod)
        log.info("deleted pod", pod=pod, cluster=self._key())

    async def _resize(self, action: ResizePod) -> None:
        container = {"name": layout.CONTAINER_NAME, "resources": action.resources.to_json()}
        patch = {"metadata": {"uid": action.uid}, "spec": {"containers": [container]}}
        await self.client.patch(
            PODS,
            action.pod,
            patch,
            self.ctx.namespace,
            patch_type=STRATEGIC_MERGE_PATCH,
            subresource="resize",
        )
        resources = container["resources"]
        log.info("resized pod in place", pod=action.pod, resources=resources, cluster=self._key())

    async def _delete_object(self, action: DeleteObject) -> None:
        try:
            await self.client.delete(action.resource, action.name, self.ctx.namespace, uid=action.uid)
        except ApiError as exc:
            if exc.not_found or exc.conflict:  # gone already, or another object by that name
                return
            raise
        log.info("deleted owned object", object=action.key, cluster=self._key())

    async def _delete_claim(self, claim: str, uid: str | None) -> None:
        """Delete a data claim; the pvc-protection finalizer keeps it until no pod runs on it."""
        try:
            await self.client.delete(PERSISTENT_VOLUME_CLAIMS, claim, self.ctx.namespace, uid=uid or None)
        except ApiError as exc:
            if exc.not_found or exc.conflict:  # gone already, or another claim by that name
                return
            raise
        log.info("deleted claim", claim=claim, cluster=self._key())

    async def _patch_claim(self, action: PatchClaim) -> None:
        patch: Obj = {"metadata": {"uid": action.uid}}
        if action.annotations:
            patch["metadata"]["annotations"] = dict(action.annotations)
        if action.storage is not None:
            patch["spec"] = {"resources": {"requests": {"storage": action.storage}}}
        await self.client.patch(PERSISTENT_VOLUME_CLAIMS, action.claim, patch, self.ctx.namespace)

    async def _set_config(self, action: SetConfig) -> None:
        settings = dict(action.settings)
        async with self._connect(action.node) as node:
            try:
                await node.config_set(settings)
            except ValkeyCommandError as exc:
                self.failures.append(Failure(action, _valkey_message(str(exc)), command_error=True))
                return
        log.info("applied settings", pod=action.node, settings=sorted(settings), cluster=self._key())

    async def _reload_tls(self, action: ReloadTls) -> None:
        files = {
            "tls-cert-file": layout.TLS_CERT_FILE,
            "tls-key-file": layout.TLS_KEY_FILE,
            "tls-ca-cert-file": layout.TLS_CA_FILE,
        }
        async with self._connect(action.node) as node:
            try:
                await node.config_set(files)
            except ValkeyCommandError as exc:
                self.failures.append(Failure(action, _valkey_message(str(exc)), command_error=True))
                return
        log.info("reloaded TLS files", pod=action.node, confirmed=action.confirm, cluster=self._key())

    async def _sync_acl(self, action: SyncAcl) -> None:
        async with self._connect(action.node) as node:
            for user in action.set_users:
                try:
                    await node.acl_setuser(user.username, user.rules)
                except ValkeyCommandError as exc:
                    self.failures.append(
                        Failure(action, _valkey_message(str(exc)), command_error=True, user=user.username)
                    )
            if action.delete_users:
                await node.acl_deluser(*action.delete_users)
        log.info(
            "synced ACL",
            pod=action.node,
            set=[user.username for user in action.set_users],
            deleted=list(action.delete_users),
            cluster=self._key(),
        )

    async def _forget(self, action: Forget) -> None:
        async def one(pod: str) -> None:
            async with self._connect(pod) as node:
                await node.cluster_forget(action.node_id)

        results = await asyncio.gather(*(one(pod) for pod in action.on), return_exceptions=True)
        failures = [str(result) for result in results if isinstance(result, BaseException)]
        if failures:
            raise ValkeyAdminError("; ".join(failures))
        log.info("cluster step", action=repr(action), cluster=self._key())


async def _topology(node: NodeConnection, action: Action) -> None:
    match action:
        case Meet():
            await node.cluster_meet(action.peer_ip)
        case AssignSlots():
            await node.cluster_addslotsrange([(item.start, item.end) for item in action.slots])
        case MigrateSlots():
            await node.cluster_migrateslots(
                [(item.start, item.end) for item in action.slots], action.target_id
            )
        case Promote():
            await node.cluster_failover("TAKEOVER")
        case Failover():
            await node.cluster_failover()
        case Replicate():
            await node.cluster_replicate(action.primary_id)
        case _:
            raise TypeError(f"not a topology action: {action!r}")


def _valkey_message(text: str) -> str:
    """Valkey's own words from an error: the admin client prefixes the host and the command."""
    parts = text.split(": ", 2)
    return parts[-1] if len(parts) == 3 else text


def _describe(action: Action) -> str:
    match action:
        case ApplyObject():
            return f"apply {action.object.key}"
        case CreateObject():
            return f"create {action.object.key}"
        case DeleteObject():
            return f"delete {action.key}"
        case CreatePod():
            return f"create a pod for shard {action.shard}"
        case DeletePod() | PruneFailedPod() | PatchPodMetadata() | MarkMember() | ResizePod():
            return f"{type(action).__name__} {action.pod}"
        case DeleteClaim():
            return f"delete claim {action.claim}"
        case PatchClaim():
            grow = f" to {action.storage}" if action.storage else ""
            return f"patch claim {action.claim}{grow}"
        case Forget():
            return f"forget {action.node_id[:8]}"
        case _:
            return f"{type(action).__name__} on {action.node}"
