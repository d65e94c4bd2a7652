"""ValkeyCluster reconciler: gather facts, decide, act, write (SPEC 1.4, SPEC 5).

One pass:
1. gather (decide.Facts): the cluster from the shared cache and its recorded
   status; its config chain and image resolved; the TLS Secret checked against
   the pass's `now`; the internal Secret as read (with fresh passwords drawn in
   case it is missing); the users' password Secrets as read (a password drawn
   for each generated one that is missing); the ValkeyRoles spec.acl names; the owned pods and
   objects from the cache, each Ready node probed (bounded), the pod writes the
   cache has not shown yet, the CONFIG SETs the nodes refused before; the data
   claims (persistence: by the cluster label, owned or retained) and whether
   their StorageClasses allow expansion; the rollout slots held; a seed for new
   pod names. Gathering stops at a fact that blocks the cluster (it cannot render
   or connect without it);
2. decide (decide.py, pure: every decision is there): the actions, the whole
   status, the Events and the metric changes;
3. act: the actor carries the actions out in order under one deadline; the
   decision is then finished with what failed (`Decision.after`);
4. write the status when it changed, record the decided Events, apply the
   decided metric changes, and store the cluster's Memory the decision
   returned (decision/memory.py: the only state kept between passes);
5. requeue after the decided hint: waits are requeues, never sleeps.
The `valkey.gomomento.com/paused` annotation plans no action; status is still
observed and written.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

import attrs
import structlog

from controllers.cluster.actor import Actor
from controllers.cluster.archive_progress import ArchiveProgressReader
from controllers.cluster.decision.archive import ArchiveProgress
from controllers.cluster.decision.decide import Decision, Facts, RolloutSlots, run_pass
from controllers.cluster.decision.desired import object_key
from controllers.cluster.decision.memory import Memory, recorded_status, slot_holders
from controllers.cluster.decision.owned import owned_names, written_names
from controllers.cluster.decision.restore import RestoreHeld, RestoreSource
from controllers.cluster.gather import gather
from controllers.cluster.metrics import ClusterMetrics, cluster_metrics
from controllers.cluster.render.placement import ZONE_KEY
from controllers.cluster.render.user_passwords import password_secret
from controllers.cluster.restore_source import RestoreSources
from controllers.cluster.secrets import ReferencedSecrets
from controllers.cluster.valkey_exporter import NodeTarget, ValkeyExporter, valkey_exporter
from controllers.indexes import ReferenceIndex
from controllers.options import ControllerOptions
from controllers.shared import names
from controllers.shared.backups import BackupFacts, newest_completed
from controllers.shared.config_resolve import resolve
from controllers.shared.credentials import (
    DamagedSecret,
    InternalCredentials,
    generate_credentials,
    generate_password,
    read_credentials,
)
from controllers.shared.observation import ClaimObservation, Observation
from controllers.shared.pod_index import PODS_BY_CLUSTER, CachedLookup, pod_cluster_key
from controllers.shared.probe import NodeExtras, observe, owned_pods, should_probe
from controllers.shared.tls import TlsMaterial, TlsProblem, read_tls_secret
from controllers.status import status_patch
from valkey_operator.api.backup import BackupPhase, Restore
from valkey_operator.api.cluster import ValkeyCluster, ValkeyClusterStatus, presents_certificate
from valkey_operator.api.resources import (
    ADMIN_USER,
    API_VERSION,
    VALKEY_BACKUPS,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
)
from valkey_operator.api.role import ValkeyRole
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import ApiError, Client
from valkey_operator.core.controller import Controller
from valkey_operator.core.events import WARNING, EventRecorder
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.resource import (
    CONFIG_MAPS,
    NETWORK_POLICIES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SECRETS,
    SERVICES,
    STORAGE_CLASSES,
    Resource,
)
from valkey_operator.core.rest import Obj
from valkey_operator.core.store import split_meta_namespace_key
from valkey_operator.valkey.admin import AdminClient, Credentials

log = structlog.get_logger(__name__)

CONTROLLER_NAME = "valkeycluster"
CLAIMS_BY_CLUSTER = "claims-by-valkeycluster"
SERVICES_BY_CLUSTER = "services-by-valkeycluster"

_RNG = random.SystemRandom()


@attrs.frozen(kw_only=True)
class Gathered:
    """One pass's facts, and what the actor needs to talk to the pods they came from."""

    facts: Facts
    pods: list[Obj] = attrs.field(factory=list)
    admin: AdminClient | None = None
    extras: dict[str, NodeExtras] = attrs.field(factory=dict)


def cluster_claims(claims: list[Obj], cluster_uid: str) -> list[Obj]:
    """The cluster's data claims: labelled for it (the index) and owned by this incarnation, or by
    none (reclaimPolicy Retain: a new cluster of the same name starts on them)."""
    found = []
    for claim in claims:
        owners = [ref for ref in claim["metadata"].get("ownerReferences") or [] if ref.get("controller")]
        if not owners or any(ref.get("uid") == cluster_uid for ref in owners):
            found.append(claim)
    return found


def export_targets(observation: Observation) -> list[NodeTarget]:
    """The nodes whose redis_* series the exporter reads: those the pass probes, Ready or
    terminating (not the starting ones, which the pass probes only to meet them), with their shard."""
    return [
        NodeTarget(pod=pod.name, ip=pod.ip, shard="" if pod.shard is None else str(pod.shard))
        for pod in observation.pods
        if should_probe(pod) and pod.ip is not None and not pod.starting
    ]


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
        claims_of: Callable[[str, str], list[Obj]] = lambda _namespace, _cluster: [],
        services_of: Callable[[str, str], list[Obj]] = lambda _namespace, _cluster: [],
        options: ControllerOptions,
        secrets: ReferencedSecrets,
        zone_of: Callable[[str], str | None] = lambda _node: None,
        restores: RestoreSources | None = None,
        exporter: ValkeyExporter | None = None,
        secret_meta: CachedLookup = lambda _resource, _namespace, _name: None,
    ) -> None:
        self.client = client
        self.secret_meta = secret_meta
        """Every Secret's metadata (the metadata-only informer): the full Secret cache holds only
        the operator's own, and a Secret of one of the cluster's names may be anyone's."""
        self.index = index
        self.events = events
        self.metrics = metrics
        self.cached = cached
        self.pods_of = pods_of
        self.claims_of = claims_of
        self.services_of = services_of
        """The Services labelled with the cluster's name: the per-pod ones are its external Services."""
        self.options = options
        self.secrets = secrets
        self.zone_of = zone_of
        self.restores = restores or RestoreSources(
            client, index.backup, options.operator_image, options.backup_endpoints
        )
        self.exporter = exporter
        """Reads the redis_* series of the nodes each pass found (valkey_exporter.py), on scrape."""
        self.archives = ArchiveProgressReader(client, options.backup_endpoints)
        """Reads the archivers' progress of clusters with spec.backup.pointInTime (archive_progress.py)."""
        self.memory: dict[str, Memory] = {}
        """Each cluster's Memory (decision/memory.py) as its last pass returned it: the only state
        the reconciler keeps between passes."""

    async def reconcile(self, request: Request) -> Result:
        started = time.monotonic()
        # The controller's own (namespace-scoped) informer: the one whose event queued this request,
        # so the pass never reads an older copy than the event it reacts to.
        obj = self.cached(VALKEY_CLUSTERS, request.namespace, request.name)
        if obj is None:
            self.metrics.forget_cluster(request.namespace, request.name)
            if self.exporter is not None:
                self.exporter.forget(request.namespace, request.name)
            self.memory.pop(str(request), None)
            self.archives.forget(request.namespace, request.name)
            return Result()
        if obj["metadata"].get("deletionTimestamp"):
            return Result()  # garbage collection removes what it owns
        obj = {**obj, "apiVersion": API_VERSION, "kind": VALKEY_CLUSTERS.kind}
        cluster = ValkeyCluster.from_dict(obj)
        result = await self._reconcile(obj, cluster)
        log.debug("reconciled", cluster=str(request), seconds=round(time.monotonic() - started, 3))
        return result

    async def _reconcile(self, obj: Obj, cluster: ValkeyCluster) -> Result:
        now = time.time()
        stored, recorded = self._recorded(obj, cluster)
        gathered = await self._gather(obj, cluster, recorded, now)
        facts = gathered.facts
        key = facts.key
        decision = run_pass(facts)
        # No await since the gatherer read the slots held: another cluster's pass sees this claim.
        self.memory[key] = decision.memory
        if decision.actions and decision.context is not None:
            actor = Actor(self.client, decision.context, gathered.pods, gathered.admin)
            outcome = await actor.run(decision.actions)
            if outcome.failures:
                log.warning(
                    "cluster actions failed", cluster=key, failures=[f.message for f in outcome.failures]
                )
            decision = decision.after(
                outcome.failures,
                created=outcome.created,
                deleted=outcome.deleted,
                annotated=outcome.annotated,
            )
        self.memory[key] = await self._record(obj, stored, decision)
        await self._record_topology(cluster, decision, now)
        if facts.observation is not None:
            self.metrics.record_nodes(
                cluster.metadata.namespace or "",
                cluster.metadata.name,
                facts.observation,
                gathered.extras,
                facts.now,
            )
            if self.exporter is not None:
                self.exporter.update(
                    cluster.metadata.namespace or "",
                    cluster.metadata.name,
                    gathered.admin,
                    export_targets(facts.observation),
                )
        return Result(requeue_after=decision.requeue_after)

    async def _record_topology(self, cluster: ValkeyCluster, decision: Decision, now: float) -> None:
        """spec.backup.pointInTime: the slot map beside the archive when it changed (archive_progress.py)."""
        backup = cluster.spec.backup
        if backup is not None and decision.topology is not None:
            meta = cluster.metadata
            await self.archives.record_topology(
                meta.namespace or "", meta.name, backup.destination.to_dict(), decision.topology, now
            )

    # --- gathering ---

    def _recorded(self, obj: Obj, cluster: ValkeyCluster) -> tuple[Obj, ValkeyClusterStatus]:
        """The status as last recorded (our own write wins while the cache lags it), as stored (what
        the write is diffed against, so a key the decision drops is removed) and as the model decide
        reads (the cached one was parsed with the cluster; ours is parsed here)."""
        ours = recorded_status(self.memory.get(_key(obj)), obj["metadata"].get("resourceVersion"))
        if ours is None:
            return obj.get("status") or {}, cluster.status or ValkeyClusterStatus()
        return ours, ValkeyClusterStatus.from_dict(ours)

    async def _gather(
        self, obj: Obj, cluster: ValkeyCluster, recorded: ValkeyClusterStatus, now: float
    ) -> Gathered:
        """Every fact decide() needs, in gather.py's one order; it stops at the first that blocks."""
        source = _PassSource(self, cluster, recorded, now)
        facts = await gather(source)
        return Gathered(facts=facts, pods=source.pods, admin=source.admin, extras=source.extras)

    def _named(self, cluster: ValkeyCluster) -> dict[str, Obj | None]:
        """kind/name -> the cached object (None: absent) of every name the cluster writes, from the
        informer caches only (no API call in the steady state)."""
        namespace = cluster.metadata.namespace or ""
        found: dict[str, Obj | None] = {}
        for resource, name in written_names(cluster):
            obj = self.cached(resource, namespace, name)
            if obj is None and resource == SECRETS:
                obj = self.secret_meta(resource, namespace, name)
            found[object_key(resource.kind, name)] = obj
        return found

    def _expandable(self, claims: tuple[ClaimObservation, ...]) -> dict[str, bool]:
        """allowVolumeExpansion of each StorageClass the claims use, from the cache (absent: not found)."""
        found = {}
        for name in sorted({claim.storage_class for claim in claims if claim.storage_class}):
            storage_class = self.cached(STORAGE_CLASSES, "", name)
            if storage_class is not None:
                found[name] = bool(storage_class.get("allowVolumeExpansion"))
        return found

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

    async def _internal_secret(self, namespace: str, cluster: str) -> Obj | None:
        """The internal Secret from the cache, else the API (a Secret missing from both is created
        by the decision, never applied over one that exists)."""
        secret_name = names.secret_name(cluster)
        secret = self.cached(SECRETS, namespace, secret_name)
        if secret is None:
            secret = await self.client.get_or_none(SECRETS, secret_name, namespace)
        return secret

    async def _user_secrets(self, cluster: ValkeyCluster) -> dict[str, Obj | None]:
        """Secret name -> the Secret (None: absent) for every user whose passwords live in one.

        Caches only in the steady state, never a list: a generated Secret is owned, so the full
        Secret cache holds it; a passwordSecretName Secret is the user's, read through
        ReferencedSecrets (the metadata-only watch, one GET when its resourceVersion changes). The
        named index `clusters-by-password-secret` maps a changed Secret back to its clusters."""
        namespace, name = cluster.metadata.namespace or "", cluster.metadata.name
        found: dict[str, Obj | None] = {}
        for user in cluster.spec.acl:
            secret_name = password_secret(name, user)
            if secret_name is None or secret_name in found:
                continue
            owned = self.cached(SECRETS, namespace, secret_name) if user.generated_password else None
            found[secret_name] = owned or await self.secrets.get(namespace, secret_name)
        return found

    def _admin(
        self, credentials: InternalCredentials, tls: TlsMaterial | None, identify: bool
    ) -> AdminClient:
        """identify: present the TLS Secret's certificate (api.cluster.presents_certificate)."""
        return AdminClient(
            credentials=Credentials(username=ADMIN_USER, password=credentials.admin_password),
            ca_pem=tls.ca_pem if tls is not None else None,  # a CA bundle: every CA in it is trusted
            identity_pem=tls.identity_pem if tls is not None and identify else None,
            allowed_networks=self.options.node_networks,
        )

    # --- writing what was decided ---

    async def _record(self, obj: Obj, current: Obj, decision: Decision) -> Memory:
        """Write what was decided; the memory the next pass starts from (with the status written)."""
        meta = obj["metadata"]
        key = _key(obj)
        stored = await self._write_status(obj, current, decision.status.to_dict())  # the one conversion
        for event in decision.events:
            if event.type == WARNING:
                log.warning("cluster problem", cluster=key, reason=event.reason, message=event.message)
            await self.events.event(obj, event.type, event.reason, event.message)
        self.metrics.apply(meta["namespace"], meta["name"], decision.metrics)
        if stored is None:
            return decision.memory
        return decision.memory.wrote(meta.get("resourceVersion"), stored)

    async def _write_status(self, obj: Obj, current: Obj, status: Obj) -> Obj | None:
        """The server's answer to the status patch (None: nothing to write, or the cluster is gone)."""
        patch = status_patch(current, status)
        if patch is None:
            return None
        meta = obj["metadata"]
        try:
            return await self.client.patch_status(VALKEY_CLUSTERS, meta["name"], patch, meta["namespace"])
        except ApiError as exc:
            if exc.not_found:
                return None
            raise


class _PassSource:
    """Where one pass of the reconciler reads its facts (gather.FactSource): the informer caches,
    the API server and the nodes; it keeps the pods and the admin client the actor needs."""

    def __init__(
        self, reconciler: ClusterReconciler, cluster: ValkeyCluster, recorded: ValkeyClusterStatus, now: float
    ) -> None:
        self.r = reconciler
        self.cluster = cluster
        self.recorded = recorded
        self.now = now
        self.namespace = cluster.metadata.namespace or ""
        self.name = cluster.metadata.name
        self.key = f"{self.namespace}/{self.name}"
        self.tls_material: TlsMaterial | None = None
        self.pods: list[Obj] = []
        self.admin: AdminClient | None = None
        self.extras: dict[str, NodeExtras] = {}

    def begin(self) -> Facts:
        r = self.r
        return Facts(
            cluster=self.cluster,
            recorded=self.recorded,
            memory=r.memory.get(self.key, Memory()),
            options=r.options,
            resolved=resolve(self.cluster.spec.config_ref, r.index.config, r.index.image),
            named=r._named(self.cluster),
            now=self.now,
        )

    async def tls(self, facts: Facts) -> TlsMaterial | TlsProblem:
        spec = self.cluster.spec.tls
        if spec is None:
            raise ValueError(f"{self.key}: asked for the TLS Secret of a cluster without spec.tls")
        secret = await self.r.secrets.get(self.namespace, spec.secret_ref)
        checked = read_tls_secret(secret, spec.secret_ref, self.now)
        self.tls_material = checked if isinstance(checked, TlsMaterial) else None
        return checked

    async def credentials(self, facts: Facts) -> InternalCredentials | DamagedSecret | None:
        return read_credentials(await self.r._internal_secret(self.namespace, self.name))

    def fresh_credentials(self) -> InternalCredentials:
        return generate_credentials(_RNG)

    async def user_secrets(self, facts: Facts) -> dict[str, Obj | None]:
        return await self.r._user_secrets(self.cluster)

    def fresh_passwords(self, usernames: Sequence[str]) -> dict[str, str]:
        return {username: generate_password(_RNG) for username in usernames}

    def role(self, name: str) -> ValkeyRole | None:
        return self.r._role(name)

    async def observe(
        self, facts: Facts, credentials: InternalCredentials | None, commands: Sequence[str]
    ) -> Observation:
        r, uid = self.r, self.cluster.metadata.uid or ""
        identify = presents_certificate(self.cluster.spec.tls, self.recorded.tls)
        self.admin = r._admin(credentials, self.tls_material, identify) if credentials is not None else None
        self.pods = owned_pods(r.pods_of(self.namespace, self.name), self.name, uid)
        claims = tuple(
            ClaimObservation.from_claim(claim)
            for claim in cluster_claims(r.claims_of(self.namespace, self.name), uid)
        )
        observed = await observe(self.pods, self.admin, commands=list(commands))
        self.extras = dict(observed.extras)
        return attrs.evolve(
            observed.observation,
            objects={
                f"{resource.kind}/{object_name}": r.cached(resource, self.namespace, object_name)
                for resource, object_name in owned_names(self.cluster)
            },
            node_zones=r._zones(self.pods),
            claims=claims,
            expandable=r._expandable(claims),
            services={
                service["metadata"]["name"]: service
                for service in r.services_of(self.namespace, self.name)
                if names.POD_NAME_LABEL in (service["metadata"].get("labels") or {})
            },
        )

    async def restore(self, facts: Facts, restore: Restore) -> RestoreSource | RestoreHeld:
        return await self.r.restores.source(self.namespace, restore)

    async def archive(self, facts: Facts) -> ArchiveProgress:
        backup = self.cluster.spec.backup
        if backup is None or facts.observation is None:
            raise ValueError(f"{self.key}: asked for the archive progress of a cluster that does not archive")
        found = (node.node_id for node in facts.observation.nodes.values() if node.node_id is not None)
        return await self.r.archives.progress(self.namespace, self.name, backup.destination.to_dict(), found)

    def backups(self, facts: Facts) -> tuple[bool, str | None]:
        backups = [BackupFacts.read(backup) for backup in self.r.index.backups_of(self.namespace, self.name)]
        newest = newest_completed(backups)
        return any(backup.phase == BackupPhase.RUNNING for backup in backups), (
            newest.name if newest is not None else None
        )

    def rollout_slots(self, facts: Facts) -> RolloutSlots:
        limit = self.r.options.max_concurrent_rollouts
        if limit <= 0:
            return RolloutSlots(limit=limit)
        return RolloutSlots(
            limit=limit, holders=slot_holders(self.r.index.clusters_rolling(), self.r.memory, self.now)
        )

    def name_seed(self) -> int:
        return _RNG.getrandbits(64)


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

    # Data claims (persistence) by cluster label: retained claims have no owner to map them by.
    manager.informer(PERSISTENT_VOLUME_CLAIMS).add_indexers({CLAIMS_BY_CLUSTER: pod_cluster_key})

    manager.informer(STORAGE_CLASSES)  # allowVolumeExpansion of the claims' classes

    # Per-pod Services (spec.externalAccess) by cluster label: each is owned by its pod, not the cluster.
    manager.informer(SERVICES).add_indexers({SERVICES_BY_CLUSTER: pod_cluster_key})

    def services_of(namespace: str, cluster: str) -> list[Obj]:
        return manager.cache.by_index(SERVICES, SERVICES_BY_CLUSTER, f"{namespace}/{cluster}")

    def claims_of(namespace: str, cluster: str) -> list[Obj]:
        return manager.cache.by_index(PERSISTENT_VOLUME_CLAIMS, CLAIMS_BY_CLUSTER, f"{namespace}/{cluster}")

    def clusters_of_claim(claim: Obj) -> list[Request]:
        return requests(pod_cluster_key(claim))

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

    def clusters_of_backup(backup: Obj) -> list[Request]:
        """The backup's own cluster (a running backup holds its slot moves) and those restoring from it."""
        namespace, name = backup["metadata"].get("namespace", ""), backup["metadata"]["name"]
        cluster = (backup.get("spec") or {}).get("clusterName")
        own = [f"{namespace}/{cluster}"] if cluster else []
        return requests(own + index.clusters_restoring_from(namespace, name))

    def clusters_of_role(role: Obj) -> list[Request]:
        return requests(index.clusters_using_role(role["metadata"]["name"]))

    def clusters_named_by(obj: Obj) -> list[Request]:
        """The existing clusters one of whose names this object takes (a NameConflict, or ours)."""
        namespace, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        return requests(
            [
                f"{namespace}/{cluster}"
                for cluster in names.cluster_candidates(name)
                if manager.cache.get(VALKEY_CLUSTERS, cluster, namespace) is not None
            ]
        )

    def clusters_of_secret(secret: Obj) -> list[Request]:
        namespace, name = secret["metadata"].get("namespace", ""), secret["metadata"]["name"]
        return requests(
            index.clusters_using_tls_secret(namespace, name)
            + index.clusters_using_password_secret(namespace, name)
        ) + clusters_named_by(secret)

    def secret_meta(namespace: str, name: str) -> Obj | None:
        return manager.cache.get(SECRETS, name, namespace, metadata_only=True)

    manager.informer(NODES, metadata_only=True)  # zones of the nodes pods run on

    def zone_of(node: str) -> str | None:
        found = manager.cache.get(NODES, node, metadata_only=True)
        return ((found or {}).get("metadata", {}).get("labels") or {}).get(ZONE_KEY)

    metrics = cluster_metrics(manager.registry)
    # Every replica exports its warning window: ValkeyCertificateExpiringSoon compares with it.
    metrics.tls_expiry_warning.set(options.tls_expiry_warning_days * 86400.0)
    exporter = valkey_exporter(manager.registry)
    manager.add_scrape_hook(exporter.refresh)
    reconciler = ClusterReconciler(
        manager.client,
        index,
        manager.event_recorder(CONTROLLER_NAME),
        metrics,
        cached,
        pods_of,
        claims_of=claims_of,
        services_of=services_of,
        options=options,
        secrets=ReferencedSecrets(manager.client, secret_meta),
        zone_of=zone_of,
        exporter=exporter,
        secret_meta=lambda resource, namespace, name: manager.cache.get(
            resource, name, namespace, metadata_only=True
        ),
    )
    return (
        build_controller(manager, CONTROLLER_NAME)
        .for_(VALKEY_CLUSTERS)
        .owns(PODS)
        .owns(SERVICES)
        .owns(CONFIG_MAPS)
        .owns(SECRETS)
        .owns(POD_DISRUPTION_BUDGETS)
        .owns(NETWORK_POLICIES)
        .watches(SERVICES, clusters_named_by)
        .watches(CONFIG_MAPS, clusters_named_by)
        .watches(POD_DISRUPTION_BUDGETS, clusters_named_by)
        .watches(NETWORK_POLICIES, clusters_named_by)
        .watches(VALKEY_CONFIGS, clusters_of_config)
        .watches(VALKEY_IMAGES, clusters_of_image)
        .watches(VALKEY_ROLES, clusters_of_role)
        .watches(SECRETS, clusters_of_secret, metadata_only=True)
        .watches(PERSISTENT_VOLUME_CLAIMS, clusters_of_claim)
        .watches(VALKEY_BACKUPS, clusters_of_backup)
        .with_workers(workers)
        .complete(reconciler)
    )
