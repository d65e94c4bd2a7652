"""Scheduled backups of ValkeyClusters with spec.backup, and their retention (SPEC 1.7).

One pass: read the cluster and every ValkeyBackup naming it from the shared
cache (the `valkeybackups-by-cluster` index, never a list call), decide
(backup_schedule_decision.decide, pure), then act:
1. create the due ValkeyBackup (AlreadyExists: an earlier pass made it);
2. for each backup retention deletes: its objects first (every key under
   `store.key(namespace, cluster, backup) + "/"`), then the ValkeyBackup. A
   storage failure keeps the object (a RetentionFailed Event, retried soon);
   a pass interrupted between the two finds no objects the next time and
   deletes the ValkeyBackup then;
3. record the decided Events on the cluster and requeue at the next fire time.
It never writes the ValkeyCluster (the operator may only patch its status): when a cluster's
schedule began is remembered in memory (see decision.schedule_began for a restart).
The backup itself is taken by the ValkeyBackup controller; this one only
decides when, and cleans up.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import attrs
import structlog

from controllers.backup_schedule_decision import (
    BackupFacts,
    ClusterFacts,
    decide,
)
from controllers.cluster.secrets import ReferencedSecrets
from controllers.indexes import ReferenceIndex
from controllers.options import ControllerOptions
from valkey_operator.api.resources import API_VERSION, GROUP, VALKEY_CLUSTERS, VERSION
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import ApiError, Client
from valkey_operator.core.controller import Controller
from valkey_operator.core.events import WARNING, EventRecorder
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.resource import SECRETS, Resource
from valkey_operator.core.rest import Obj

log = structlog.get_logger(__name__)

VALKEY_BACKUPS = Resource(GROUP, VERSION, "valkeybackups", "ValkeyBackup", namespaced=True)
"""Until the API lands: the lead replaces this with the constant in valkey_operator/api/resources.py."""

CONTROLLER_NAME = "valkeybackupschedule"
BACKUPS_BY_CLUSTER = "valkeybackups-by-cluster"
"""namespace/spec.clusterName -> the ValkeyBackups of that cluster, scheduled or made by hand."""
CLUSTERS_BY_RESTORE_BACKUP = "clusters-by-restore-backupName"
"""namespace/spec.restore.backupName -> the ValkeyClusters restoring from that backup."""

ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
CA_KEY = "ca.crt"
STORE_TIMEOUT_SECONDS = 60.0
"""One backup's objects must be gone within this; otherwise it is kept and tried again."""
RETRY_SECONDS = 30.0
"""After a retention failure, the next try (sooner when the next fire time is sooner)."""


class BackupStore(Protocol):
    """What retention needs of valkey_operator.objectstore's ObjectStore."""

    def key(self, *parts: str) -> str: ...

    async def delete_prefix(self, prefix: str) -> int: ...


@attrs.frozen(kw_only=True)
class StoreTarget:
    """Where a backup's objects live and how to reach them (secrets never in repr or logs)."""

    endpoint: str
    bucket: str
    path: str
    region: str | None
    access_key_id: str = attrs.field(repr=False)
    secret_access_key: str = attrs.field(repr=False)
    ca_pem: str | None = attrs.field(repr=False, default=None)


StoreOpener = Callable[[StoreTarget], AbstractAsyncContextManager[BackupStore]]
"""Opens the store of a target: objectstore.open_store(Destination, S3Credentials, ca_pem), adapted."""


class RetentionProblem(Exception):
    """Why a backup's objects could not be deleted (said in the RetentionFailed Event)."""


def backup_cluster_key(backup: Obj) -> list[str]:
    """Index function: namespace/spec.clusterName of a ValkeyBackup."""
    cluster = (backup.get("spec") or {}).get("clusterName")
    return [f"{backup['metadata'].get('namespace', '')}/{cluster}"] if cluster else []


def cluster_restore_backup(cluster: Obj) -> list[str]:
    """Index function: namespace/spec.restore.backupName of a ValkeyCluster."""
    backup = ((cluster.get("spec") or {}).get("restore") or {}).get("backupName")
    return [f"{cluster['metadata'].get('namespace', '')}/{backup}"] if backup else []


def schedule_changed(old: Obj, new: Obj) -> bool:
    """Update filter: the spec (generation) or a deletion mark changed; the cluster reconciler's
    many status writes do not wake this controller."""
    old_meta, new_meta = old["metadata"], new["metadata"]
    return old_meta.get("generation") != new_meta.get("generation") or ("deletionTimestamp" in new_meta) != (
        "deletionTimestamp" in old_meta
    )


def secret_value(secret: Obj | None, secret_name: str, key: str) -> str:
    """A Secret's data[key] decoded, or RetentionProblem naming what is missing (never the value)."""
    if secret is None:
        raise RetentionProblem(f"Secret {secret_name} not found")
    encoded = (secret.get("data") or {}).get(key)
    if not encoded:
        raise RetentionProblem(f"Secret {secret_name} has no key {key}")
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise RetentionProblem(f"Secret {secret_name} key {key} is not valid base64 text") from exc


class BackupScheduleReconciler:
    def __init__(
        self,
        client: Client,
        events: EventRecorder,
        cached: Callable[[str, str], Obj | None],
        backups_of: Callable[[str, str], list[Obj]],
        restoring: Callable[[str, str], bool],
        secrets: ReferencedSecrets,
        open_store: StoreOpener,
        now: Callable[[], float],
    ) -> None:
        """cached: (namespace, name) -> the ValkeyCluster; backups_of: (namespace, cluster) -> its
        ValkeyBackups (the index); restoring: (namespace, backup) -> whether a cluster restores from it."""
        self.client = client
        self.events = events
        self.cached = cached
        self.backups_of = backups_of
        self.restoring = restoring
        self.secrets = secrets
        self.open_store = open_store
        self.now = now
        self.since: dict[str, float | None] = {}
        """namespace/name -> when this process first saw the cluster's schedule (None: it saw the
        cluster without one)."""

    async def reconcile(self, request: Request) -> Result:
        obj = self.cached(request.namespace, request.name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self.since.pop(str(request), None)
            return Result()  # garbage collection removes the backups it owns
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
        return Result(requeue_after=wake or 0.0)

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
            target = await self._target(namespace, (backup.get("spec") or {}).get("destination") or {})
            async with asyncio.timeout(STORE_TIMEOUT_SECONDS), self.open_store(target) as store:
                deleted = await store.delete_prefix(store.key(namespace, cluster, name) + "/")
        except RetentionProblem as exc:
            return str(exc)
        except TimeoutError:
            return f"object storage did not answer within {STORE_TIMEOUT_SECONDS:.0f} s"
        except Exception as exc:  # the store's StorageError and whatever its client raises
            return storage_reason(exc)
        try:
            await self.client.delete(VALKEY_BACKUPS, name, namespace, uid=meta.get("uid"))
        except ApiError as exc:
            if exc.status == 409:  # the uid precondition: a new backup took the name; not ours to delete
                return None
            return f"its objects are deleted ({deleted}), the ValkeyBackup is not: {exc}"
        log.info("retention deleted backup", backup=f"{namespace}/{name}", objects=deleted)
        return None

    async def _target(self, namespace: str, destination: Obj) -> StoreTarget:
        credentials = str(destination.get("credentialsSecretName") or "")
        if not credentials:
            raise RetentionProblem("the destination names no credentialsSecretName")
        secret = await self.secrets.get(namespace, credentials)
        ca_secret = destination.get("caSecretName")
        return StoreTarget(
            endpoint=str(destination.get("endpoint") or ""),
            bucket=str(destination.get("bucket") or ""),
            path=str(destination.get("path") or ""),
            region=destination.get("region"),
            access_key_id=secret_value(secret, credentials, ACCESS_KEY_ID),
            secret_access_key=secret_value(secret, credentials, SECRET_ACCESS_KEY),
            ca_pem=(
                secret_value(await self.secrets.get(namespace, ca_secret), ca_secret, CA_KEY)
                if ca_secret
                else None
            ),
        )


def storage_reason(exc: BaseException) -> str:
    """The store's StorageError as it says itself (its reason and a message it keeps free of
    secrets); any other error by its type only: an HTTP client's message may quote a signed URL."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return f"object storage: {reason}: {exc}"
    return f"object storage: {type(exc).__name__}"


def setup(
    manager: Manager,
    index: ReferenceIndex,
    workers: int,
    options: ControllerOptions,
    *,
    open_store: StoreOpener,
) -> Controller:
    """Reconcile clusters on their own changes and on changes of any ValkeyBackup naming them."""
    del options  # nothing here depends on the operator's configuration yet
    backups = manager.informer(VALKEY_BACKUPS)
    backups.add_indexers({BACKUPS_BY_CLUSTER: backup_cluster_key})
    index.clusters.add_indexers({CLUSTERS_BY_RESTORE_BACKUP: cluster_restore_backup})
    manager.informer(SECRETS, metadata_only=True)  # the credentials' resourceVersions

    def cached(namespace: str, name: str) -> Obj | None:
        return manager.cache.get(VALKEY_CLUSTERS, name, namespace)

    def backups_of(namespace: str, cluster: str) -> list[Obj]:
        return manager.cache.by_index(VALKEY_BACKUPS, BACKUPS_BY_CLUSTER, f"{namespace}/{cluster}")

    def restoring(namespace: str, backup: str) -> bool:
        return bool(restores_from(index, namespace, backup))

    def secret_meta(namespace: str, name: str) -> Obj | None:
        return manager.cache.get(SECRETS, name, namespace, metadata_only=True)

    def cluster_of_backup(backup: Obj) -> list[Request]:
        requests = []
        for key in backup_cluster_key(backup):
            namespace, _, name = key.partition("/")
            if manager.in_scope(namespace):
                requests.append(Request(name, namespace))
        return requests

    reconciler = BackupScheduleReconciler(
        manager.client,
        manager.event_recorder(CONTROLLER_NAME),
        cached,
        backups_of,
        restoring,
        ReferencedSecrets(manager.client, secret_meta),
        open_store,
        manager.clock.wall,
    )
    return (
        build_controller(manager, CONTROLLER_NAME)
        .for_(VALKEY_CLUSTERS, update_filter=schedule_changed)
        .watches(VALKEY_BACKUPS, cluster_of_backup)
        .with_workers(workers)
        .complete(reconciler)
    )


def restores_from(index: ReferenceIndex, namespace: str, backup: str) -> Collection[str]:
    """namespace/name keys of the clusters whose spec.restore.backupName is backup."""
    return index.clusters.store.index_keys(CLUSTERS_BY_RESTORE_BACKUP, f"{namespace}/{backup}")
