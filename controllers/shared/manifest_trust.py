"""A manifest read from a bucket is checked against what the operator itself recorded (pure, SPEC 1.7).

The bucket is the tenant's (its endpoint, its credentials): anyone with write
access to it can rewrite the manifest. What the operator recorded is the
ValkeyBackup's status, written through the status subresource while the
backup ran. A restore goes on only when the manifest agrees with it:
- every object key lies under the backup's own prefix (the destination's path,
  then namespace/cluster/backup, as the backup reconciler writes them): no
  other backup's objects, no other tenant's, no ".." or empty segment a
  filesystem-backed store might resolve, no leading "/";
- the shards are the ones status.shards lists, each with the same object key,
  size and SHA-256 (the init container checks the download against that
  SHA-256, so an object swapped in the bucket is refused too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controllers.shared.manifest import Manifest
from valkey_operator.objectstore.model import object_key

BAD_SEGMENTS = frozenset({"", ".", ".."})


def backup_prefix(path: str, namespace: str, cluster: str, backup: str) -> str:
    """The folder of one backup's objects: what the backup reconciler passes to store.key."""
    return object_key(path, namespace, cluster, backup)


def key_problem(key: str, prefix: str) -> str | None:
    """Why key is not an object of the backup at prefix; None when it is."""
    if not key.startswith(prefix + "/"):
        return f"object key {key!r} is not under the backup's prefix {prefix + '/'!r}"
    if "\\" in key or any(segment in BAD_SEGMENTS for segment in key.split("/")):
        return f"object key {key!r} has an empty, '.' or '..' segment"
    return None


def disagreements(manifest: Manifest, recorded: Sequence[Mapping[str, object]], prefix: str) -> list[str]:
    """Every way manifest differs from the backup's status.shards, or leaves the backup's prefix."""
    found = [problem for shard in manifest.shards if (problem := key_problem(shard.object_key, prefix))]
    by_index: dict[object, Mapping[str, object]] = {entry.get("index"): entry for entry in recorded}
    if len(recorded) != len(manifest.shards):
        found.append(
            f"the manifest lists {len(manifest.shards)} shards, the ValkeyBackup's status {len(recorded)}"
        )
    for shard in manifest.shards:
        entry = by_index.get(shard.index)
        if entry is None:
            found.append(f"shard {shard.index} is not in the ValkeyBackup's status")
            continue
        for field, wanted in (
            ("objectKey", shard.object_key),
            ("bytes", shard.bytes),
            ("sha256", shard.sha256),
        ):
            if (recorded_value := entry.get(field)) != wanted:
                found.append(
                    f"shard {shard.index}: the manifest's {field} {wanted!r} is not the status's "
                    f"{recorded_value!r}"
                )
    return found
