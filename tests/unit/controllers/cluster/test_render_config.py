"""valkey.conf: operator-owned directives, TLS and plain, the maxmemory default, tunables passed through."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from render_support import parse_valkey_conf, resolved

from controllers.cluster.render import config as conf
from controllers.cluster.render.config import quote, render_valkey_conf
from valkey_operator.api.tunables import RUNTIME_TUNABLES, TUNABLES


def directives(text: str) -> dict[str, list[str]]:
    parsed = parse_valkey_conf(text)
    keys = [args[0] for args in parsed]
    assert len(keys) == len(set(keys)), f"a directive appears twice: {keys}"
    return {args[0]: args[1:] for args in parsed}


def test_plain_mode_owned_directives() -> None:
    found = directives(render_valkey_conf(resolved(), tls=False))
    assert found["port"] == ["6379"]
    assert found["cluster-port"] == ["16379"]
    assert found["cluster-enabled"] == ["yes"]
    assert found["cluster-config-file"] == ["/var/lib/valkey/cluster/nodes.conf"]  # the tmpfs emptyDir
    assert found["cluster-allow-replica-migration"] == ["no"]
    assert found["dir"] == ["/data"]
    assert found["save"] == [""]
    assert found["appendonly"] == ["no"]
    # no RDB is kept on the disk emptyDir: Valkey would load it at start without its identity
    assert found["repl-diskless-load"] == ["on-empty-db"]
    assert found["rdb-del-sync-files"] == ["yes"]
    assert found["aclfile"] == ["/etc/valkey/internal/users.acl"]
    assert found["acl-pubsub-default"] == ["resetchannels"]
    assert found["include"] == ["/etc/valkey/internal/replication.conf"]
    assert found["shutdown-on-sigterm"] == ["failover"]
    assert found["shutdown-timeout"] == ["10"]
    # per-pod values come from the command line, never the shared file
    assert "bind" not in found
    assert "cluster-announce-ip" not in found
    assert not any(key.startswith("tls-") for key in found)


def test_tls_mode_is_tls_only() -> None:
    found = directives(render_valkey_conf(resolved(), tls=True))
    assert found["port"] == ["0"]
    assert found["tls-port"] == ["6379"]
    assert found["tls-cluster"] == ["yes"]
    assert found["tls-replication"] == ["yes"]
    assert found["tls-auth-clients"] == ["optional"]
    assert found["tls-cert-file"] == ["/etc/valkey/tls/tls.crt"]
    assert found["tls-key-file"] == ["/etc/valkey/tls/tls.key"]
    assert found["tls-ca-cert-file"] == ["/etc/valkey/tls/ca.crt"]
    assert found["cluster-port"] == ["16379"]


def test_maxmemory_defaults_to_three_quarters_of_the_limit() -> None:
    assert conf.runtime_settings(resolved())["maxmemory"] == str(805306368)
    assert conf.runtime_settings(resolved(resources={"memory": "512Mi"}))["maxmemory"] == str(402653184)
    assert conf.runtime_settings(resolved(resources={"memory": "1G"}))["maxmemory"] == "750000000"


def test_maxmemory_follows_the_memory_limit_not_the_request() -> None:
    config = resolved(resources={"memory": "1Gi"}, limits={"memory": "2Gi"})
    assert conf.runtime_settings(config)["maxmemory"] == str(2 * 805306368)
    only_limit = resolved(resources={}, limits={"memory": "512Mi"})
    assert conf.runtime_settings(only_limit)["maxmemory"] == str(402653184)


def test_no_memory_limit_means_no_maxmemory_default() -> None:
    assert "maxmemory" not in conf.runtime_settings(resolved(resources={"cpu": "1"}))


def test_config_overrides_operator_defaults() -> None:
    config = resolved(
        valkey={"maxmemory": "2gb", "Cluster-Node-Timeout": "5000", "maxmemory-policy": "volatile-lru"}
    )
    runtime = conf.runtime_settings(config)
    assert runtime["maxmemory"] == "2gb"
    assert runtime["cluster-node-timeout"] == "5000"
    assert runtime["maxmemory-policy"] == "volatile-lru"


def test_only_startup_tunables_are_in_the_file_sorted_and_quoted() -> None:
    """Runtime tunables are CONFIG SET by the operator: a value Valkey refuses must never stop a
    server from starting, and a change must never need a new file."""
    config = resolved(
        valkey={
            "notify-keyspace-events": "Ex",
            "latency-tracking-info-percentiles": "50 99 99.9",
            "io-threads": "2",
            "lazyfree-lazy-eviction": "yes",
        }
    )
    found = directives(render_valkey_conf(config, tls=False))
    assert {key for key in found if key in TUNABLES} == set(conf.startup_settings(config))
    for runtime in (
        "notify-keyspace-events",
        "latency-tracking-info-percentiles",
        "maxmemory",
        "maxmemory-policy",
    ):
        assert runtime not in found
    assert conf.runtime_settings(config)["latency-tracking-info-percentiles"] == "50 99 99.9"


def test_operator_owned_directives_cannot_be_overridden() -> None:
    """Admission rejects these; a config that slipped past it still cannot override them."""
    config = resolved(valkey={"port": "7000", "aclfile": "/tmp/x", "bind": "0.0.0.0", "maxclients": "100"})
    found = directives(render_valkey_conf(config, tls=False))
    assert found["port"] == ["6379"]
    assert found["aclfile"] == ["/etc/valkey/internal/users.acl"]
    assert "bind" not in found
    assert conf.runtime_settings(config)["maxclients"] == "100"
    assert "port" not in conf.tunables(config) and "aclfile" not in conf.tunables(config)


def test_rendering_is_deterministic() -> None:
    a = resolved(valkey={"timeout": "10", "hz": "20", "io-threads": "2"})
    b = resolved(valkey={"io-threads": "2", "hz": "20", "timeout": "10"})
    assert render_valkey_conf(a, tls=False) == render_valkey_conf(b, tls=False)


def test_runtime_and_startup_split() -> None:
    config = resolved(valkey={"io-threads": "4", "maxmemory-policy": "allkeys-lfu", "timeout": "30"})
    runtime = conf.runtime_settings(config)
    assert runtime == {
        "cluster-node-timeout": "15000",
        "io-threads": "4",
        "maxmemory": "805306368",
        "maxmemory-policy": "allkeys-lfu",
        "timeout": "30",
    }
    assert conf.startup_settings(config) == {}  # Valkey 9 takes every allowlisted tunable at runtime
    assert set(runtime) <= RUNTIME_TUNABLES


def test_replication_auth_file() -> None:
    text = conf.replication_auth_conf("valkey-replication", "s3cret")
    assert parse_valkey_conf(text) == [["primaryuser", "valkey-replication"], ["primaryauth", "s3cret"]]


@given(
    st.text(
        alphabet=st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)), max_size=40
    )
)
def test_any_value_round_trips_through_valkeys_parser(value: str) -> None:
    """Values may hold anything but CR/LF (admission): quoting must keep them one exact argument."""
    assert parse_valkey_conf(f"notify-keyspace-events {quote(value)}\n") == [
        ["notify-keyspace-events", value]
    ]
