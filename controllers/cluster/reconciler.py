"""ValkeyCluster reconciler: resolve, render, observe, plan, act, report (SPEC 1.4, SPEC 5).

One pass:
1. read the cluster from the shared cache; resolve its config chain and image
   (a missing config, broken chain or missing image: status says why, the
   cluster does not progress, nothing is created);
2. the internal credentials: read back from the owned Secret, generated once
   (created, never applied over an existing Secret); then the ACL users;
3. render what is desired: owned objects, pod template hash, runtime
   settings, users, podAnnotations;
4. observe: owned pods and owned objects from the cache, each Ready node
   probed (bounded), the pod writes the cache has not shown yet;
5. plan (pure: every decision is there), act (a dispatch in the plan's order
   under one deadline), finish the plan's status with what failed, write it
   only when it changed, record Events on transitions and problems, update
   metrics;
6. requeue after the plan's hint: waits are requeues, never sleeps.
The `valkey.gomomento.com/paused` annotation plans no action; status is still
observed and written.
"""

from __future__ import annotations

import datetime
import random
import time
from collections.abc import Callable

import attrs
import structlog

from controllers.cluster.actor import Actor
from controllers.cluster.desired import Desired, DesiredAcl, DesiredTls, DesiredUser, OwnedObject
from controllers.cluster.expectations import PodExpectations
from controllers.cluster.metrics import ClusterMetrics, cluster_metrics
from controllers.cluster.observe import TlsRecord
from controllers.cluster.observer import observe, owned_pods
from controllers.cluster.plan import finish, plan
from controllers.cluster.render import layout, names
from controllers.cluster.render.acl import AclError, internal_users, render_acl, role_commands
from controllers.cluster.render.config import runtime_settings
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.credentials import (
    DamagedSecret,
    InternalCredentials,
    generate_credentials,
    read_credentials,
)
from controllers.cluster.render.objects import (
    render_client_service,
    render_config_map,
    render_internal_secret,
    render_pdbs,
    render_service,
)
from controllers.cluster.render.placement import ZONE_KEY
from controllers.cluster.render.template import template_hash
from controllers.cluster.report import PlannedStatus, Reason
from controllers.cluster.rollout_gate import RolloutGate
from controllers.cluster.secrets import ReferencedSecrets
from controllers.cluster.tls import TlsMaterial, TlsProblem, read_tls_secret
from controllers.cluster.written import WrittenStatuses
from controllers.config.resolve import ResolutionFailure, resolve
from controllers.indexes import ReferenceIndex
from controllers.options import ControllerOptions
from controllers.status import status_patch
from valkey_operator.api.cluster import DEGRADED, PROGRESSING, READY, ClusterState, ValkeyCluster
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
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
)
from valkey_operator.core.rest import Obj
from valkey_operator.core.store import split_meta_namespace_key
from valkey_operator.valkey.admin import AdminClient, Credentials

log = structlog.get_logger(__name__)

EVENT_REASONS = frozenset(
    {
        Reason.DATA_LOST,
        Reason.MIGRATION_FAILED,
        Reason.PROMOTING_REPLICA,
        Reason.UNKNOWN_COMMAND,
        Reason.CONFIG_REJECTED,
        Reason.ACL_REJECTED,
        Reason.ACTION_FAILED,
        Reason.FAILOVER_FAILED,
        Reason.PODS_UNSCHEDULABLE,
        Reason.CERTIFICATE_EXPIRING,
        Reason.TLS_REJECTED,
    }
)
"""Findings that also become a Warning Event when they first show up."""

CONTROLLER_NAME = "valkeycluster"
PODS_BY_CLUSTER = "pods-by-valkeycluster"
TLS_SECRET_INVALID = "TlsSecretInvalid"
REQUEUE_BLOCKED = 60.0
"""A blocked cluster (missing config/image/role, damaged Secret) waits for a watch event."""

CachedLookup = Callable[[Resource, str, str], Obj | None]
"""(resource, namespace, name) -> the cached object, or None."""

_RNG = random.SystemRandom()


def pod_cluster_key(pod: Obj) -> list[str]:
    metadata = pod.get("metadata", {})
    cluster = (metadata.get("labels") or {}).get(names.CLUSTER_LABEL)
    return [f"{metadata.get('namespace', '')}/{cluster}"] if cluster else []


def endpoint(cluster: str, namespace: str, domain: str) -> str:
    """The client Service's name: it resolves to serving members only (membership.py)."""
    return f"{names.client_service_name(cluster)}.{namespace}.svc.{domain}:{layout.VALKEY_PORT}"


def planned_status(
    current: Obj, generation: int | None, status: PlannedStatus, endpoint_text: str, now: str = ""
) -> Obj:
    """The status to store for a planned pass (pure); conditions keep their transition times, a
    rolling update its start time (`now`, RFC 3339, when it begins)."""
    conditions = current.get("conditions")
    for condition in status.conditions:
        conditions = set_condition(
            conditions, condition.type, condition.status, condition.reason, condition.message, generation
        )
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
    if status.current_image:
        result["currentImage"] = status.current_image
    if status.config_hash:
        result["configHash"] = status.config_hash
    if status.rollout is not None:
        progress = status.rollout
        result["rollout"] = {
            "shardsUpdated": progress.shards_updated,
            "shards": progress.shards,
            "shard": progress.shard,
            "step": progress.step,
            "startedAt": (current.get("rollout") or {}).get("startedAt") or now,
        }
    if status.max_primaries_per_node is not None:
        result["maxPrimariesPerNode"] = status.max_primaries_per_node
    if status.tls is not None:
        tls = {"secretHash": status.tls.secret_hash, "changedAt": status.tls.changed_at}
        if status.tls.not_after is not None:
            tls["notAfter"] = status.tls.not_after
        result["tls"] = tls
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
        if key
        in {
            "shards",
            "readyShards",
            "readyNodes",
            "nodes",
            "currentImage",
            "configHash",
            "rollout",
            "tls",
            "maxPrimariesPerNode",
        }
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
        options: ControllerOptions,
        secrets: ReferencedSecrets,
        zone_of: Callable[[str], str | None] = lambda _node: None,
    ) -> None:
        self.client = client
        self.index = index
        self.events = events
        self.metrics = metrics
        self.cached = cached
        self.pods_of = pods_of
        self.options = options
        self.secrets = secrets
        self.zone_of = zone_of
        self.expectations = PodExpectations()
        self.written = WrittenStatuses()
        self.rollouts = RolloutGate(options.max_concurrent_rollouts, index.clusters_rolling)

    async def reconcile(self, request: Request) -> Result:
        started = time.monotonic()
        # The controller's own (namespace-scoped) informer: the one whose event queued this request,
        # so the pass never reads an older copy than the event it reacts to.
        obj = self.cached(VALKEY_CLUSTERS, request.namespace, request.name)
        if obj is None:
            self.metrics.forget_cluster(request.namespace, request.name)
            self.expectations.forget(str(request))
            self.rollouts.forget(str(request))
            self.written.forget(str(request))
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
        key = f"{namespace}/{name}"
        current = self.written.recorded(key, obj)
        endpoint_text = endpoint(name, namespace, self.options.cluster_domain)
        paused = meta.annotations.get(PAUSED_ANNOTATION, "").lower() == "true"

        resolved = resolve(cluster.spec.config_ref, self.index.config, self.index.image)
        if isinstance(resolved, ResolutionFailure):
            return await self._blocked(obj, current, resolved.reason, resolved.message)
        ctx = RenderContext(
            cluster=cluster, config=resolved, default_zone_spread=self.options.default_zone_spread
        )
        tls: TlsMaterial | None = None
        if ctx.tls_secret is not None:
            checked = read_tls_secret(
                await self.secrets.get(namespace, ctx.tls_secret), ctx.tls_secret, time.time()
            )
            if isinstance(checked, TlsProblem):
                return await self._blocked(obj, current, TLS_SECRET_INVALID, checked.message)
            tls = checked

        credentials = await self._credentials(ctx, create=not paused)
        if isinstance(credentials, DamagedSecret):
            return await self._blocked(obj, current, "InternalSecretDamaged", credentials.message)

        admin: AdminClient | None = None
        acl = DesiredAcl()
        objects = [
            OwnedObject(SERVICES, render_service(ctx)),
            OwnedObject(SERVICES, render_client_service(ctx)),
            OwnedObject(CONFIG_MAPS, render_config_map(ctx)),
            *(OwnedObject(POD_DISRUPTION_BUDGETS, pdb) for pdb in render_pdbs(ctx)),
        ]
        if credentials is not None:
            rendered = render_acl(cluster.spec.acl, self._role, credentials)
            if isinstance(rendered, AclError):
                return await self._blocked(obj, current, rendered.reason, rendered.message)
            internal = internal_users(credentials)
            acl = DesiredAcl(
                internal=internal,
                users=tuple(
                    DesiredUser(user, role_commands(spec_user, self._role))
                    for user, spec_user in zip(rendered.users[len(internal) :], cluster.spec.acl, strict=True)
                ),
                secret=names.secret_name(name),
                key=layout.ACL_KEY,
            )
            objects.insert(0, OwnedObject(SECRETS, render_internal_secret(ctx, credentials, rendered)))
            admin = self._admin(credentials, tls)

        pods = owned_pods(self.pods_of(namespace, name), name, meta.uid or "")
        template = template_hash(ctx)
        recorded = ClusterState(current["state"]) if current.get("state") in set(ClusterState) else None
        commands = sorted({command for user in acl.users for _, command in user.commands})
        observed = await observe(pods, admin, recorded, commands=commands)
        observation = attrs.evolve(
            observed.observation,
            objects={
                owned.key: self.cached(owned.resource, namespace, owned.body["metadata"]["name"])
                for owned in objects
            },
            awaiting=self.expectations.awaiting(key, pods),
            may_roll=self.rollouts.may_roll(key, _any_outdated(pods, template)),
            recorded_config_hash=current.get("configHash"),
            recorded_image=current.get("currentImage"),
            recorded_tls=_tls_record(current.get("tls")),
            node_zones=self._zones(pods),
        )
        desired = Desired.of(
            cluster,
            template_hash=template,
            image=ctx.config.image.reference,
            config_hash=resolved.settings_hash,
            runtime=runtime_settings(ctx.config),
            acl=acl,
            objects=tuple(objects),
            tls=DesiredTls(
                material=tls,
                sync_delay=self.options.secret_sync_seconds,
                expiry_warning=self.options.tls_expiry_warning_days * 86400.0,
            )
            if tls is not None
            else None,
        )
        planned = plan(observation, desired)
        if planned.actions:
            outcome = await Actor(self.client, ctx, pods, admin).run(planned.actions)
            self.metrics.record_failovers(namespace, name, planned.actions, outcome.failures)
            self.expectations.expect(
                key, created=outcome.created, deleted=outcome.deleted, annotated=outcome.annotated
            )
            planned = finish(planned, outcome.failures)
            if outcome.failures:
                log.warning(
                    "cluster actions failed", cluster=key, failures=[f.message for f in outcome.failures]
                )

        now = datetime.datetime.now(datetime.UTC)
        status = planned_status(
            current, meta.generation, planned.status, endpoint_text, now.strftime("%Y-%m-%dT%H:%M:%SZ")
        )
        await self._write_status(obj, current, status)
        await self._record_transition(obj, current, status, planned.status)
        await self._record_rollout(obj, current, status, now)
        self.metrics.record_pass(namespace, name, planned.status, observation, observed.extras)
        await self._record_problems(obj, current, planned.status)
        return Result(requeue_after=planned.requeue_after)

    # --- pieces ---

    def _zones(self, pods: list[Obj]) -> dict[str, str]:
        zones = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            zone = self.zone_of(node) if node else None
            if node and zone:
                zones[node] = zone
        return zones

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

    def _admin(self, credentials: InternalCredentials, tls: TlsMaterial | None) -> AdminClient:
        return AdminClient(
            credentials=Credentials(username=ADMIN_USER, password=credentials.admin_password),
            ca_pem=tls.ca_pem if tls is not None else None,  # a CA bundle: every CA in it is trusted
            allowed_networks=self.options.node_networks,
        )

    async def _blocked(self, obj: Obj, current: Obj, reason: str, message: str) -> Result:
        meta = obj["metadata"]
        status = blocked_status(
            current,
            meta.get("generation"),
            reason,
            message,
            endpoint(meta["name"], meta["namespace"], self.options.cluster_domain),
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
            stored = await self.client.patch_status(VALKEY_CLUSTERS, meta["name"], patch, meta["namespace"])
        except ApiError as exc:
            if exc.not_found:
                return
            raise
        self.written.wrote(_key(obj), obj, stored)

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
            if finding.reason is Reason.FAILOVER_FAILED:  # the message names the attempt: once each
                meta = obj["metadata"]
                self.metrics.failover_timeouts.labels(namespace=meta["namespace"], cluster=meta["name"]).inc()
            await self.events.event(obj, WARNING, finding.reason, finding.message)

    async def _record_rollout(self, obj: Obj, current: Obj, status: Obj, now: datetime.datetime) -> None:
        """Events and metrics of a rolling update, from the rollout progress before and after the pass."""
        before, after = current.get("rollout"), status.get("rollout")
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        if before is None and after is not None:
            self.metrics.rollouts_started.labels(namespace=namespace, cluster=name).inc()
            await self.events.event(
                obj,
                NORMAL,
                "RolloutStarted",
                f"rolling {after['shards'] - after['shardsUpdated']} shard(s) onto a new pod template, "
                f"shard by shard",
            )
        elif before is not None and after is not None and after["shardsUpdated"] > before["shardsUpdated"]:
            await self.events.event(
                obj,
                NORMAL,
                "ShardUpdated",
                f"{after['shardsUpdated']} of {after['shards']} shard(s) run the new pod template",
            )
        if before is not None and status.get("state") == ClusterState.FAILED.value != current.get("state"):
            self.metrics.rollouts_failed.labels(namespace=namespace, cluster=name).inc()
        if before is not None and after is None:
            self.metrics.rollouts_finished.labels(namespace=namespace, cluster=name).inc()
            started = _parse_time(before.get("startedAt"))
            if started is not None:
                self.metrics.rollout_seconds.labels(namespace=namespace, cluster=name).observe(
                    (now - started).total_seconds()
                )
            await self.events.event(
                obj,
                NORMAL,
                "RolloutFinished",
                f"every pod runs the new pod template ({status.get('currentImage')})",
            )

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


def _any_outdated(pods: list[Obj], template: str) -> bool:
    return any(
        (pod["metadata"].get("labels") or {}).get(names.TEMPLATE_HASH_LABEL) != template
        and "deletionTimestamp" not in pod["metadata"]
        for pod in pods
    )


def _parse_time(text: str | None) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat((text or "").replace("Z", "+00:00"))
    except ValueError:
        return None


def _tls_record(recorded: Obj | None) -> TlsRecord | None:
    changed = _parse_time((recorded or {}).get("changedAt"))
    if recorded is None or changed is None or not recorded.get("secretHash"):
        return None
    return TlsRecord(secret_hash=recorded["secretHash"], changed_at=changed.timestamp())


def _key(obj: Obj) -> str:
    return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"


def setup(manager: Manager, index: ReferenceIndex, workers: int, options: ControllerOptions) -> Controller:
    """Reconcile clusters on their own changes, their owned objects', and their configs', images', roles'."""
    pods = manager.informer(PODS)
    pods.add_indexers({PODS_BY_CLUSTER: pod_cluster_key})

    def cached(resource: Resource, namespace: str, name: str) -> Obj | None:
        return manager.cache.get(resource, name, namespace)

    def pods_of(namespace: str, cluster: str) -> list[Obj]:
        return manager.cache.by_index(PODS, PODS_BY_CLUSTER, f"{namespace}/{cluster}")

    def requests(keys: list[str]) -> list[Request]:
        found = []
        for key in sorted(set(keys)):
            namespace, name = split_meta_namespace_key(key)
            if not manager.in_scope(namespace or ""):
                continue
            found.append(Request(name, namespace or ""))
        return found

    def clusters_of_config(config: Obj) -> list[Request]:
        return requests(index.clusters_through_configs([config["metadata"]["name"]]))

    def clusters_of_image(image: Obj) -> list[Request]:
        return requests(index.clusters_through_image(image["metadata"]["name"]))

    def clusters_of_role(role: Obj) -> list[Request]:
        return requests(index.clusters_using_role(role["metadata"]["name"]))

    def clusters_of_secret(secret: Obj) -> list[Request]:
        meta = secret["metadata"]
        return requests(index.clusters_using_tls_secret(meta.get("namespace", ""), meta["name"]))

    def secret_meta(namespace: str, name: str) -> Obj | None:
        return manager.cache.get(SECRETS, name, namespace, metadata_only=True)

    manager.informer(NODES, metadata_only=True)  # zones of the nodes pods run on

    def zone_of(node: str) -> str | None:
        found = manager.cache.get(NODES, node, metadata_only=True)
        return ((found or {}).get("metadata", {}).get("labels") or {}).get(ZONE_KEY)

    metrics = cluster_metrics(manager.registry)
    # Every replica exports its warning window: ValkeyCertificateExpiringSoon compares with it.
    metrics.tls_expiry_warning.set(options.tls_expiry_warning_days * 86400.0)
    reconciler = ClusterReconciler(
        manager.client,
        index,
        manager.event_recorder(CONTROLLER_NAME),
        metrics,
        cached,
        pods_of,
        options=options,
        secrets=ReferencedSecrets(manager.client, secret_meta),
        zone_of=zone_of,
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
        .watches(SECRETS, clusters_of_secret, metadata_only=True)
        .with_workers(workers)
        .complete(reconciler)
    )
