"""When a cluster's scheduled backups are taken and which of them retention deletes (SPEC 1.7).

Pure: every fact, `now` included, comes in; the actions, Events and the next
wake-up come out. The reconciler (backup_schedule.py) gathers and acts.

- A backup is due at the latest fire time of the schedule (UTC) that is after
  the anchor: when scheduling began for this cluster (`since`), or the newest
  scheduled backup's time. Fire times missed while the operator
  was down therefore give one backup, the latest, never a burst.
- Its name is `<cluster>-<yyyymmddhhmmss>` of that fire time: a second pass,
  or a second replica, creates the same name and the API server refuses it.
- Nothing is created while any backup of the cluster is Pending or Running.
- Retention looks only at scheduled backups: it keeps the `keep` newest
  Completed ones, drops Failed ones older than the newest Completed one and
  keeps at most `keep` newer Failed ones. Pending or Running ones are never
  deleted, nor one a ValkeyCluster restores from; the newest scheduled backup
  always survives, so the anchor never moves back. At most
  MAX_DELETIONS_PER_PASS go per pass, so a long backlog cannot outlast the
  reconcile deadline; the rest go in the next pass, right after.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import attrs
from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from controllers.shared.backups import SCHEDULED, SCHEDULED_AT_ANNOTATION, SCHEDULED_LABEL, BackupFacts
from controllers.shared.names import CLUSTER_LABEL
from valkey_operator.api.resources import API_VERSION
from valkey_operator.core.clock import parse_rfc3339, rfc3339
from valkey_operator.core.events import NORMAL, WARNING
from valkey_operator.core.rest import Obj

BACKUP_KIND = "ValkeyBackup"

MIN_REQUEUE_SECONDS = 1.0
"""A wake-up a little early finds the previous fire time; it comes back this soon after."""
MAX_DELETIONS_PER_PASS = 4

INVALID_REASON = "BackupScheduleInvalid"
SCHEDULED_REASON = "BackupScheduled"
DELETED_REASON = "BackupDeleted"
RETENTION_FAILED_REASON = "RetentionFailed"


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"


@attrs.frozen
class Event:
    type: str
    reason: str
    message: str


@attrs.frozen(kw_only=True)
class ScheduleSpec:
    """ValkeyCluster.spec.backup."""

    schedule: str
    keep: int | None
    """None (absent): retention deletes nothing; the API requires keep >= 1, below is read as 1."""
    destination: Mapping[str, Any]
    consistency: str | None = None
    """spec.backup.consistency, passed to each ValkeyBackup as it is (None: the backup's default)."""

    @classmethod
    def read(cls, raw: Obj | None) -> ScheduleSpec | None:
        if not raw:
            return None
        keep = raw.get("keep")
        return cls(
            schedule=str(raw.get("schedule") or ""),
            keep=max(int(keep), 1) if keep is not None else None,
            destination=raw.get("destination") or {},
            consistency=str(raw["consistency"]) if raw.get("consistency") else None,
        )


@attrs.frozen(kw_only=True)
class ClusterFacts:
    namespace: str
    name: str
    uid: str
    created: float
    """metadata.creationTimestamp (seconds since the epoch)."""
    generation: int
    backup: ScheduleSpec | None
    since: float | None = None
    """When this operator first saw the cluster's schedule (the reconciler's memory; None: not yet)."""
    seen_unscheduled: bool = False
    """This operator saw the cluster without spec.backup (the reconciler's memory)."""

    @classmethod
    def read(cls, cluster: Obj) -> ClusterFacts:
        """From the cached ValkeyCluster."""
        meta = cluster["metadata"]
        return cls(
            namespace=meta.get("namespace", ""),
            name=meta["name"],
            uid=meta.get("uid", ""),
            created=parse_rfc3339(meta.get("creationTimestamp")) or 0.0,
            generation=int(meta.get("generation") or 1),
            backup=ScheduleSpec.read((cluster.get("spec") or {}).get("backup")),
        )


@attrs.frozen(kw_only=True)
class ScheduleDecision:
    create: Obj | None = None
    """The ValkeyBackup to create (AlreadyExists means another pass did: nothing to do)."""
    delete: tuple[str, ...] = ()
    """Scheduled backups retention deletes, oldest first: their objects, then the ValkeyBackup."""
    since: float | None = None
    """When scheduling began, for the reconciler to remember (None: the cluster has no schedule)."""
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    """Seconds until the next fire time (None: nothing scheduled)."""
    problem: str | None = None
    """Why no backup can be scheduled (an invalid schedule), for the cluster's status."""

    def after(self, failures: Mapping[str, str], *, created: bool = True) -> tuple[Event, ...]:
        """The Events once the actions ran: created is False when the backup existed already (an
        earlier pass made it); failures maps a backup retention kept to why."""
        told = tuple(event for event in self.events if created or event.reason != SCHEDULED_REASON)
        done = tuple(
            Event(NORMAL, DELETED_REASON, f"retention deleted backup {name} and its objects")
            for name in self.delete
            if name not in failures
        )
        failed = tuple(
            Event(WARNING, RETENTION_FAILED_REASON, f"backup {name} kept: {reason}")
            for name, reason in sorted(failures.items())
        )
        return told + done + failed


class InvalidSchedule(ValueError):
    """Not a 5-field cron expression that ever fires."""


def backup_name(cluster: str, fire_time: float) -> str:
    """`<cluster>-<yyyymmddhhmmss>` of the fire time in UTC: one name per cluster and fire time."""
    stamp = datetime.datetime.fromtimestamp(fire_time, datetime.UTC).strftime("%Y%m%d%H%M%S")
    return f"{cluster}-{stamp}"


def check_schedule(schedule: str) -> str:
    """The schedule normalised, or InvalidSchedule saying why.

    Five fields (minute hour day-of-month month day-of-week, UTC), as cron and Kubernetes CronJob
    read them; croniter's extensions (a seconds or year field, `R` random, `H` hashed, `@daily`)
    are refused: a random field would move the fire time between passes, and with it the name.
    """
    fields = schedule.split()
    if len(fields) != 5:
        raise InvalidSchedule(f"{schedule!r}: a schedule has 5 fields (minute hour day month weekday)")
    if any(part.upper().startswith(("R", "H")) for field in fields for part in field.split(",")):
        raise InvalidSchedule(f"{schedule!r}: R (random) and H (hashed) are not cron syntax")
    normal = " ".join(fields)
    try:
        croniter(normal, 0.0).get_next(float)
    except CroniterBadDateError as exc:
        raise InvalidSchedule(f"{schedule!r}: never fires") from exc
    except (CroniterBadCronError, ValueError) as exc:
        raise InvalidSchedule(f"{schedule!r}: {exc}") from exc
    return normal


def latest_fire(schedule: str, now: float) -> float:
    """The latest fire time at or before now (whole minutes, UTC)."""
    return float(croniter(schedule, int(now) + 1).get_prev(float))


def next_fire(schedule: str, now: float) -> float:
    """The first fire time after now."""
    return float(croniter(schedule, now).get_next(float))


def retention(
    backups: Iterable[BackupFacts], keep: int, protected: Collection[str] = frozenset()
) -> tuple[str, ...]:
    """The scheduled backups to delete, oldest first (see the module docstring); `protected` names
    backups a cluster restores from: never deleted, and not counted against keep."""
    candidates = [
        backup
        for backup in backups
        if backup.scheduled and not backup.deleting and backup.name not in protected
    ]
    newest_first = sorted(candidates, key=lambda backup: (backup.time, backup.name), reverse=True)
    completed = [backup for backup in newest_first if backup.phase == Phase.COMPLETED]
    failed = [backup for backup in newest_first if backup.phase == Phase.FAILED]
    doomed = completed[keep:]
    if completed:
        newest = completed[0].time
        doomed += [backup for backup in failed if backup.time < newest]
        failed = [backup for backup in failed if backup.time >= newest]
    doomed += failed[keep:]
    return tuple(backup.name for backup in sorted(doomed, key=lambda backup: (backup.time, backup.name)))


def backup_object(cluster: ClusterFacts, spec: ScheduleSpec, fire_time: float) -> Obj:
    """The ValkeyBackup for one fire time, labelled scheduled. Not owned by the cluster (as
    CloudNativePG's default): deleting the cluster keeps its backups, so a new cluster can still be
    restored from them after an accidental deletion."""
    return {
        "apiVersion": API_VERSION,
        "kind": BACKUP_KIND,
        "metadata": {
            "name": backup_name(cluster.name, fire_time),
            "namespace": cluster.namespace,
            "labels": {CLUSTER_LABEL: cluster.name, SCHEDULED_LABEL: SCHEDULED},
            "annotations": {SCHEDULED_AT_ANNOTATION: rfc3339(fire_time)},
        },
        "spec": {
            "clusterName": cluster.name,
            "destination": dict(spec.destination),
            **({"consistency": spec.consistency} if spec.consistency else {}),
        },
    }


def schedule_began(cluster: ClusterFacts, scheduled: bool, now: float) -> float:
    """When scheduling began, so fire times before it are not owed (adding spec.backup to an old
    cluster takes no backup for a fire time already past). As remembered; else now when this
    operator saw the cluster without a schedule (it was just added); else creation when the spec
    never changed (generation 1: spec.backup was there from the start) or when the cluster has
    scheduled backups (a restarted operator: the newest one anchors, and a fire time missed while
    it was down is owed); else now (spec.backup added while the operator was down)."""
    if cluster.since is not None:
        return cluster.since
    if cluster.seen_unscheduled:
        return float(int(now))
    return cluster.created if cluster.generation <= 1 or scheduled else float(int(now))


def decide(
    cluster: ClusterFacts,
    backups: Collection[BackupFacts],
    now: float,
    protected: Collection[str] = frozenset(),
) -> ScheduleDecision:
    """Whether to create a backup now, which to delete, and when to look again (pure).

    backups: every ValkeyBackup naming the cluster; protected: those a ValkeyCluster restores from.
    """
    spec = cluster.backup
    if spec is None:
        return ScheduleDecision()
    known = [backup for backup in backups if not backup.deleting]
    scheduled = [backup.time for backup in known if backup.scheduled]
    began = schedule_began(cluster, bool(scheduled), now)
    since = began
    every_doomed = retention(known, spec.keep, protected) if spec.keep is not None else ()
    doomed = every_doomed[:MAX_DELETIONS_PER_PASS]
    backlog = len(every_doomed) > len(doomed)
    try:
        schedule = check_schedule(spec.schedule)
    except InvalidSchedule as exc:
        problem = f"spec.backup.schedule {exc}"
        return ScheduleDecision(
            delete=doomed,
            since=since,
            events=(Event(WARNING, INVALID_REASON, problem),),
            requeue_after=MIN_REQUEUE_SECONDS if backlog else None,
            problem=problem,
        )
    wake = MIN_REQUEUE_SECONDS if backlog else max(next_fire(schedule, now) - now, MIN_REQUEUE_SECONDS)
    anchor = max([began, *scheduled])
    fire = latest_fire(schedule, now)
    name = backup_name(cluster.name, fire)
    busy = any(backup.in_flight for backup in known)
    taken = any(backup.name == name for backup in backups)
    if fire <= anchor or busy or taken:
        return ScheduleDecision(delete=doomed, since=since, requeue_after=wake)
    event = Event(NORMAL, SCHEDULED_REASON, f"created backup {name} for {rfc3339(fire)}")
    return ScheduleDecision(
        create=backup_object(cluster, spec, fire),
        delete=doomed,
        since=since,
        events=(event,),
        requeue_after=wake,
    )
