"""A cluster's ValkeyBackups as facts, read by the backup schedule and by the cluster controller.

The schedule decides from them what to create and what retention deletes (backup_schedule_decision.py);
the cluster reports its newest scheduled Completed one as status.lastBackup. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from valkey_operator.api.backup import BackupPhase
from valkey_operator.api.resources import GROUP
from valkey_operator.core.clock import parse_rfc3339
from valkey_operator.core.rest import Obj

SCHEDULED_LABEL = f"{GROUP}/scheduled"
""""true" on a ValkeyBackup the schedule created: retention considers only these."""
SCHEDULED = "true"
SCHEDULED_AT_ANNOTATION = f"{GROUP}/scheduled-at"
"""The fire time (RFC 3339, UTC) a scheduled ValkeyBackup was created for."""


@attrs.frozen(kw_only=True)
class BackupFacts:
    """One ValkeyBackup of the cluster (spec.clusterName), scheduled or made by hand."""

    name: str
    phase: str
    """status.phase; "" when the backup controller has not written one yet."""
    created: float
    scheduled: bool
    scheduled_at: float | None = None
    deleting: bool = False

    @classmethod
    def read(cls, backup: Obj) -> BackupFacts:
        """From the cached ValkeyBackup."""
        meta = backup["metadata"]
        return cls(
            name=meta["name"],
            phase=str((backup.get("status") or {}).get("phase") or ""),
            created=parse_rfc3339(meta.get("creationTimestamp")) or 0.0,
            scheduled=(meta.get("labels") or {}).get(SCHEDULED_LABEL) == SCHEDULED,
            scheduled_at=parse_rfc3339((meta.get("annotations") or {}).get(SCHEDULED_AT_ANNOTATION)),
            deleting=bool(meta.get("deletionTimestamp")),
        )

    @property
    def time(self) -> float:
        """The fire time it was made for; its creation time when it has none."""
        return self.scheduled_at if self.scheduled_at is not None else self.created

    @property
    def in_flight(self) -> bool:
        """Not finished: anything but Completed or Failed, an unknown phase too (never deleted)."""
        return self.phase not in (BackupPhase.COMPLETED, BackupPhase.FAILED)


def newest_completed(backups: Iterable[BackupFacts]) -> BackupFacts | None:
    """The newest Completed backup the schedule created: ValkeyClusterStatus.lastBackup."""
    completed = [
        backup
        for backup in backups
        if backup.scheduled and backup.phase == BackupPhase.COMPLETED and not backup.deleting
    ]
    return max(completed, key=lambda backup: (backup.time, backup.name), default=None)
