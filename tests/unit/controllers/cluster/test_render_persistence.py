"""Persistence in valkey.conf and in the template hash (SPEC 1.6), pure.

none renders exactly the cache's file of before; rdb and aof put nodes.conf beside the data on
the claim (/data). A mode, appendfsync or storage class change rolls the pods; a size or
reclaimPolicy change does not (claims grow in place; owner references are patched).
"""

from __future__ import annotations

import attrs
import pytest
from render_support import context, parse_valkey_conf, resolved

from controllers.cluster.render.config import RDB_SAVE_POINTS, render_valkey_conf
from controllers.cluster.render.template import template_hash
from controllers.shared.config_resolve import ResolvedConfig
from controllers.shared.persistence import Persistence, merge_persistence
from valkey_operator.api.config import Appendfsync, PersistenceMode

CACHE_FILE = """\
# Rendered by valkey-operator; edits are overwritten.
# bind and cluster-announce-ip are passed on the command line ($(POD_IP)).
# Owned by the operator:
port 6379
cluster-port 16379
cluster-enabled yes
cluster-config-file /var/lib/valkey/cluster/nodes.conf
cluster-allow-replica-migration no
dir /data
save ""
appendonly no
repl-diskless-load on-empty-db
rdb-del-sync-files yes
aclfile /etc/valkey/internal/users.acl
acl-pubsub-default resetchannels
include /etc/valkey/internal/replication.conf
shutdown-on-sigterm failover
shutdown-timeout 10
# Startup-only tunables (operator defaults, overridden by the ValkeyConfig chain);
# runtime tunables are applied by the operator with CONFIG SET:
"""
"""The file of every cluster before persistence existed, verbatim."""


def persistent(**spec: object) -> ResolvedConfig:
    merged = merge_persistence([{"persistence": spec}])
    assert isinstance(merged, Persistence), merged
    return attrs.evolve(resolved(), persistence=merged)


def directives(config: ResolvedConfig) -> dict[str, list[str]]:
    parsed = parse_valkey_conf(render_valkey_conf(config, tls=False))
    keys = [args[0] for args in parsed]
    assert len(keys) == len(set(keys)), f"a directive appears twice: {keys}"
    return {args[0]: args[1:] for args in parsed}


def test_mode_none_renders_the_cache_file_of_before_byte_for_byte() -> None:
    assert render_valkey_conf(resolved(), tls=False) == CACHE_FILE
    assert render_valkey_conf(persistent(mode="none", size="1Gi"), tls=False) == CACHE_FILE


def test_rdb_keeps_identity_and_snapshots_on_the_claim() -> None:
    found = directives(persistent(mode="rdb", size="10Gi"))
    assert found["dir"] == ["/data"]
    assert found["cluster-config-file"] == ["/data/nodes.conf"]
    assert found["save"] == [RDB_SAVE_POINTS] == ["3600 1 300 100 60 10000"]
    assert found["appendonly"] == ["no"]
    # a full sync lands on disk as the replica's dump.rdb, kept (persistence is on)
    assert found["repl-diskless-load"] == ["disabled"]
    assert "rdb-del-sync-files" not in found
    assert "appendfsync" not in found


@pytest.mark.parametrize("fsync", [None, "everysec", "always"])
def test_aof_appends_every_write_with_its_fsync_policy(fsync: str | None) -> None:
    spec = {"mode": "aof", "size": "1Gi", **({"appendfsync": fsync} if fsync else {})}
    found = directives(persistent(**spec))
    assert found["dir"] == ["/data"]
    assert found["cluster-config-file"] == ["/data/nodes.conf"]
    assert found["appendonly"] == ["yes"]
    assert found["appendfsync"] == [fsync or "everysec"]
    assert found["save"] == [""]  # the AOF is what a restart reads; no extra snapshots
    assert found["repl-diskless-load"] == ["on-empty-db"]
    assert "aof-use-rdb-preamble" not in found  # Valkey's default (yes) stands
    assert "rdb-del-sync-files" not in found


def test_only_the_persistence_lines_differ_between_modes() -> None:
    cache = directives(resolved())
    for config in (persistent(mode="rdb", size="1Gi"), persistent(mode="aof", size="1Gi")):
        found = directives(config)
        same = {key for key in cache.keys() & found.keys() if cache[key] == found[key]}
        persistence = {
            "cluster-config-file",
            "save",
            "appendonly",
            "appendfsync",
            "repl-diskless-load",
            "rdb-del-sync-files",
        }
        assert (cache.keys() | found.keys()) - same <= persistence


def hash_with(**spec: object) -> str:
    return template_hash(context(config=persistent(**spec)))


def test_template_hash_of_a_cache_is_unchanged() -> None:
    """The golden hash of test_render_pods: mode none (or a size with it) rolls no existing cluster."""
    assert template_hash(context()) == "68c4f487d83dacc8"
    assert hash_with(mode="none", size="5Gi", reclaimPolicy="Retain") == "68c4f487d83dacc8"


def test_template_hash_rolls_on_mode_fsync_and_storage_class() -> None:
    hashes = {
        hash_with(),
        hash_with(mode="rdb", size="1Gi"),
        hash_with(mode="aof", size="1Gi"),
        hash_with(mode="aof", size="1Gi", appendfsync="always"),
        hash_with(mode="rdb", size="1Gi", storageClassName="fast"),
    }
    assert len(hashes) == 5


def test_template_hash_ignores_size_and_reclaim_policy() -> None:
    base = hash_with(mode="aof", size="1Gi")
    assert hash_with(mode="aof", size="100Gi") == base
    assert hash_with(mode="aof", size="1Gi", reclaimPolicy="Retain") == base
    assert hash_with(mode="aof", size="1Gi", appendfsync="everysec") == base  # the default, spelled out


def test_the_render_context_carries_the_resolved_persistence() -> None:
    ctx = context(config=persistent(mode="aof", size="2Gi", appendfsync="always", storageClassName="fast"))
    assert ctx.persistence == Persistence(
        mode=PersistenceMode.AOF,
        size="2Gi",
        size_bytes=2 * 2**30,
        storage_class_name="fast",
        appendfsync=Appendfsync.ALWAYS,
    )
    assert context().persistence == Persistence() and not context().persistence.enabled
