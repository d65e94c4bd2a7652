"""The backup manifest round-trips, and a restore refuses one it cannot read whole."""

from __future__ import annotations

import attrs
import pytest

from controllers.shared.manifest import FORMAT, Manifest, ManifestError, ShardEntry, parse_manifest


def manifest() -> Manifest:
    shards = tuple(
        ShardEntry(
            index=i,
            slots=f"{i}",
            object_key=f"p/ns/vk/b/shard-{i}.rdb",
            bytes=10 + i,
            sha256="ab" * 32,
            keys=i,
        )
        for i in range(3)
    )
    return Manifest(
        backup="b",
        namespace="ns",
        cluster="vk",
        started_at="2026-12-03T00:00:00Z",
        completed_at="2026-12-03T00:00:05Z",
        valkey_version="9.1.2",
        shards=shards,
    )


def test_round_trip_and_totals() -> None:
    written = manifest()
    document = written.to_dict()
    assert document["format"] == FORMAT and document["totalBytes"] == 33 and document["totalKeys"] == 3
    assert parse_manifest(document) == written


def test_a_one_instant_manifest_records_its_pause_and_an_older_one_reads_as_per_shard() -> None:
    written = attrs.evolve(manifest(), consistency="OneInstant", write_pause_seconds=0.042)
    document = written.to_dict()
    assert document["consistency"] == "OneInstant" and document["writePauseSeconds"] == 0.042
    assert parse_manifest(document) == written
    older = {k: v for k, v in manifest().to_dict().items() if k != "consistency"}
    assert parse_manifest(older).consistency == "PerShard"
    assert parse_manifest(older).write_pause_seconds is None


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda d: {**d, "format": "valkey-operator.backup/v9"}, "another version"),
        (lambda d: {**d, "shards": []}, "no shards"),
        (lambda d: {**d, "shards": d["shards"][1:]}, "0..n-1"),
        (lambda d: {**d, "shards": [{**d["shards"][0], "sha256": "x"}, *d["shards"][1:]]}, "checksum"),
        (lambda d: {k: v for k, v in d.items() if k != "cluster"}, "no cluster"),
        (lambda d: [d], "not a JSON object"),
    ],
)
def test_a_manifest_of_another_format_or_damaged_is_refused(damage: object, words: str) -> None:
    with pytest.raises(ManifestError, match=words):
        parse_manifest(damage(manifest().to_dict()))  # type: ignore[operator]
