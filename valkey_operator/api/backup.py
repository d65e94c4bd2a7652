"""ValkeyBackup and the backup parts of a ValkeyCluster: object storage, schedules, restore (SPEC 1.7).

A ValkeyBackup is one-shot: its spec is fixed at creation (CEL `self == oldSelf`).
`ValkeyClusterSpec.backup` (BackupSchedule) and `.restore` (Restore) and
`ValkeyClusterStatus.restore` (RestoreStatus) are declared here, next to the
destination they share, so this module depends on no other kind.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

import attrs

from valkey_operator.api.convert import Model
from valkey_operator.api.destination_keys import CA_KEY, CREDENTIAL_KEYS, DEFAULT_REGION
from valkey_operator.api.fields import (
    conditions,
    described,
    lit,
    matches,
    name_ref,
    observed_generation,
    raw,
    rule,
    schema,
)
from valkey_operator.api.limits import (
    CAMEL_CASE,
    CRON_FIELDS,
    DNS_LABEL_1123,
    HTTP_URL,
    MAX_BUCKET,
    MAX_DNS_LABEL,
    MAX_ENDPOINT,
    MAX_KEEP,
    MAX_MESSAGE,
    MAX_NAME,
    MAX_OBJECT_KEY,
    MAX_REASON,
    MAX_REGION,
    MAX_SCHEDULE,
    MAX_SHARDS,
    S3_BUCKET,
    S3_REGION,
    SHA256_HEX,
)
from valkey_operator.api.meta import Condition, ObjectMeta
from valkey_operator.api.resources import VALKEY_BACKUPS
from valkey_operator.core.clock import parse_rfc3339
from valkey_operator.core.resource import Resource


class BackupPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"


class BackupConsistency(enum.StrEnum):
    """Whether every shard's snapshot is taken at one instant (controllers/backup/instant.py)."""

    PER_SHARD = "PerShard"
    ONE_INSTANT = "OneInstant"


CONSISTENCY_DESCRIPTION = (
    "PerShard (the default): each shard's snapshot is consistent on its own, but shards are "
    "snapshotted one after another, so keys that depend on each other across shards may not match. "
    "OneInstant: every shard's snapshot is taken at one moment; the cost is a write pause: every "
    "primary holds writes (CLIENT PAUSE WRITE: a write waits, reads go on) while every source forks, "
    "usually tens of milliseconds, bounded by 2 s even if the operator stops (the pause's own "
    "timeout); a backup that cannot fork every source within it fails with reason "
    "InstantNotReached. The pause is recorded in status.writePauseMilliseconds. Every shard is "
    "streamed at once, 9 MiB each in the operator: over half its memory limit, the backup fails "
    "with reason OperatorMemoryTooSmall."
)


class SourceRole(enum.StrEnum):
    """The role of the node a shard's snapshot was taken from."""

    PRIMARY = "primary"
    REPLICA = "replica"


class RestorePhase(enum.StrEnum):
    PENDING = "Pending"
    LOADING = "Loading"
    VERIFIED = "Verified"
    HELD = "Held"


def _optional(description: str, max_length: int, **knobs: Any) -> Any:
    """An optional string."""
    return attrs.field(default=None, metadata=schema(description, max_length=max_length, **knobs))


def _total(description: str) -> Any:
    """An optional non-negative int64 (bytes, keys)."""
    return attrs.field(default=None, metadata=schema(description, minimum=0))


def _reason(description: str) -> Any:
    message = "a reason is one CamelCase word, for example CredentialsInvalid"
    return _optional(description, MAX_REASON, rules=[matches(CAMEL_CASE, message, got=message + "; got ")])


def _cluster_name(description: str) -> Any:
    """A ValkeyCluster's name (a DNS label: the name of its Services)."""
    return schema(
        description,
        min_length=1,
        max_length=MAX_DNS_LABEL,
        rules=[
            rule(
                f"self.matches({raw(DNS_LABEL_1123)})",
                "must be the name of a ValkeyCluster: lowercase letters, digits and '-', starting "
                "and ending with a letter or digit",
                message_expression=lit(
                    "must be the name of a ValkeyCluster (lowercase letters, digits and '-', "
                    "starting and ending with a letter or digit); got "
                )
                + " + self",
            )
        ],
    )


_BUCKET_MESSAGE = (
    "must be an S3 bucket name: 3 to 63 lowercase letters, digits, '.' and '-', starting and ending "
    "with a letter or digit, without '..'"
)
_CA_NEEDS_HTTPS = "caSecretName requires an https:// endpoint: the CA verifies the endpoint's TLS certificate"


@described(
    "Where backups are stored: a bucket of an S3-compatible object store.",
    rules=[
        rule(
            "!has(self.caSecretName) || self.endpoint.startsWith('https://')",
            _CA_NEEDS_HTTPS,
            message_expression=lit(_CA_NEEDS_HTTPS + "; got ") + " + self.endpoint",
            reason="FieldValueForbidden",
            field_path=".caSecretName",
        )
    ],
)
@attrs.frozen(kw_only=True)
class BackupDestination(Model):
    """An S3 location and the Secrets that open it; credentials never leave their Secret."""

    endpoint: str = attrs.field(
        metadata=schema(
            "URL of the S3-compatible endpoint, http:// or https://, for example "
            "https://s3.us-east-1.amazonaws.com.",
            min_length=1,
            max_length=MAX_ENDPOINT,
            rules=[
                matches(
                    HTTP_URL,
                    "must be an http:// or https:// URL with a host, without spaces",
                    got="must be an http:// or https:// URL with a host, without spaces; got ",
                )
            ],
        )
    )
    bucket: str = attrs.field(
        metadata=schema(
            "Name of the bucket; it must exist (the operator never creates buckets).",
            min_length=3,
            max_length=MAX_BUCKET,
            rules=[
                rule(
                    f"self.matches({raw(S3_BUCKET)}) && !self.contains('..')",
                    _BUCKET_MESSAGE,
                    message_expression=lit(_BUCKET_MESSAGE + "; got ") + " + self",
                )
            ],
        )
    )
    path: str | None = attrs.field(
        default=None,
        metadata=schema(
            "Key prefix inside the bucket, without a leading '/', for example team-a/cache. "
            "Unset: keys start at the bucket's root.",
            min_length=1,
            max_length=MAX_OBJECT_KEY,
            rules=[
                rule(
                    "!self.startsWith('/')",
                    "path is a key prefix and must not start with '/'",
                    message_expression=lit("path is a key prefix and must not start with '/'; got ")
                    + " + self",
                )
            ],
        ),
    )
    region: str | None = attrs.field(
        default=None,
        metadata=schema(
            f"Region the requests are signed for. Unset: {DEFAULT_REGION}, which most "
            "S3-compatible stores accept.",
            min_length=1,
            max_length=MAX_REGION,
            rules=[
                matches(
                    S3_REGION,
                    "a region is letters, digits, '.', '_' and '-', for example eu-west-1",
                    got="a region is letters, digits, '.', '_' and '-', for example eu-west-1; got ",
                )
            ],
        ),
    )
    credentials_secret_name: str = attrs.field(
        metadata=name_ref(
            "Name of a Secret in the same namespace holding the keys "
            f"{' and '.join(CREDENTIAL_KEYS)}. The operator never logs them.",
            "Secret",
        )
    )
    ca_secret_name: str | None = attrs.field(
        default=None,
        metadata=name_ref(
            f"Name of a Secret in the same namespace whose key {CA_KEY} holds the CA certificates "
            "that sign the endpoint's certificate (PEM). Only with an https:// endpoint.",
            "Secret",
        ),
    )


_IMMUTABLE = (
    "spec is immutable: a ValkeyBackup is one backup taken once; create a new ValkeyBackup to back up again"
)


@described(
    "ValkeyBackupSpec names the cluster to back up and where to. Immutable after creation.",
    rules=[rule("self == oldSelf", _IMMUTABLE, reason="FieldValueForbidden")],
)
@attrs.frozen(kw_only=True)
class ValkeyBackupSpec(Model):
    cluster_name: str = attrs.field(
        metadata=_cluster_name("Name of the ValkeyCluster, in the backup's namespace, to back up.")
    )
    destination: BackupDestination = attrs.field(
        metadata=schema(
            "Where the backup is written: one object per shard, then a manifest object, written last."
        )
    )
    consistency: BackupConsistency | None = attrs.field(
        default=None, metadata=schema(CONSISTENCY_DESCRIPTION, max_length=16)
    )


@described("One shard's snapshot: an RDB file stored as one object.")
@attrs.frozen(kw_only=True)
class BackupShard(Model):
    index: int = attrs.field(
        metadata=schema("The shard's position in the backup, from 0.", fmt="int32", minimum=0)
    )
    slots: str | None = _optional(
        "Hash slots the shard owned when its snapshot was taken, for example 0-5460,7000.", 131072
    )
    source_pod: str | None = _optional("The pod whose node produced the snapshot.", MAX_NAME)
    source_role: SourceRole | None = attrs.field(
        default=None,
        metadata=schema(
            "replica (an in-sync replica, preferred) or primary (a shard without replicas).", max_length=16
        ),
    )
    object_key: str | None = _optional("Key of the shard's object in the bucket.", MAX_OBJECT_KEY)
    bytes: int | None = _total("Size of the object in bytes.")
    keys: int | None = _total("Keys in the snapshot, as the source node counted them.")
    sha256: str | None = _optional(
        "SHA-256 of the object's content, 64 lowercase hex characters; checked on restore.",
        64,
        rules=[
            matches(
                SHA256_HEX,
                "a sha256 is exactly 64 lowercase hex characters",
                got="a sha256 is exactly 64 lowercase hex characters; got ",
            )
        ],
    )


@described("ValkeyBackupStatus is observed and written by the operator.")
@attrs.frozen(kw_only=True)
class ValkeyBackupStatus(Model):
    phase: BackupPhase | None = attrs.field(
        default=None,
        metadata=schema(
            "Pending, Running, Completed (every shard's object and the manifest are written) or "
            "Failed (see reason and message).",
            max_length=16,
        ),
    )
    reason: str | None = _reason("Why the backup is in its phase, one CamelCase word.")
    message: str | None = _optional("Human-readable explanation of the phase.", MAX_MESSAGE)
    started_at: str | None = _optional(
        "When the first shard's snapshot began (RFC 3339).", 64, fmt="date-time"
    )
    completed_at: str | None = _optional(
        "When the manifest was written, or the backup failed (RFC 3339).", 64, fmt="date-time"
    )
    observed_generation: int | None = observed_generation()
    manifest_key: str | None = _optional(
        "Key of the manifest object, written last: a backup without its manifest is not a backup.",
        MAX_OBJECT_KEY,
    )
    valkey_version: str | None = _optional("Valkey version of the nodes the snapshots came from.", 64)
    total_bytes: int | None = _total("Bytes of every shard's object together.")
    total_keys: int | None = _total("Keys of every shard together.")
    size: str | None = _optional("totalBytes for people, for example 1.2 GiB: the Size printer column.", 32)
    consistency: BackupConsistency | None = attrs.field(
        default=None,
        metadata=schema(
            "How the shards were snapshotted, as spec.consistency asked: PerShard or OneInstant.",
            max_length=16,
        ),
    )
    write_pause_milliseconds: int | None = attrs.field(
        default=None,
        metadata=schema(
            "OneInstant only: the longest write pause a client could see on a primary, from the "
            "first CLIENT PAUSE sent to the last CLIENT UNPAUSE answered.",
            minimum=0,
        ),
    )
    shards: tuple[BackupShard, ...] = attrs.field(
        default=(),
        metadata=schema(
            "One entry per shard. PerShard backups snapshot the shards one after another, "
            "OneInstant ones all at one instant (spec.consistency).",
            max_items=MAX_SHARDS,
        ),
    )
    conditions: tuple[Condition, ...] = conditions(
        "Conditions in the Kubernetes API conventions, for kubectl wait and GitOps tools."
    )


@described(
    "ValkeyBackup is one backup of a ValkeyCluster to S3-compatible object storage: one RDB "
    "snapshot per shard, taken from an in-sync replica where the shard has one (the primary "
    "otherwise), streamed to the bucket with its SHA-256, then a manifest written last. Shards are "
    "snapshotted one after another, not at one instant, unless spec.consistency is OneInstant (a "
    "short write pause while every source forks). Restore it into a new cluster with "
    "ValkeyCluster spec.restore.backupName."
)
@attrs.frozen(kw_only=True)
class ValkeyBackup(Model):
    RESOURCE: ClassVar[Resource] = VALKEY_BACKUPS

    metadata: ObjectMeta
    spec: ValkeyBackupSpec
    status: ValkeyBackupStatus | None = None


# ---- the backup fields of a ValkeyCluster --------------------------------------------------------
_CRON_MESSAGE = "must be a cron expression of 5 fields (minute hour day-of-month month day-of-week)"

POINT_IN_TIME_DESCRIPTION = (
    "Continuous archiving of every node's history, the first part of point-in-time recovery: "
    "each Valkey pod runs an archiver container (the operator's image, `valkey-operator archive`) "
    "that ships its node's append-only file, written with aof-timestamp-enabled yes, to "
    "<path>/<namespace>/<cluster>/archive/<node ID>/ in destination, every second; "
    "status.pointInTime.archivedUntil says up to when every acknowledged write is stored. Needs "
    "persistence mode aof (the ValkeyConfig's spec.persistence); otherwise nothing is archived and "
    "status.pointInTime says why. Adding or removing it rolls every pod. A new cluster restores "
    "the history at a second with spec.restore.pointInTime."
)
RETENTION = r"^[1-9][0-9]{0,3}[hd]$"
_RETENTION_MESSAGE = "a retention is a whole number of hours or days, for example 72h or 7d"
_RETENTION_UNITS = {"h": 3600, "d": 86400}


def retention_seconds(retention: str) -> int:
    """72h, 7d, ... in seconds (the CRD's pattern admits nothing else)."""
    return int(retention[:-1]) * _RETENTION_UNITS[retention[-1]]


@attrs.frozen(kw_only=True)
class PointInTime(Model):
    """Archiving on (its presence), and how long its history is kept."""

    retention: str | None = attrs.field(
        default=None,
        metadata=schema(
            "How long history is kept, in whole hours or days (for example 72h or 7d): every moment "
            "of that window stays restorable, and what only older moments need (each node's "
            "sequences before its newest base stored at or before the window's start; the whole "
            "history of a node that left the cluster before it) is deleted, about every 10 minutes. "
            "Unset: nothing archived is deleted.",
            max_length=5,
            rules=[matches(RETENTION, _RETENTION_MESSAGE, got=_RETENTION_MESSAGE + "; got ")],
        ),
    )


@attrs.frozen(kw_only=True)
class BackupSchedule(Model):
    """Scheduled ValkeyBackups of one cluster and how many are kept."""

    schedule: str = attrs.field(
        metadata=schema(
            "When to back up: a cron expression of 5 fields (minute hour day-of-month month "
            "day-of-week, in UTC), for example 0 3 * * * for 03:00 every day.",
            min_length=9,
            max_length=MAX_SCHEDULE,
            rules=[matches(CRON_FIELDS, _CRON_MESSAGE, got=_CRON_MESSAGE + "; got ")],
        )
    )
    destination: BackupDestination = attrs.field(
        metadata=schema("Where each scheduled backup is written (as a ValkeyBackup's spec.destination).")
    )
    consistency: BackupConsistency | None = attrs.field(
        default=None,
        metadata=schema(
            "Each scheduled backup's spec.consistency. " + CONSISTENCY_DESCRIPTION, max_length=16
        ),
    )
    point_in_time: PointInTime | None = attrs.field(default=None, metadata=schema(POINT_IN_TIME_DESCRIPTION))
    keep: int = attrs.field(
        metadata=schema(
            f"How many completed scheduled backups to keep, 1 to {MAX_KEEP}: the oldest beyond it are "
            "deleted, their objects in the bucket with them.",
            fmt="int32",
            minimum=1,
            maximum=MAX_KEEP,
        )
    )


_ONE_SOURCE = (
    "a restore names one source: backupName (a ValkeyBackup), or pointInTime with clusterName and "
    "destination (an archived cluster's history)"
)
_ARCHIVE_NEEDS = (
    "pointInTime needs clusterName and destination (whose archive, and the bucket it is in); "
    "backupName takes neither"
)


@described(
    "Where a new cluster's data comes from: a Completed ValkeyBackup, or an archived cluster's "
    "history cut at a second (point-in-time recovery).",
    rules=[
        rule("has(self.backupName) != has(self.pointInTime)", _ONE_SOURCE, reason="FieldValueInvalid"),
        rule(
            "has(self.pointInTime) == has(self.clusterName) && "
            "has(self.pointInTime) == has(self.destination)",
            _ARCHIVE_NEEDS,
            reason="FieldValueInvalid",
        ),
    ],
)
@attrs.frozen(kw_only=True)
class Restore(Model):
    backup_name: str | None = attrs.field(
        default=None,
        metadata=name_ref(
            "Name of a Completed ValkeyBackup in the cluster's namespace to restore.", "ValkeyBackup"
        ),
    )
    point_in_time: str | None = attrs.field(
        default=None,
        metadata=schema(
            "The moment to restore to (RFC 3339, for example 2026-12-06T07:00:00Z; whole seconds): "
            "every write the source's primaries acknowledged in an earlier second is restored, and "
            "none from a later one. The archive must reach it (the source's "
            "status.pointInTime.archivedUntil at or after it) and hold a base stored at or before it.",
            max_length=64,
            fmt="date-time",
        ),
    )
    cluster_name: str | None = attrs.field(
        default=None,
        metadata=_cluster_name(
            "With pointInTime: the archived ValkeyCluster, in this namespace (it may be deleted: its "
            "archive stays in the bucket)."
        ),
    )
    destination: BackupDestination | None = attrs.field(
        default=None,
        metadata=schema("With pointInTime: the bucket the source archived to (its spec.backup.destination)."),
    )

    def moment(self) -> float | None:
        """pointInTime as Unix seconds (None without one)."""
        return parse_rfc3339(self.point_in_time)


@attrs.frozen(kw_only=True)
class RestoreStatus(Model):
    """How far the restore of spec.restore has come."""

    backup_name: str | None = _optional("The ValkeyBackup being restored.", MAX_NAME)
    point_in_time: str | None = _optional(
        "The moment an archived cluster's history is restored to (spec.restore.pointInTime).", 64
    )
    phase: RestorePhase | None = attrs.field(
        default=None,
        metadata=schema(
            "Pending, Loading (the shards load the backup's objects), Verified (every shard's key "
            "count matches the manifest) or Held (see reason; the cluster is not reported Active).",
            max_length=16,
        ),
    )
    reason: str | None = _reason("Why the restore is in its phase, one CamelCase word.")
    message: str | None = _optional("Human-readable explanation of the phase.", MAX_MESSAGE)
    shards: int | None = attrs.field(
        default=None,
        metadata=schema(
            "The source's shard count (the backup's, or the archived cluster's at the moment): the "
            "cluster is created with it.",
            fmt="int32",
            minimum=0,
        ),
    )
    keys: int | None = _total(
        "Keys the manifest records for the whole backup (a point-in-time restore has no manifest: unset)."
    )
    loaded_keys: int | None = _total("Keys the cluster's shards hold after loading.")


@attrs.frozen(kw_only=True)
class PointInTimeStatus(Model):
    """How far every node's history is archived (spec.backup.pointInTime)."""

    archived_until: str | None = _optional(
        "Every write a shard's primary acknowledged before this moment (RFC 3339) is stored in the "
        "bucket, for every shard: the oldest of the primaries' archivers' own marks, read from the "
        "bucket about every 15 seconds, so it trails the present by up to about 25 seconds.",
        64,
        fmt="date-time",
    )
    reason: str | None = _reason(
        "Why archiving is not whole, one CamelCase word: NeedsAppendOnly, OperatorImageUnknown, "
        "ArchiveNotStarted, ArchiveGap or a storage reason such as CredentialsInvalid."
    )
    message: str | None = _optional("Human-readable explanation of the reason.", MAX_MESSAGE)
