"""ValkeyCluster reconciler: resolve, render, observe, plan, act, report (SPEC 1.4, SPEC 5).

One pass:
1. read the cluster from the shared cache; resolve its config chain and image
   (a missing config, broken chain or missing image: status says why, the
   cluster does not progress, nothing is created);
2. the internal credentials: read back from the owned Secret, generated once
   (created, never applied over an existing Secret); then the ACL;
3. server-side apply the owned Service, ConfigMap, Secret and PDBs when they differ;
4. observe: owned pods from the cache, each Ready node probed (bounded);
5. plan (pure), act (thin, idempotent), write status only when it changed,
   record Events on transitions and failures, update metrics;
6. requeue after the plan's hint: waits are requeues, never sleeps.
The `valkey.gomomento.com/paused` annotation skips steps 3 and 5's acting;
status is still observed and written.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import random
import time
from collections.abc import Callable

import attrs
import structlog

from controllers.cluster.actor import Actor, CachedLookup
from controllers.cluster.failures import CrashLoops, crash_loops
from controllers.cluster.metrics import ClusterMetrics, cluster_metrics
from controllers.cluster.observe import Desired
from controllers.cluster.observer import observe, owned_pods
from controllers.cluster.plan import CreatePod, Plan, PlannedCondition, PlannedStatus, Reason, plan
from controllers.cluster.render import layout, names
from controllers.cluster.render.acl import AclError, RenderedAcl, render_acl
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.credentials import (
    DamagedSecret,
    InternalCredentials,
    generate_credentials,
    read_credentials,
)
from controllers.cluster.render.objects import render_internal_secret
from controllers.cluster.render.template import template_hash
from controllers.config.resolve import ResolutionFailure, resolve
from controllers.indexes import ReferenceIndex
from controllers.status import status_patch
from valkey_operator.api.cluster import DEGRADED, PROGRESSING, READY, ClusterState, ValkeyCluster, ZoneSpread
from valkey_operator.api.resources import (
    ADMIN_USER,
    API_VERSION,
    PAUSED_ANNOTATION,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
)
from valkey_operator.api.role import ValkeyRole
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import ApiError, Client
from valkey_operator.core.conditions import find_condition, set_condition
from valkey_operator.core.controller import Controller
from valkey_operator.core.events import NORMAL, WARNING, EventRecorder
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.resource import (
    CONFIG_MAPS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
)
from valkey_operator.core.rest import Obj
from valkey_operator.core.store import split_meta_namespace_key
from valkey_operator.valkey.admin import AdminClient, Credentials, Network, allowed_networks_from_env

log = structlog.get_logger(__name__)

EVENT_REASONS = frozenset({Reason.DATA_LOST, Reason.MIGRATION_FAILED, Reason.PROMOTING_REPLICA})
"""Findings that also become a Warning Event when they first show up."""

CONTROLLER_NAME = "valkeycluster"
PODS_BY_CLUSTER = "pods-by-valkeycluster"
PODS_FAILING = "PodsFailing"
REQUEUE_BLOCKED = 60.0
"""A blocked cluster (missing config/image/role, damaged Secret) waits for a watch event."""

_RNG = random.SystemRandom()


def pod_cluster_key(pod: Obj) -> list[str]:
    metadata = pod.get("metadata", {})
    cluster = (metadata.get("labels") or {}).get(names.CLUSTER_LABEL)
    return [f"{metadata.get('namespace', '')}/{cluster}"] if cluster else []


def endpoint(cluster: str, namespace: str) -> str:
    return f"{cluster}.{namespace}.svc.cluster.local:{layout.VALKEY_PORT}"


def planned_status(
    current: Obj,
    generation: int | None,
    status: PlannedStatus,
    endpoint_text: str,
    image: str,
    config_hash: str,
) -> Obj:
    """The status to store for a planned pass (pure); conditions keep their transition times."""
    conditions = current.get("conditions")
    for condition in status.conditions:
        conditions = set_condition(
            conditions, condition.type, condition.status, condition.reason, condition.message, generation
        )
    settled = not any(finding.reason is Reason.UPDATE_PENDING for finding in status.findings)
    result: Obj = {
        "state": status.state.value,
        "message": status.message,
        "endpoint": endpoint_text,
        "observedGeneration": generation,
        "shards": status.shards,
        "readyShards": status.ready_shards,
        "readyNodes": status.ready_nodes,
        "nodes": [node.to_dict() for node in status.nodes],
        "conditions": conditions,
    }
    current_image = image if settled else current.get("currentImage")
    current_hash = config_hash if settled else current.get("configHash")
    if current_image:
        result["currentImage"] = current_image
    if current_hash:
        result["configHash"] = current_hash
    return result


def blocked_status(
    current: Obj, generation: int | None, reason: str, message: str, endpoint_text: str
) -> Obj:
    """The cluster cannot progress (nothing is created or changed): say why (pure)."""
    recorded = current.get("state") or ClusterState.CREATING.value
    conditions = current.get("conditions")
    conditions = set_condition(conditions, READY, False, reason, message, generation)
    conditions = set_condition(conditions, PROGRESSING, False, reason, message, generation)
    conditions = set_condition(conditions, DEGRADED, True, reason, message, generation)
    result = {
        key: value
        for key, value in current.items()
        if key in {"shards", "readyShards", "readyNodes", "nodes", "currentImage", "configHash"}
    }
    result.update(
        {
            "state": recorded,
            "message": f"{reason}: {message}",
            "endpoint": endpoint_text,
            "observedGeneration": generation,
            "conditions": conditions,
        }
    )
    return result


def requeue_after(planned: Plan, loops: CrashLoops) -> float:
    """The plan's hint; a shard whose pods keep failing waits until its failures leave the window."""
    requeue = planned.requeue_after if planned.requeue_after is not None else REQUEUE_BLOCKED
    if loops.retry_after is None:
        return requeue
    only_blocked = all(
        isinstance(action, CreatePod) and action.shard in loops.blocked for action in planned.actions
    )
    retry = max(loops.retry_after, 1.0)
    return retry if only_blocked else min(requeue, retry)


def crash_loop_status(status: PlannedStatus, message: str) -> PlannedStatus:
    """The plan's status, Failed because pods keep failing before they serve (pure)."""
    conditions = tuple(
        PlannedCondition(condition.type, condition.type == DEGRADED, PODS_FAILING, message)
        for condition in status.conditions
    )
    return attrs.evolve(status, state=ClusterState.FAILED, message=message, conditions=conditions)


class ClusterReconciler:
    def __init__(
        self,
        client: Client,
        index: ReferenceIndex,
        events: EventRecorder,
        metrics: ClusterMetrics,
        cached: CachedLookup,
        pods_of: Callable[[str, str], list[Obj]],
        *,
        allowed_networks: tuple[Network, ...] | None = None,
        default_zone_spread: ZoneSpread = ZoneSpread.BEST_EFFORT,
    ) -> None:
        self.client = client
        self.index = index
        self.events = events
        self.metrics = metrics
        self.cached = cached
        self.pods_of = pods_of
        self.actor = Actor(client, cached)
        self.allowed_networks = allowed_networks or allowed_networks_from_env()
        self.default_zone_spread = default_zone_spread

    async def reconcile(self, request: Request) -> Result:
        started = time.monotonic()
        # The controller's own (namespace-scoped) informer: the one whose event queued this request,
        # so the pass never reads an older copy than the event it reacts to.
        obj = self.cached(VALKEY_CLUSTERS, request.namespace, request.name)
        if obj is None:
            self.metrics.forget_cluster(request.namespace, request.name)
            return Result()
        if obj["metadata"].get("deletionTimestamp"):
            return Result()  # garbage collection removes what it owns
        obj = {**obj, "apiVersion": API_VERSION, "kind": VALKEY_CLUSTERS.kind}
        cluster = ValkeyCluster.from_dict(obj)
        result = await self._reconcile(obj, cluster)
        log.debug("reconciled", cluster=str(request), seconds=round(time.monotonic() - started, 3))
        return result

    async def _reconcile(self, obj: Obj, cluster: ValkeyCluster) -> Result:
        meta = cluster.metadata
        namespace, name = meta.namespace or "", meta.name
        current: Obj = obj.get("status") or {}
        generation = meta.generation
        endpoint_text = endpoint(name, namespace)
        paused = meta.annotations.get(PAUSED_ANNOTATION, "").lower() == "true"

        resolved = resolve(cluster.spec.config_ref, self.index.config, self.index.image)
        if isinstance(resolved, ResolutionFailure):
            return await self._blocked(obj, current, resolved.reason, resolved.message)
        ctx = RenderContext(cluster=cluster, config=resolved, default_zone_spread=self.default_zone_spread)

        credentials = await self._credentials(ctx, create=not paused)
        if isinstance(credentials, DamagedSecret):
            return await self._blocked(obj, current, "InternalSecretDamaged", credentials.message)

        errors: list[str] = []
        admin: AdminClient | None = None
        acl: RenderedAcl | None = None
        if credentials is not None:
            rendered = render_acl(cluster.spec.acl, self._role, credentials)
            if isinstance(rendered, AclError):
                return await self._blocked(obj, current, rendered.reason, rendered.message)
            acl = rendered
            if not paused:
                try:
                    await self.actor.ensure_objects(ctx, render_internal_secret(ctx, credentials, acl))
                except ApiError as exc:
                    errors.append(f"applying owned objects: {exc}")
            admin = self._admin(ctx, credentials)

        pods = owned_pods(self.pods_of(namespace, name), name, meta.uid or "")
        recorded = ClusterState(current["state"]) if current.get("state") in set(ClusterState) else None
        observed = await observe(pods, admin, recorded)
        desired = Desired.of(cluster, template_hash=template_hash(ctx), image=ctx.config.image.reference)
        planned = plan(observed.observation, desired)
        loops = crash_loops(pods, desired.template_hash, datetime.datetime.now(datetime.UTC))
        if not paused:
            errors += await self.actor.act(
                planned,
                ctx,
                pods,
                admin,
                blocked_shards=loops.blocked.keys(),
                acl_fingerprint=acl.fingerprint if acl is not None else None,
            )
            if admin is not None and acl is not None:
                errors += await self.actor.sync_acl(pods, observed.observation.nodes, acl, admin)
            errors += await self.actor.prune(namespace, loops.prune)
        planned_view = planned.status
        if loops.blocked:
            planned_view = crash_loop_status(planned_view, loops.message(ctx.config.image.reference))

        image = ctx.config.image.reference
        status = planned_status(
            current, generation, planned_view, endpoint_text, image, resolved.settings_hash
        )
        await self._write_status(obj, current, status)
        await self._record_transition(obj, current, status, planned_view)
        self.metrics.record_state(namespace, name, planned_view.state)
        self.metrics.record_nodes(namespace, name, observed.observation, observed.extras)
        self.metrics.record_migrations(namespace, name, observed.observation)
        await self._record_problems(obj, current, planned_view)
        if errors:
            log.warning("cluster actions failed", cluster=f"{namespace}/{name}", errors=errors)
            await self.events.event(obj, WARNING, "ActionFailed", "; ".join(errors)[:1000])
        return Result(requeue_after=requeue_after(planned, loops))

    # --- pieces ---

    def _role(self, name: str) -> ValkeyRole | None:
        found = self.index.role(name)
        return ValkeyRole.from_dict(found) if found is not None else None

    async def _credentials(
        self, ctx: RenderContext, *, create: bool
    ) -> InternalCredentials | DamagedSecret | None:
        """The internal passwords: from the Secret (cache, then the API), else generated and created once."""
        secret_name = names.secret_name(ctx.name)
        secret = self.cached(SECRETS, ctx.namespace, secret_name)
        if secret is None:
            secret = await self.client.get_or_none(SECRETS, secret_name, ctx.namespace)
        if secret is None and create:
            fresh = generate_credentials(_RNG)
            acl = render_acl((), lambda _role: None, fresh)
            assert not isinstance(acl, AclError)
            try:
                secret = await self.client.create(SECRETS, render_internal_secret(ctx, fresh, acl))
            except ApiError as exc:
                if not exc.conflict and exc.status != 409:
                    raise
                secret = await self.client.get_or_none(SECRETS, secret_name, ctx.namespace)
        return read_credentials(secret)

    def _admin(self, ctx: RenderContext, credentials: InternalCredentials) -> AdminClient | None:
        ca_pem: str | None = None
        if ctx.tls_secret is not None:
            tls = self.cached(SECRETS, ctx.namespace, ctx.tls_secret)
            data = (tls or {}).get("data") or {}
            try:
                ca_pem = base64.b64decode(data[layout.TLS_CA_KEY]).decode()
            except (KeyError, binascii.Error, UnicodeDecodeError):
                return None  # without the CA no node can be asked; they show as not probed
        return AdminClient(
            credentials=Credentials(username=ADMIN_USER, password=credentials.admin_password),
            ca_pem=ca_pem,
            allowed_networks=self.allowed_networks,
        )

    async def _blocked(self, obj: Obj, current: Obj, reason: str, message: str) -> Result:
        meta = obj["metadata"]
        status = blocked_status(
            current, meta.get("generation"), reason, message, endpoint(meta["name"], meta["namespace"])
        )
        await self._write_status(obj, current, status)
        before = find_condition(current.get("conditions"), PROGRESSING)
        if before is None or before.get("reason") != reason or before.get("message") != message:
            await self.events.event(obj, WARNING, reason, message)
        if status.get("state"):
            self.metrics.record_state(meta["namespace"], meta["name"], ClusterState(status["state"]))
        return Result(requeue_after=REQUEUE_BLOCKED)

    async def _write_status(self, obj: Obj, current: Obj, status: Obj) -> None:
        patch = status_patch(current, status)
        if patch is None:
            return
        meta = obj["metadata"]
        try:
            await self.client.patch_status(VALKEY_CLUSTERS, meta["name"], patch, meta["namespace"])
        except ApiError as exc:
            if exc.not_found:
                return
            raise

    async def _record_problems(self, obj: Obj, current: Obj, planned: PlannedStatus) -> None:
        """A Warning Event when a repair or migration problem appears or changes (lost data, a failed
        migration, a takeover), read from the Degraded condition before and after the pass."""
        before = find_condition(current.get("conditions"), DEGRADED) or {}
        for finding in planned.findings:
            if finding.reason not in EVENT_REASONS:
                continue
            if before.get("status") == "True" and finding.message in str(before.get("message", "")):
                continue  # already reported while the condition carried it
            log.warning("cluster problem", cluster=_key(obj), reason=finding.reason, message=finding.message)
            await self.events.event(obj, WARNING, finding.reason, finding.message)

    async def _record_transition(self, obj: Obj, current: Obj, status: Obj, planned: PlannedStatus) -> None:
        before, after = current.get("state"), status["state"]
        if before == after:
            return
        meta = obj["metadata"]
        if planned.state is ClusterState.FAILED:
            reason = planned.condition(READY).reason
            if reason == Reason.VERSION_BELOW_FLOOR:
                self.metrics.record_rejection(meta["namespace"], meta["name"])
            await self.events.event(obj, WARNING, reason, planned.message)
        elif planned.state is ClusterState.ACTIVE:
            await self.events.event(obj, NORMAL, "Active", planned.message)
        else:
            await self.events.event(obj, NORMAL, after, planned.message)


def _key(obj: Obj) -> str:
    return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"


def setup(
    manager: Manager,
    index: ReferenceIndex,
    workers: int,
    *,
    default_zone_spread: ZoneSpread = ZoneSpread.BEST_EFFORT,
    allowed_networks: tuple[Network, ...] | None = None,
) -> Controller:
    """Reconcile clusters on their own changes, their owned objects', and their configs', images', roles'."""
    pods = manager.informer(PODS)
    pods.add_indexers({PODS_BY_CLUSTER: pod_cluster_key})

    def cached(resource: Resource, namespace: str, name: str) -> Obj | None:
        return manager.informer(resource).store.get_by_key(f"{namespace}/{name}")

    def pods_of(namespace: str, cluster: str) -> list[Obj]:
        return pods.store.by_index(PODS_BY_CLUSTER, f"{namespace}/{cluster}")

    def requests(keys: list[str]) -> list[Request]:
        found = []
        for key in sorted(set(keys)):
            namespace, name = split_meta_namespace_key(key)
            if manager.namespace and namespace != manager.namespace:
                continue
            found.append(Request(name, namespace or ""))
        return found

    def clusters_of_configs(configs: list[str]) -> list[Request]:
        every = {*configs, *index.descendants(configs)}
        return requests([key for config in every for key in index.clusters_using_config(config)])

    def clusters_of_config(config: Obj) -> list[Request]:
        return clusters_of_configs([config["metadata"]["name"]])

    def clusters_of_image(image: Obj) -> list[Request]:
        return clusters_of_configs(index.configs_using_image(image["metadata"]["name"]))

    def clusters_of_role(role: Obj) -> list[Request]:
        return requests(index.clusters_using_role(role["metadata"]["name"]))

    reconciler = ClusterReconciler(
        manager.client,
        index,
        manager.event_recorder(CONTROLLER_NAME),
        cluster_metrics(manager.registry),
        cached,
        pods_of,
        allowed_networks=allowed_networks,
        default_zone_spread=default_zone_spread,
    )
    return (
        build_controller(manager, CONTROLLER_NAME)
        .for_(VALKEY_CLUSTERS)
        .owns(PODS)
        .owns(SERVICES)
        .owns(CONFIG_MAPS)
        .owns(SECRETS)
        .owns(POD_DISRUPTION_BUDGETS)
        .watches(VALKEY_CONFIGS, clusters_of_config)
        .watches(VALKEY_IMAGES, clusters_of_image)
        .watches(VALKEY_ROLES, clusters_of_role)
        .with_workers(workers)
        .complete(reconciler)
    )
