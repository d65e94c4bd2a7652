"""What a restoring cluster loads: its backup's manifest, read from storage once (SPEC 1.7), or the
archived histories of a restore to a moment (archive_source.py).

The cluster reconciler asks for the source on each pass of a restore that is
not verified yet. The ValkeyBackup comes from the shared cache (named index);
the manifest is read from the bucket, not from the backup's status: the bucket
is what the init containers will download from, and its manifest is the proof
that the backup finished. It is not trusted for that: at most MAX_MANIFEST_BYTES
are read, at most MAX_SHARDS shards accepted, and it must agree with the
ValkeyBackup's status (manifest_trust.py), or the restore is held with
ManifestUnsupported. The endpoint is dialled only at addresses the operator's
policy allows (EndpointRefused otherwise). A manifest once read and checked is
kept per backup uid and key. Everything that stops a restore is a RestoreHeld
with a reason word.
"""

from __future__ import annotations

from collections.abc import Callable

from controllers.cluster.archive_source import ArchiveSources
from controllers.cluster.decision.restore import RestoreHeld, RestoreSource
from controllers.cluster.render.restore import RestoreFetch, RestoreShard
from controllers.shared.manifest import MAX_MANIFEST_BYTES, Manifest, ManifestError, parse_manifest
from controllers.shared.manifest_trust import backup_prefix, disagreements, key_problem
from controllers.shared.storage import StoreUnavailable, destination_of, destination_store
from valkey_operator.api.backup import BackupPhase, Restore
from valkey_operator.core.client import Client
from valkey_operator.core.rest import Obj
from valkey_operator.objectstore import REFUSE_LOCAL, EndpointPolicy, ObjectTooLarge

WAITING = frozenset({"", BackupPhase.PENDING, BackupPhase.RUNNING})


class RestoreSources:
    def __init__(
        self,
        client: Client,
        backup: Callable[[str, str], Obj | None],
        image: str,
        endpoints: EndpointPolicy = REFUSE_LOCAL,
    ) -> None:
        self.client = client
        self.backup = backup
        self.image = image
        self.endpoints = endpoints
        self._manifests: dict[tuple[str, str], Manifest] = {}
        self.archives = ArchiveSources(client, image, endpoints)

    async def source(self, namespace: str, restore: Restore) -> RestoreSource | RestoreHeld:
        """A backup's shards, or (pointInTime) the archived histories that replay the moment."""
        if restore.backup_name is None:
            return await self.archives.source(namespace, restore)
        return await self._backup(namespace, restore.backup_name)

    async def _backup(self, namespace: str, backup_name: str) -> RestoreSource | RestoreHeld:
        backup = self.backup(namespace, backup_name)
        if backup is None:
            return RestoreHeld("BackupNotFound", f"ValkeyBackup {namespace}/{backup_name} not found")
        status = backup.get("status") or {}
        phase = str(status.get("phase") or "")
        if phase in WAITING:
            return RestoreHeld(
                "BackupNotCompleted", f"ValkeyBackup {backup_name} is {phase or 'Pending'}: waiting"
            )
        if phase != BackupPhase.COMPLETED:
            return RestoreHeld(
                "BackupFailed", f"ValkeyBackup {backup_name} is {phase}: {status.get('message', '')}"
            )
        if not self.image:
            return RestoreHeld(
                "RestoreImageUnknown", "the operator runs without --operator-image: no image for the restore"
            )
        destination = (backup.get("spec") or {}).get("destination") or {}
        where = destination_of(destination)
        manifest = await self._manifest(namespace, backup, destination)
        if isinstance(manifest, RestoreHeld):
            return manifest
        return RestoreSource(
            label=f"backup {backup_name}",
            shards=tuple(
                RestoreShard(
                    index=shard.index,
                    object_key=shard.object_key,
                    sha256=shard.sha256,
                    keys=shard.keys,
                    bytes=shard.bytes,
                    slots=shard.slots,
                )
                for shard in manifest.shards
            ),
            fetch=RestoreFetch(
                image=self.image,
                endpoint=where.endpoint,
                bucket=where.bucket,
                region=where.region,
                credentials_secret=str(destination.get("credentialsSecretName", "")),
                ca_secret=destination.get("caSecretName") or None,
            ),
        )

    async def _manifest(self, namespace: str, backup: Obj, destination: Obj) -> Manifest | RestoreHeld:
        key = str((backup.get("status") or {}).get("manifestKey") or "")
        held_key = (backup["metadata"].get("uid", ""), key)
        if held_key in self._manifests:
            return self._manifests[held_key]
        if not key:
            return RestoreHeld(
                "ManifestMissing", f"ValkeyBackup {backup['metadata']['name']} names no manifest"
            )
        spec = backup.get("spec") or {}
        prefix = backup_prefix(
            destination_of(destination).path,
            namespace,
            str(spec.get("clusterName", "")),
            str(backup["metadata"]["name"]),
        )
        if problem := key_problem(key, prefix):
            return RestoreHeld("ManifestUnsupported", f"manifest: {problem}")
        try:
            async with destination_store(self.client, namespace, destination, self.endpoints) as store:
                try:
                    manifest = parse_manifest(await store.get_json(key, MAX_MANIFEST_BYTES))
                except ObjectTooLarge as exc:
                    return RestoreHeld("ManifestUnsupported", f"manifest {key}: {exc}")
        except StoreUnavailable as exc:
            return RestoreHeld(exc.reason, f"manifest {key}: {exc}")
        except ManifestError as exc:
            return RestoreHeld("ManifestUnsupported", f"manifest {key}: {exc}")
        found = disagreements(manifest, (backup.get("status") or {}).get("shards") or [], prefix)
        if found:
            shown = "; ".join(found[:3]) + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
            return RestoreHeld(
                "ManifestUnsupported", f"manifest {key} disagrees with the ValkeyBackup: {shown}"
            )
        self._manifests[held_key] = manifest
        return manifest
