"""Shards streamed at once: the error a failed pass reports (first_failure, pure)."""

from __future__ import annotations

from controllers.backup.reconciler import BackupFailed, first_failure
from valkey_operator.objectstore import StorageError


def test_a_shards_own_failure_is_reported_over_the_others() -> None:
    shard = BackupFailed("ShardReadFailed", "shard 1 from vk-1-0: no RDB bytes for 30s")
    storage = StorageError("StorageFailed", "UploadPart b/k part 3: connection reset")
    group = ExceptionGroup("shards", [RuntimeError("other"), ExceptionGroup("inner", [storage, shard])])
    assert first_failure(group) is shard


def test_a_storage_failure_is_reported_when_no_shard_failed_on_its_own() -> None:
    storage = StorageError("StorageFailed", "CompleteMultipartUpload b/k: 500")
    assert first_failure(ExceptionGroup("shards", [RuntimeError("x"), storage])) is storage
    other = RuntimeError("unexpected")
    assert first_failure(ExceptionGroup("shards", [other])) is other
