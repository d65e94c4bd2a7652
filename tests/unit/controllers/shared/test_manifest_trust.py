"""A manifest read from the bucket is held to what the operator recorded: its size, its shard count,
its keys under the backup's own prefix, and each shard as the ValkeyBackup's status.shards has it."""

from __future__ import annotations

import json

import pytest

from controllers.shared.manifest import (
    MAX_MANIFEST_BYTES,
    Manifest,
    ManifestError,
    ShardEntry,
    parse_manifest,
    shard_object_name,
)
from controllers.shared.manifest_trust import backup_prefix, disagreements, key_problem
from valkey_operator.api.limits import MAX_SHARDS

PREFIX = backup_prefix("team-a/", "shop", "cache", "nightly")


def entry(index: int, prefix: str = PREFIX, **changes: object) -> ShardEntry:
    values: dict[str, object] = {
        "index": index,
        "slots": f"{index}",
        "object_key": f"{prefix}/{shard_object_name(index)}",
        "bytes": 100 + index,
        "sha256": f"{index:02x}" * 32,
        "keys": index,
        **changes,
    }
    return ShardEntry(**values)  # type: ignore[arg-type]


def manifest(*shards: ShardEntry) -> Manifest:
    return Manifest(
        backup="nightly",
        namespace="shop",
        cluster="cache",
        started_at="2026-12-04T00:00:00Z",
        completed_at="2026-12-04T00:00:05Z",
        valkey_version="9.0.1",
        shards=shards,
    )


def status_of(found: Manifest) -> list[dict[str, object]]:
    """status.shards as the backup reconciler writes them for this manifest."""
    return [
        {
            "index": s.index,
            "slots": s.slots,
            "objectKey": s.object_key,
            "bytes": s.bytes,
            "keys": s.keys,
            "sha256": s.sha256,
        }
        for s in found.shards
    ]


def test_the_prefix_is_the_one_the_backup_reconciler_writes_under() -> None:
    assert PREFIX == "team-a/shop/cache/nightly"
    assert backup_prefix("", "shop", "cache", "nightly") == "shop/cache/nightly"


@pytest.mark.parametrize(
    ("key", "refused"),
    [
        (f"{PREFIX}/shard-0.rdb", False),
        (f"{PREFIX}/manifest.json", False),
        (f"{PREFIX}-other/shard-0.rdb", True),  # a sibling sharing the prefix's text
        ("team-a/shop/cache/weekly/shard-0.rdb", True),  # another backup of the same cluster
        ("other-tenant/secrets/shard-0.rdb", True),
        (f"/{PREFIX}/shard-0.rdb", True),
        (f"{PREFIX}/../../../other/shard-0.rdb", True),
        (f"{PREFIX}/./shard-0.rdb", True),
        (f"{PREFIX}//shard-0.rdb", True),
        (f"{PREFIX}/..\\shard-0.rdb", True),
        (PREFIX, True),
    ],
)
def test_an_object_key_must_lie_under_the_backup_s_own_prefix(key: str, refused: bool) -> None:
    assert (key_problem(key, PREFIX) is not None) == refused


def test_a_manifest_that_agrees_with_the_status_passes() -> None:
    found = manifest(entry(0), entry(1))
    assert disagreements(found, status_of(found), PREFIX) == []


def test_each_way_a_manifest_can_differ_from_the_status_is_named() -> None:
    recorded = status_of(manifest(entry(0), entry(1)))
    swapped = manifest(entry(0, sha256="ee" * 32), entry(1, bytes=7))
    assert disagreements(swapped, recorded, PREFIX) == [
        f"shard 0: the manifest's sha256 {'ee' * 32!r} is not the status's {'00' * 32!r}",
        "shard 1: the manifest's bytes 7 is not the status's 101",
    ]
    elsewhere = manifest(entry(0), entry(1, object_key="team-a/shop/cache/weekly/shard-1.rdb"))
    found = disagreements(elsewhere, recorded, PREFIX)
    assert found[0].startswith("object key 'team-a/shop/cache/weekly/shard-1.rdb' is not under")
    assert any("objectKey" in line for line in found)
    more = manifest(entry(0), entry(1), entry(2))
    assert disagreements(more, recorded, PREFIX) == [
        "the manifest lists 3 shards, the ValkeyBackup's status 2",
        "shard 2 is not in the ValkeyBackup's status",
    ]
    assert disagreements(manifest(entry(0)), [], PREFIX)[0] == (
        "the manifest lists 1 shards, the ValkeyBackup's status 0"
    )


def test_more_shards_than_admission_allows_are_refused() -> None:
    at_limit = manifest(*(entry(i) for i in range(MAX_SHARDS))).to_dict()
    assert len(parse_manifest(at_limit).shards) == MAX_SHARDS
    over = {**at_limit, "shards": [*at_limit["shards"], entry(MAX_SHARDS).to_dict()]}
    with pytest.raises(ManifestError, match=f"lists {MAX_SHARDS + 1} shards, more than the {MAX_SHARDS}"):
        parse_manifest(over)


def written_size(found: Manifest) -> int:
    """The manifest's bytes as ObjectStore.put_json writes them."""
    return len(json.dumps(found.to_dict(), indent=2, sort_keys=True).encode()) + 1


def test_the_size_cap_is_well_above_the_largest_manifest_the_operator_writes() -> None:
    """64 shards: a usual manifest is about 24 KiB; the largest one possible (S3's longest keys, the
    longest names, all 16384 slots listed one by one) about 172 KiB. The cap is 1 MiB."""
    usual = manifest(
        *(
            entry(
                i,
                prefix="backups/shop/cache/cache-nightly-20261204",
                slots=f"{i * 256}-{i * 256 + 255}",
                source_pod="cache-0-abcde",
                source_role="replica",
                rdb_version="12",
                bytes=10**12,
                keys=10**10,
            )
            for i in range(MAX_SHARDS)
        )
    )
    names = ("n" * 63, "c" * 50, "b" * 253)
    path = "p" * (1024 - sum(len(name) for name in names) - len("/shard-63.rdb") - 3)
    longest = backup_prefix(path, *names)
    worst = manifest(
        *(
            entry(
                i,
                prefix=longest,
                slots=",".join(str(s) for s in range(i, 16384, MAX_SHARDS)),
                source_pod="p" * 63,
                source_role="replica",
                rdb_version="12",
                bytes=10**12,
                keys=10**10,
            )
            for i in range(MAX_SHARDS)
        )
    )
    assert max(len(shard.object_key) for shard in worst.shards) == 1024
    assert 20_000 < written_size(usual) < 30_000
    assert 150_000 < written_size(worst) < 200_000
    assert written_size(worst) * 5 < MAX_MANIFEST_BYTES
