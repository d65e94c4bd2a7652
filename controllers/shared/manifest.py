"""The backup manifest: what a restore needs, written last (SPEC 1.7).

A backup is its manifest: shard objects without one are leftovers of a backup
that did not finish and are never restored. The manifest carries a format word
so that a restore refuses a layout it does not understand instead of loading
half of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from valkey_operator.api.limits import MAX_SHARDS

FORMAT = "valkey-operator.backup/v1"
MANIFEST_NAME = "manifest.json"
SHA256_HEX = 64
MAX_MANIFEST_BYTES = 1024 * 1024
"""The most of a manifest a restore reads (the bucket may be anyone's, and the operator is shared).
The largest manifest this operator can write is about 172 KiB: 64 shards (MAX_SHARDS) whose object
keys are S3's longest (1024 characters) and whose slots are all 16384 listed one by one; a usual one
at 64 shards is about 24 KiB. 1 MiB is six times that worst case, and a bound on the operator's
memory per restore read (tests/unit/controllers/test_manifest_trust.py measures both)."""


class ManifestError(ValueError):
    """The manifest is not one this operator can restore from; the message says why."""


def shard_object_name(index: int) -> str:
    return f"shard-{index}.rdb"


@attrs.frozen(kw_only=True)
class ShardEntry:
    """One shard's RDB as written: where, how big, its checksum and the keys it holds."""

    index: int
    slots: str
    object_key: str
    bytes: int
    sha256: str
    keys: int
    source_pod: str = ""
    source_role: str = ""
    rdb_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "slots": self.slots,
            "objectKey": self.object_key,
            "bytes": self.bytes,
            "sha256": self.sha256,
            "keys": self.keys,
            "sourcePod": self.source_pod,
            "sourceRole": self.source_role,
            "rdbVersion": self.rdb_version,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ShardEntry:
        try:
            entry = cls(
                index=int(raw["index"]),
                slots=str(raw["slots"]),
                object_key=str(raw["objectKey"]),
                bytes=int(raw["bytes"]),
                sha256=str(raw["sha256"]),
                keys=int(raw["keys"]),
                source_pod=str(raw.get("sourcePod", "")),
                source_role=str(raw.get("sourceRole", "")),
                rdb_version=str(raw.get("rdbVersion", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"a shard entry is incomplete: {exc!r}") from None
        if len(entry.sha256) != SHA256_HEX or entry.bytes < 0 or entry.keys < 0:
            raise ManifestError(f"shard {entry.index}: bad checksum, size or key count")
        return entry


@attrs.frozen(kw_only=True)
class Manifest:
    backup: str
    namespace: str
    cluster: str
    started_at: str
    completed_at: str
    valkey_version: str
    shards: tuple[ShardEntry, ...]
    consistency: str = "PerShard"
    """PerShard or OneInstant (ValkeyBackup spec.consistency); older manifests: PerShard."""
    write_pause_seconds: float | None = None
    """OneInstant: the longest write pause a client saw on a primary."""

    @property
    def total_bytes(self) -> int:
        return sum(shard.bytes for shard in self.shards)

    @property
    def total_keys(self) -> int:
        return sum(shard.keys for shard in self.shards)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "backup": self.backup,
            "namespace": self.namespace,
            "cluster": self.cluster,
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
            "valkeyVersion": self.valkey_version,
            "totalBytes": self.total_bytes,
            "totalKeys": self.total_keys,
            "consistency": self.consistency,
            **({} if self.write_pause_seconds is None else {"writePauseSeconds": self.write_pause_seconds}),
            "shards": [shard.to_dict() for shard in self.shards],
        }


def parse_manifest(document: Any) -> Manifest:
    """The manifest read back; ManifestError for another format or a damaged document."""
    if not isinstance(document, Mapping):
        raise ManifestError("the manifest is not a JSON object")
    found = document.get("format")
    if found != FORMAT:
        raise ManifestError(f"manifest format {found!r} is not {FORMAT!r}: written by another version")
    raw_shards = document.get("shards")
    if not isinstance(raw_shards, Sequence) or not raw_shards:
        raise ManifestError("the manifest lists no shards")
    if len(raw_shards) > MAX_SHARDS:
        raise ManifestError(
            f"the manifest lists {len(raw_shards)} shards, more than the {MAX_SHARDS} a cluster may have"
        )
    shards = tuple(sorted((ShardEntry.from_dict(raw) for raw in raw_shards), key=lambda s: s.index))
    if [shard.index for shard in shards] != list(range(len(shards))):
        raise ManifestError("the manifest's shard indexes are not 0..n-1")
    try:
        return Manifest(
            backup=str(document["backup"]),
            namespace=str(document["namespace"]),
            cluster=str(document["cluster"]),
            started_at=str(document["startedAt"]),
            completed_at=str(document["completedAt"]),
            valkey_version=str(document.get("valkeyVersion", "")),
            shards=shards,
            consistency=str(document.get("consistency") or "PerShard"),
            write_pause_seconds=_seconds(document.get("writePauseSeconds")),
        )
    except KeyError as exc:
        raise ManifestError(f"the manifest has no {exc.args[0]}") from None


def _seconds(raw: Any) -> float | None:
    return float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None
