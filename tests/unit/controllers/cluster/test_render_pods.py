"""The Valkey pod: restricted Pod Security Standard, identity, volumes, probes, placement, template hash."""

from __future__ import annotations

from typing import Any

import pytest
from render_support import UID, context, parse_valkey_conf, resolved

from controllers.cluster.render.config import SHUTDOWN_TIMEOUT_S, render_valkey_conf
from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.pods import render_pod
from controllers.cluster.render.template import shape_hash, template_hash
from controllers.shared import names
from valkey_operator.api.cluster import ValkeyCluster, ZoneSpread

Obj = dict[str, Any]


def pod(**kwargs: Any) -> Obj:
    return render_pod(context(**kwargs), 1, "cache-1-bcdfg")


def container(p: Obj) -> Obj:
    [only] = p["spec"]["containers"]
    return only


def test_restricted_pod_security_standard() -> None:
    p = pod(config=resolved(pod_security={"runAsUser": 1001, "runAsGroup": 1002, "fsGroup": 1003}))
    spec = p["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1001,
        "runAsGroup": 1002,
        "fsGroup": 1003,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    security = container(p)["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["privileged"] is False
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    # restricted forbids these outright; the renderer never sets them
    for forbidden in ("hostNetwork", "hostPID", "hostIPC"):
        assert forbidden not in spec
    assert all("hostPath" not in volume for volume in spec["volumes"])
    # restricted allows only these volume types (a Memory emptyDir is still an emptyDir)
    allowed = {"emptyDir", "configMap", "secret", "projected", "downwardAPI", "persistentVolumeClaim"}
    assert all(set(volume) - {"name"} <= allowed for volume in spec["volumes"]), spec["volumes"]
    assert all("hostPort" not in port for port in container(p)["ports"])
    assert "add" not in security["capabilities"]


def test_identity_and_ownership() -> None:
    p = pod(podAnnotations={"example.com/team": "a"})
    meta = p["metadata"]
    assert meta["name"] == "cache-1-bcdfg"
    assert meta["namespace"] == "team-a"
    assert meta["annotations"] == {"example.com/team": "a"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "valkey.gomomento.com/v1alpha1",
            "kind": "ValkeyCluster",
            "name": "cache",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"][names.SHARD_LABEL] == "1"
    assert meta["labels"][names.TEMPLATE_HASH_LABEL] == template_hash(
        context(podAnnotations={"example.com/team": "a"})
    )
    spec = p["spec"]
    assert spec["hostname"] == "cache-1-bcdfg"
    assert spec["subdomain"] == "cache"
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert spec["restartPolicy"] == "Never"
    assert spec["terminationGracePeriodSeconds"] > SHUTDOWN_TIMEOUT_S + 15


def test_no_annotations_key_without_pod_annotations() -> None:
    assert "annotations" not in pod()["metadata"]


def test_container_binds_and_announces_the_pod_ip() -> None:
    c = container(pod())
    assert c["image"] == "valkey/valkey:9.1.2"
    command = c["command"]
    assert command[:2] == ["valkey-server", "/etc/valkey/config/valkey.conf"]
    assert command[command.index("--bind") + 1] == "$(POD_IP)"
    assert command[command.index("--cluster-announce-ip") + 1] == "$(POD_IP)"
    env = {item["name"]: item["valueFrom"]["fieldRef"]["fieldPath"] for item in c["env"]}
    assert env["POD_IP"] == "status.podIP"
    assert env["POD_NAME"] == "metadata.name"
    assert {port["name"]: port["containerPort"] for port in c["ports"]} == {
        "valkey": 6379,
        "cluster-bus": 16379,
    }


def test_probes_use_the_pod_ip_port() -> None:
    c = container(pod())
    assert c["readinessProbe"]["tcpSocket"] == {"port": "valkey"}
    assert c["livenessProbe"]["tcpSocket"] == {"port": "valkey"}
    live = c["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= 60  # generous: a failure replaces the pod


def test_requests_and_a_memory_limit_but_no_cpu_limit_by_default() -> None:
    c = container(pod(config=resolved(resources={"cpu": "500m", "memory": "2Gi"})))
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
    assert container(pod(config=resolved(resources={"cpu": "1"})))["resources"] == {"requests": {"cpu": "1"}}
    assert "resources" not in container(pod(config=resolved(resources={})))


def test_limits_when_the_config_sets_them() -> None:
    config = resolved(resources={"cpu": "500m", "memory": "2Gi"}, limits={"cpu": "2", "memory": "3Gi"})
    assert container(pod(config=config))["resources"] == {
        "requests": {"cpu": "500m", "memory": "2Gi"},
        "limits": {"cpu": "2", "memory": "3Gi"},
    }
    only_cpu = resolved(resources={"cpu": "500m", "memory": "2Gi"}, limits={"cpu": "1"})
    assert container(pod(config=only_cpu))["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    limits_only = resolved(resources={}, limits={"memory": "1Gi"})
    assert container(pod(config=limits_only))["resources"] == {"limits": {"memory": "1Gi"}}


def test_image_pull_secrets_reach_the_pod() -> None:
    p = pod(imagePullSecrets=["registry", "mirror"])
    assert p["spec"]["imagePullSecrets"] == [{"name": "registry"}, {"name": "mirror"}]
    assert "imagePullSecrets" not in pod()["spec"]


def test_a_digest_pins_the_image() -> None:
    digest = "sha256:" + "ab" * 32
    assert container(pod(config=resolved(digest=digest)))["image"] == f"valkey/valkey@{digest}"
    assert container(pod())["image"] == "valkey/valkey:9.1.2"


def test_volumes_plain() -> None:
    p = pod()
    volumes = {v["name"]: v for v in p["spec"]["volumes"]}
    assert set(volumes) == {"data", "cluster-state", "config", "internal"}
    assert volumes["data"] == {"name": "data", "emptyDir": {}}
    assert volumes["config"]["configMap"]["name"] == "cache-config"
    internal = volumes["internal"]["secret"]
    assert internal["secretName"] == "cache-internal"
    assert [item["key"] for item in internal["items"]] == [
        "users.acl",
        "replication.conf",
    ]  # no admin password
    mounts = {m["name"]: m for m in container(p)["volumeMounts"]}
    assert mounts["data"]["mountPath"] == "/data"
    assert mounts["config"]["readOnly"] and mounts["internal"]["readOnly"]


def test_cluster_identity_lives_on_tmpfs_like_the_data() -> None:
    """nodes.conf is on its own Memory emptyDir: a node that restarts without its data also
    restarts without its identity (SPEC 1.4 restart safety), so no empty primary owns slots."""
    p = pod()
    volumes = {v["name"]: v for v in p["spec"]["volumes"]}
    assert volumes["cluster-state"] == {
        "name": "cluster-state",
        "emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"},
    }
    mounts = {m["name"]: m for m in container(p)["volumeMounts"]}
    assert mounts["cluster-state"] == {"name": "cluster-state", "mountPath": "/var/lib/valkey/cluster"}
    found = {args[0]: args[1:] for args in parse_valkey_conf(render_valkey_conf(resolved(), tls=False))}
    [nodes_file] = found["cluster-config-file"]
    assert nodes_file.startswith(mounts["cluster-state"]["mountPath"] + "/")
    [data_dir] = found["dir"]
    assert data_dir == mounts["data"]["mountPath"], "dir stays on disk: a re-sync's RDB may be large"
    assert not nodes_file.startswith(data_dir + "/")
    # a container restart would bring the node back with its tmpfs: the pod never restarts one
    assert p["spec"]["restartPolicy"] == "Never"
    # every path Valkey writes is a volume: the root filesystem stays read-only
    assert container(p)["securityContext"]["readOnlyRootFilesystem"] is True


def test_volumes_tls() -> None:
    p = pod(tls={"secretRef": "cache-tls"})
    volumes = {v["name"]: v for v in p["spec"]["volumes"]}
    tls = volumes["tls"]["secret"]
    assert tls["secretName"] == "cache-tls"
    assert [item["key"] for item in tls["items"]] == ["tls.crt", "tls.key", "ca.crt"]
    mounts = {m["name"]: m for m in container(p)["volumeMounts"]}
    assert mounts["tls"] == {"name": "tls", "mountPath": "/etc/valkey/tls", "readOnly": True}


def test_context_needs_namespace_and_uid() -> None:
    unsaved = ValkeyCluster.from_dict({"metadata": {"name": "cache"}, "spec": {"configRef": "cache"}})
    with pytest.raises(ValueError, match=r"namespace and metadata\.uid"):
        RenderContext(cluster=unsaved, config=resolved())


# ---- placement ---------------------------------------------------------------------------------------


def spreads(p: Obj) -> list[tuple[str, str, dict[str, str]]]:
    return [
        (c["topologyKey"], c["whenUnsatisfiable"], c["labelSelector"]["matchLabels"])
        for c in p["spec"]["topologySpreadConstraints"]
    ]


SHARD_1 = names.shard_selector("cache", 1)
CLUSTER = names.cluster_selector("cache")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def test_best_effort_spread() -> None:
    p = pod()
    assert spreads(p) == [(ZONE, "ScheduleAnyway", SHARD_1), (HOST, "ScheduleAnyway", SHARD_1)]
    assert all(c["maxSkew"] == 1 for c in p["spec"]["topologySpreadConstraints"])
    for absent in ("affinity", "nodeSelector", "tolerations", "priorityClassName"):
        assert absent not in p["spec"]


def test_required_spread() -> None:
    expected = [
        (ZONE, "DoNotSchedule", SHARD_1),
        (ZONE, "ScheduleAnyway", CLUSTER),
        (HOST, "ScheduleAnyway", SHARD_1),
    ]
    assert spreads(pod(placement={"zoneSpread": "required"})) == expected
    # unset in the spec: the operator's default applies
    assert spreads(pod(default_zone_spread=ZoneSpread.REQUIRED)) == expected
    # set in the spec: it wins over the default
    best = pod(default_zone_spread=ZoneSpread.REQUIRED, placement={"zoneSpread": "bestEffort"})
    assert spreads(best)[0] == (ZONE, "ScheduleAnyway", SHARD_1)


def test_zones_node_selector_tolerations_priority() -> None:
    placement = {
        "zones": ["b", "a"],
        "nodeSelector": {"pool": "valkey", "example.com/disk": "ssd"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "valkey", "effect": "NoSchedule"},
            {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        ],
        "priorityClassName": "high",
    }
    spec = pod(placement=placement)["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}]
    assert spec["nodeSelector"] == {"pool": "valkey", "example.com/disk": "ssd"}
    assert spec["tolerations"] == placement["tolerations"]
    assert spec["priorityClassName"] == "high"


# ---- template hash -------------------------------------------------------------------------------------

BASE: dict[str, Any] = {"placement": {"zones": ["a"]}}


def hash_of(config: Any = None, **spec: Any) -> str:
    return template_hash(context(config=config, **{**BASE, **spec}))


@pytest.mark.parametrize(
    "changed",
    [
        {"config": resolved(tag="9.1.0")},
        {"config": resolved(resources={"cpu": "2", "memory": "1Gi"})},
        {"config": resolved(resources={"cpu": "1", "memory": "2Gi"})},
        {"config": resolved(limits={"cpu": "2"})},
        {"config": resolved(limits={"memory": "2Gi"})},
        {"config": resolved(digest="sha256:" + "ab" * 32)},
        {"config": resolved(pod_security={"runAsUser": 1000, "runAsGroup": 999, "fsGroup": 999})},
        {"tls": {"secretRef": "cache-tls"}},
        {"placement": {"zones": ["a", "b"]}},
        {"placement": {"zones": ["a"], "nodeSelector": {"pool": "x"}}},
        {"placement": {"zones": ["a"], "tolerations": [{"operator": "Exists"}]}},
        {"placement": {"zones": ["a"], "priorityClassName": "high"}},
    ],
)
def test_template_hash_rolls_on(changed: dict[str, Any]) -> None:
    assert hash_of(**changed) != hash_of()


@pytest.mark.parametrize(
    "unchanged",
    [
        {"podAnnotations": {"example.com/a": "b"}},
        {"placement": {"zones": ["a"], "zoneSpread": "required"}},
        {"placement": {"zones": ["a", "a"]}},
        {"shards": 7, "replicasPerShard": 3},
        {"imagePullSecrets": ["registry"]},
        {"acl": [{"username": "u", "passwordHashes": ["0" * 64], "permissions": [{"roleRef": "r"}]}]},
        {
            "config": resolved(
                valkey={
                    "maxmemory": "100mb",
                    "maxmemory-policy": "allkeys-lfu",
                    "cluster-node-timeout": "5000",
                }
            )
        },
        # adding or removing a runtime tunable: CONFIG SET to the value, or back to the default
        {"config": resolved(valkey={"notify-keyspace-events": "Ex", "io-threads": "4"})},
    ],
)
def test_template_hash_ignores(unchanged: dict[str, Any]) -> None:
    assert hash_of(**unchanged) == hash_of()


def test_runtime_tunable_value_changes_do_not_roll() -> None:
    first = resolved(valkey={"timeout": "10"})
    second = resolved(valkey={"timeout": "20"})
    assert hash_of(config=first) == hash_of(config=second)


def test_template_hash_ignores_default_zone_spread() -> None:
    a = template_hash(context(default_zone_spread=ZoneSpread.BEST_EFFORT))
    b = template_hash(context(default_zone_spread=ZoneSpread.REQUIRED))
    assert a == b
    assert len(a) == 16 and int(a, 16) >= 0


def test_template_hash_of_a_config_without_limits_or_digest_is_unchanged() -> None:
    """The hash before limits, digests and pull secrets existed: upgrading the operator rolls nothing."""
    assert template_hash(context()) == "68c4f487d83dacc8"


# ---- shape hash (in-place resize) -----------------------------------------------------------------


def shape_of(config: Any = None, **spec: Any) -> str:
    return shape_hash(context(config=config, **{**BASE, **spec}))


@pytest.mark.parametrize(
    "resized",
    [
        {"config": resolved(resources={"cpu": "2", "memory": "1Gi"})},
        {"config": resolved(limits={"memory": "2Gi"})},
        {"config": resolved(limits={"cpu": "2"})},
    ],
)
def test_a_resources_change_keeps_the_shape_and_changes_the_template(resized: dict[str, Any]) -> None:
    assert shape_of(**resized) == shape_of()
    assert hash_of(**resized) != hash_of()


@pytest.mark.parametrize(
    "changed",
    [
        {"config": resolved(tag="9.1.0")},
        {"tls": {"secretRef": "cache-tls"}},
        {"placement": {"zones": ["a", "b"]}},
    ],
)
def test_the_shape_changes_with_everything_else_in_the_template(changed: dict[str, Any]) -> None:
    assert shape_of(**changed) != shape_of()


def test_a_new_pod_carries_the_shape_hash_beside_the_template_hash() -> None:
    ctx = context()
    labels = render_pod(ctx, 0, "cache-0-bcdfg")["metadata"]["labels"]
    assert labels[names.SHAPE_HASH_LABEL] == shape_hash(ctx)
    assert labels[names.TEMPLATE_HASH_LABEL] == template_hash(ctx)
    assert shape_hash(ctx) != template_hash(ctx)
