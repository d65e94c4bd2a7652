"""A cluster created from a backup (spec.restore, SPEC 1.7): the facts and the pure rules.

The restore runs at the backup's layout, then the cluster becomes what its spec
asks for through the ordinary paths (scaling with atomic slot migration, new
replicas syncing from their primaries):
1. one primary per backup shard, no replicas; each new pod's init container
   (the operator's image, `valkey-operator restore-fetch`) downloads its
   shard's RDB, checks its sha256 and puts it where valkey-server loads it at
   start; a node that loads keys for slots nobody serves takes those slots
   itself (Valkey's own rule at start-up);
2. no slot is assigned and none moves until every shard's server has loaded
   its file, and loaded exactly the keys the manifest counts (INFO persistence:
   keys loaded plus keys already expired): an assignment before a load could
   give a slot with data to an empty node;
3. the rest of each shard's slots are assigned; once every slot is served and
   every count matched, status.restore is Verified and the next pass steers
   toward spec.shards and spec.replicasPerShard. The cluster is never Active
   before that.
A restore that cannot start (no such backup, not Completed, credentials,
storage, a manifest of another format) is held: nothing is created and the
status says why. A count that does not match holds it too, with the shard.

A restore to a moment (spec.restore.pointInTime) runs the same way at the
source's shard count then (archive_restore.py): each new primary's init
container fetches one node's archived history and cuts it at the second; a
history counts nothing ahead, so each shard's load is reported (its keys once
the server has loaded) rather than compared.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from controllers.cluster.render.restore import ArchiveShard, RestoreFetch, RestoreShard
from valkey_operator.api.backup import Restore, RestorePhase, RestoreStatus


@attrs.frozen(kw_only=True)
class RestoreSource:
    label: str
    """What is restored, for messages: `backup nightly` or `cluster shop at 2026-12-06T07:00:00Z`."""
    shards: tuple[RestoreShard, ...] | tuple[ArchiveShard, ...]
    fetch: RestoreFetch

    @property
    def keys(self) -> int | None:
        """The keys the source holds, when it counts them (a backup's manifest does)."""
        counts = [shard.keys for shard in self.shards]
        return None if None in counts else sum(count or 0 for count in counts)


@attrs.frozen
class RestoreHeld:
    """Why the restore cannot go on (a reason word and a message without secrets)."""

    reason: str
    message: str


def restoring(spec_restore: object | None, recorded: RestoreStatus | None) -> bool:
    """spec.restore is set and the recorded status.restore does not say it was verified."""
    phase = recorded.phase if recorded is not None else None
    return spec_restore is not None and phase is not RestorePhase.VERIFIED


@attrs.frozen(kw_only=True)
class Progress:
    """How far the load got: per shard, the keys its server reports it loaded (None: not yet)."""

    source: RestoreSource
    loaded: Mapping[int, int | None]

    @property
    def all_loaded(self) -> bool:
        return all(self._done(shard) for shard in self.source.shards)

    def _done(self, shard: RestoreShard | ArchiveShard) -> bool:
        loaded = self.loaded.get(shard.index)
        return loaded is not None and (shard.keys is None or loaded == shard.keys)

    @property
    def loaded_keys(self) -> int:
        return sum(count or 0 for count in self.loaded.values())

    def mismatches(self) -> list[str]:
        return [
            f"shard {shard.index} loaded {self.loaded[shard.index]} keys, the backup holds {shard.keys}"
            for shard in self.source.shards
            if shard.keys is not None
            and self.loaded.get(shard.index) is not None
            and self.loaded[shard.index] != shard.keys
        ]

    def message(self) -> str:
        done = sum(1 for shard in self.source.shards if self._done(shard))
        of = f" of {self.source.keys}" if self.source.keys is not None else ""
        return (
            f"restoring {self.source.label}: {done} of {len(self.source.shards)} shard(s) loaded, "
            f"{self.loaded_keys}{of} keys"
        )

    def per_shard(self) -> str:
        """Each shard's loaded keys, for the message that reports a restore verified."""
        return ", ".join(f"shard {index} {self.loaded.get(index)}" for index in sorted(self.loaded))


def restore_status(
    spec: Restore,
    phase: RestorePhase,
    source: RestoreSource | None,
    progress: Progress | None,
    reason: str,
    message: str,
) -> RestoreStatus:
    """status.restore: the phase and why, with the source's layout and the keys loaded once known."""
    return RestoreStatus(
        backup_name=spec.backup_name,
        point_in_time=spec.point_in_time,
        phase=phase,
        reason=str(reason),
        message=message,
        shards=len(source.shards) if source is not None else None,
        keys=source.keys if source is not None else None,
        loaded_keys=progress.loaded_keys if progress is not None else None,
    )
