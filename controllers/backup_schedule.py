"""Scheduled backups of ValkeyClusters with spec.backup, and their retention (SPEC 1.7).

One pass: read the cluster and every ValkeyBackup naming it from the shared
cache (the `backups-by-valkeycluster` index, never a list call), decide
(backup_schedule_decision.decide, pure), then act:
1. create the due ValkeyBackup (AlreadyExists: an earlier pass made it);
2. for each backup retention deletes: its objects first (every key under
   `store.key(namespace, cluster, backup) + "/"`), then the ValkeyBackup. A
   storage failure keeps the object (a RetentionFailed Event, retried soon);
   a pass interrupted between the two finds no objects the next time and
   deletes the ValkeyBackup then;
3. with spec.backup.pointInTime.retention, about every ARCHIVE_RETENTION_EVERY_S: delete what of
   the cluster's archive no restore inside the window needs (valkey_operator/archiver/retention.py),
   an ArchiveRetentionFailed Event when storage refuses;
4. record the decided Events on the cluster and requeue at the next fire time (or retention run).
It never writes the ValkeyCluster (the operator may only patch its status): when a cluster's
schedule began is remembered in memory (see decision.schedule_began for a restart).
The backup itself is taken by the ValkeyBackup controller; this one only
decides when, and cleans up.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Callable

import attrs
import structlog

from controllers.backup_schedule_decision import ClusterFacts, decide
from controllers.indexes import ReferenceIndex, backup_cluster
from controllers.options import ControllerOptions
from controllers.shared.backups import BackupFacts
from controllers.shared.storage import StoreUnavailable, destination_store
from valkey_operator.api.backup import retention_seconds
from valkey_operator.api.resources import API_VERSION, VALKEY_BACKUPS, VALKEY_CLUSTERS
from valkey_operator.archiver.layout import archive_prefix
from valkey_operator.archiver.retention import expired
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import ApiError, Client
from valkey_operator.core.controller import Controller
from valkey_operator.core.events import WARNING, EventRecorder
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.rest import Obj
from valkey_operator.objectstore import REFUSE_LOCAL, EndpointPolicy, ObjectStore

log = structlog.get_logger(__name__)

CONTROLLER_NAME = "valkeybackupschedule"
STORE_TIMEOUT_SECONDS = 60.0
"""One backup's objects must be gone within this; otherwise it is kept and tried again."""
RETRY_SECONDS = 30.0
"""After a retention failure, the next try (sooner when the next fire time is sooner)."""
ARCHIVE_RETENTION_EVERY_S = 600.0
"""How often a cluster's archive is pruned to its retention."""
ARCHIVE_RETENTION_FAILED = "ArchiveRetentionFailed"


def schedule_changed(old: Obj, new: Obj) -> bool:
    """Update filter: the spec (generation) or a deletion mark changed; the cluster reconciler's
    many status writes do not wake this controller."""
    old_meta, new_meta = old["metadata"], new["metadata"]
    return old_meta.get("generation") != new_meta.get("generation") or ("deletionTimestamp" in new_meta) != (
        "deletionTimestamp" in old_meta
    )


class BackupScheduleReconciler:
    def __init__(
        self,
        client: Client,
        events: EventRecorder,
        cached: Callable[[str, str], Obj | None],
        backups_of: Callable[[str, str], list[Obj]],
        restoring: Callable[[str, str], bool],
        now: Callable[[], float],
        endpoints: EndpointPolicy = REFUSE_LOCAL,
    ) -> None:
        """cached: (namespace, name) -> the ValkeyCluster; backups_of: (namespace, cluster) -> its
        ValkeyBackups (the index); restoring: (namespace, backup) -> whether a cluster restores from it."""
        self.client = client
        self.events = events
        self.cached = cached
        self.backups_of = backups_of
        self.restoring = restoring
        self.now = now
        self.endpoints = endpoints
        self.since: dict[str, float | None] = {}
        """namespace/name -> when this process first saw the cluster's schedule (None: it saw the
        cluster without one)."""
        self.pruned: dict[str, float] = {}
        """namespace/name -> when this process last pruned the cluster's archive."""

    async def reconcile(self, request: Request) -> Result:
        obj = self.cached(request.namespace, request.name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self.since.pop(str(request), None)
            return Result()  # its backups stay (not owned): a new cluster may restore from them
        obj = {**obj, "apiVersion": API_VERSION, "kind": VALKEY_CLUSTERS.kind}
        namespace, name = request.namespace, request.name
        found = {backup["metadata"]["name"]: backup for backup in self.backups_of(namespace, name)}
        facts = [BackupFacts.read(backup) for backup in found.values()]
        protected = {backup for backup in found if self.restoring(namespace, backup)}
        key = str(request)
        cluster = attrs.evolve(
            ClusterFacts.read(obj),
            since=self.since.get(key),
            seen_unscheduled=key in self.since and self.since[key] is None,
        )
        decision = decide(cluster, facts, self.now(), protected)
        self.since[key] = decision.since
        created = decision.create is not None and await self._create(decision.create)
        failures: dict[str, str] = {}
        for backup_name in decision.delete:
            problem = await self._retire(found[backup_name])
            if problem is not None:
                failures[backup_name] = problem
        for event in decision.after(failures, created=created):
            if event.type == WARNING:
                log.warning(
                    "backup schedule", cluster=str(request), reason=event.reason, message=event.message
                )
            await self.events.event(obj, event.type, event.reason, event.message)
        wake = decision.requeue_after
        if failures:
            wake = min(wake, RETRY_SECONDS) if wake is not None else RETRY_SECONDS
        prune_in = await self._keep_archive(obj, key)
        if prune_in is not None:
            wake = min(wake, prune_in) if wake is not None else prune_in
        return Result(requeue_after=wake or 0.0)

    async def _keep_archive(self, obj: Obj, key: str) -> float | None:
        """Prune the archive to spec.backup.pointInTime.retention when due; seconds until the next
        run (None: the cluster keeps everything)."""
        spec = obj.get("spec") or {}
        backup = spec.get("backup") or {}
        retention = (backup.get("pointInTime") or {}).get("retention")
        if not retention:
            self.pruned.pop(key, None)
            return None
        now = self.now()
        due = self.pruned.get(key, -math.inf) + ARCHIVE_RETENTION_EVERY_S
        if now < due:
            return due - now
        current = {
            str(node["nodeId"]) for node in (obj.get("status") or {}).get("nodes") or [] if node.get("nodeId")
        }
        if not current:
            return RETRY_SECONDS  # which nodes are in the cluster is not known yet: nothing is pruned
        self.pruned[key] = now
        problem = await self._prune(
            obj, backup.get("destination") or {}, now - retention_seconds(retention), current
        )
        if problem is not None:
            log.warning("archive retention", cluster=key, problem=problem)
            await self.events.event(obj, WARNING, ARCHIVE_RETENTION_FAILED, problem)
            self.pruned[key] = now - ARCHIVE_RETENTION_EVERY_S + RETRY_SECONDS
            return RETRY_SECONDS
        return ARCHIVE_RETENTION_EVERY_S

    async def _prune(self, obj: Obj, destination: Obj, horizon: float, current: set[str]) -> str | None:
        """Delete what of the cluster's archive only moments before horizon need; why not, when not."""
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            async with self._store(namespace, destination) as store:
                folder = store.key(*archive_prefix(namespace, name))
                doomed = expired(await store.list_dated(folder), folder, horizon, current)
                for record in doomed.records:
                    await store.delete(record)
                deleted = len(doomed.records)
                for each in doomed.folders:
                    deleted += await store.delete_prefix(each)
        except Exception as exc:  # the store's refusal, a timeout, whatever its client raises
            return storage_reason(exc)
        if doomed:
            log.info("archive retention", cluster=f"{namespace}/{name}", folders=len(doomed), objects=deleted)
        return None

    @contextlib.asynccontextmanager
    async def _store(self, namespace: str, destination: Obj) -> AsyncIterator[ObjectStore]:
        """The destination's store, for at most STORE_TIMEOUT_SECONDS (TimeoutError past it)."""
        async with (
            asyncio.timeout(STORE_TIMEOUT_SECONDS),
            destination_store(self.client, namespace, destination, self.endpoints) as store,
        ):
            yield store

    async def _create(self, backup: Obj) -> bool:
        """Create the scheduled backup; False when it exists already (its name is its fire time)."""
        try:
            await self.client.create(VALKEY_BACKUPS, backup)
        except ApiError as exc:
            if exc.already_exists:
                return False
            raise
        return True

    async def _retire(self, backup: Obj) -> str | None:
        """Delete a backup's objects, then the ValkeyBackup; why not, when it was kept."""
        meta = backup["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        cluster = (backup.get("spec") or {}).get("clusterName", "")
        try:
            async with self._store(namespace, (backup.get("spec") or {}).get("destination") or {}) as store:
                deleted = await store.delete_prefix(store.key(namespace, cluster, name) + "/")
        except Exception as exc:  # the store's refusal, a timeout, whatever its client raises
            return storage_reason(exc)
        try:
            await self.client.delete(VALKEY_BACKUPS, name, namespace, uid=meta.get("uid"))
        except ApiError as exc:
            if exc.status == 409:  # the uid precondition: a new backup took the name; not ours to delete
                return None
            return f"its objects are deleted ({deleted}), the ValkeyBackup is not: {exc}"
        log.info("retention deleted backup", backup=f"{namespace}/{name}", objects=deleted)
        return None


def storage_reason(exc: BaseException) -> str:
    """The store's refusal as it says itself (its reason and a message kept free of secrets); a
    timeout as such; any other error by its type only: an HTTP client's message may quote a signed
    URL."""
    if isinstance(exc, StoreUnavailable):
        return f"object storage: {exc.reason}: {exc}"
    if isinstance(exc, TimeoutError):
        return f"object storage did not answer within {STORE_TIMEOUT_SECONDS:.0f} s"
    return f"object storage: {type(exc).__name__}"


def setup(
    manager: Manager,
    index: ReferenceIndex,
    workers: int,
    options: ControllerOptions,
) -> Controller:
    """Reconcile clusters on their own changes and on changes of any ValkeyBackup naming them."""

    def cached(namespace: str, name: str) -> Obj | None:
        return manager.cache.get(VALKEY_CLUSTERS, name, namespace)

    def restoring(namespace: str, backup: str) -> bool:
        return bool(index.clusters_restoring_from(namespace, backup))

    def cluster_of_backup(backup: Obj) -> list[Request]:
        requests = []
        for key in backup_cluster(backup):
            namespace, _, name = key.partition("/")
            if manager.in_scope(namespace):
                requests.append(Request(name, namespace))
        return requests

    reconciler = BackupScheduleReconciler(
        manager.client,
        manager.event_recorder(CONTROLLER_NAME),
        cached,
        index.backups_of,
        restoring,
        manager.clock.wall,
        options.backup_endpoints,
    )
    return (
        build_controller(manager, CONTROLLER_NAME)
        .for_(VALKEY_CLUSTERS, update_filter=schedule_changed)
        .watches(VALKEY_BACKUPS, cluster_of_backup)
        .with_workers(workers)
        .complete(reconciler)
    )
