"""The attrs models parse and render API objects losslessly, and parse minimal objects with defaults."""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from valkey_operator.api.backup import (
    BackupDestination,
    BackupPhase,
    BackupSchedule,
    BackupShard,
    PointInTime,
    PointInTimeStatus,
    Restore,
    RestorePhase,
    RestoreStatus,
    SourceRole,
    ValkeyBackup,
    ValkeyBackupSpec,
    ValkeyBackupStatus,
)
from valkey_operator.api.cluster import (
    AclUser,
    ClusterState,
    KeyAccess,
    KeyPattern,
    NodeRole,
    NodeStatus,
    Permission,
    Placement,
    RolloutStatus,
    SwitchoverPhase,
    SwitchoverStatus,
    TaintEffect,
    Tls,
    TlsStatus,
    Toleration,
    TolerationOperator,
    ValkeyCluster,
    ValkeyClusterSpec,
    ValkeyClusterStatus,
    ZoneSpread,
)
from valkey_operator.api.config import (
    PodSecurity,
    ResourceLimits,
    Resources,
    ValkeyConfig,
    ValkeyConfigSpec,
)
from valkey_operator.api.image import ValkeyImage, ValkeyImageSpec, meets_floor, parse_version
from valkey_operator.api.meta import Condition, ConditionStatus, ObjectMeta
from valkey_operator.api.meta import set_condition as set_model_condition
from valkey_operator.api.role import Access, AclCategory, CategoryRule, ValkeyRole, ValkeyRoleSpec
from valkey_operator.core.conditions import set_condition as set_document_condition
from valkey_operator.core.rest import Obj

API_VERSION = "valkey.gomomento.com/v1alpha1"
HASH_A = "a" * 64
HASH_B = "0123456789abcdef" * 4

METADATA: Obj = {
    "name": "cache",
    "uid": "6f1c2d0e-0000-4000-8000-000000000001",
    "generation": 4,
    "resourceVersion": "12345",
    "labels": {"team": "payments"},
    "annotations": {"example.com/note": "hello"},
    "finalizers": ["valkey.gomomento.com/image-protection"],
    "deletionTimestamp": "2025-01-02T03:04:05Z",
    "ownerReferences": [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": "6f1c2d0e-0000-4000-8000-000000000002",
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ],
}


def condition(type_: str, status: str = "True", reason: str = "Ok") -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": f"{type_} is {status}",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
        "observedGeneration": 4,
    }


IMAGE: Obj = {
    "apiVersion": API_VERSION,
    "kind": "ValkeyImage",
    "metadata": METADATA,
    "spec": {
        "repository": "docker.io/valkey/valkey",
        "tag": "9.0.1-alpine",
        "version": "9.0.1",
        "digest": "sha256:" + "ab" * 32,
    },
    "status": {},
}

CONFIG: Obj = {
    "apiVersion": API_VERSION,
    "kind": "ValkeyConfig",
    "metadata": METADATA,
    "spec": {
        "imageRef": "valkey-9",
        "baseRef": "defaults",
        "resources": {"cpu": "500m", "memory": "1Gi", "limits": {"cpu": "2", "memory": "2Gi"}},
        "valkey": {"maxmemory-policy": "allkeys-lru", "io-threads": "4"},
        "podSecurity": {"runAsUser": 1000, "runAsGroup": 1001, "fsGroup": 1002},
    },
    "status": {
        "observedGeneration": 4,
        "resolvedImage": {
            "name": "valkey-9",
            "repository": "docker.io/valkey/valkey",
            "tag": "9.0.1",
            "version": "9.0.1",
            "digest": "sha256:" + "ab" * 32,
        },
        "settingsHash": "deadbeef",
        "conditions": [condition("Resolved")],
    },
}

ROLE: Obj = {
    "apiVersion": API_VERSION,
    "kind": "ValkeyRole",
    "metadata": METADATA,
    "spec": {
        "categories": [
            {"name": "read", "access": "allow"},
            {"name": "write", "access": "allow"},
            {"name": "dangerous", "access": "deny"},
        ],
        "commands": [{"name": "client|kill", "access": "deny"}, {"name": "info", "access": "allow"}],
    },
    "status": {
        "observedGeneration": 4,
        "summary": "+read +write -dangerous",
        "conditions": [condition("Ready")],
    },
}

CLUSTER: Obj = {
    "apiVersion": API_VERSION,
    "kind": "ValkeyCluster",
    "metadata": {**METADATA, "namespace": "apps"},
    "spec": {
        "configRef": "standard",
        "shards": 6,
        "replicasPerShard": 2,
        "acl": [
            {
                "username": "app",
                "passwordHashes": [HASH_A, HASH_B],
                "permissions": [
                    {
                        "roleRef": "read-write",
                        "keys": [
                            {"pattern": "app:*", "access": "readwrite"},
                            {"pattern": "shared:*", "access": "read"},
                        ],
                        "channels": ["events.*"],
                    },
                    {"roleRef": "read-only", "keys": [{"pattern": "audit:*", "access": "write"}]},
                ],
            },
            {"username": "reports", "passwordSecretName": "reports-pw", "permissions": [{"roleRef": "r"}]},
            {"username": "jobs", "permissions": [{"roleRef": "r"}]},
        ],
        "tls": {"secretRef": "cache-tls"},
        "placement": {
            "zones": ["zone-a", "zone-b"],
            "zoneSpread": "required",
            "nodeSelector": {"pool": "cache"},
            "tolerations": [
                {
                    "key": "dedicated",
                    "operator": "Equal",
                    "value": "cache",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {"operator": "Exists"},
            ],
            "priorityClassName": "high",
        },
        "podAnnotations": {"example.com/scrape": "true"},
        "imagePullSecrets": ["registry-a", "registry-b"],
        "backup": {
            "schedule": "0 3 * * *",
            "destination": {
                "endpoint": "https://s3.example.com",
                "bucket": "backups",
                "path": "team-a",
                "region": "eu-west-1",
                "credentialsSecretName": "s3-credentials",
                "caSecretName": "s3-ca",
            },
            "keep": 7,
        },
        "restore": {"backupName": "cache-20261201-0300"},
    },
    "status": {
        "state": "Active",
        "message": "all 6 shards ready",
        "endpoint": "cache.apps.svc.cluster.local:6379",
        "observedGeneration": 4,
        "shards": 6,
        "readyShards": 6,
        "readyNodes": 18,
        "currentImage": "docker.io/valkey/valkey:9.0.1",
        "configHash": "cafebabe",
        "nodes": [
            {
                "pod": "cache-0-abcde",
                "shard": 0,
                "role": "primary",
                "nodeId": "f" * 40,
                "ip": "10.0.0.7",
                "version": "9.0.1",
                "slots": "0-5460",
            },
            {"pod": "cache-0-fghij", "shard": 0},
        ],
        "restore": {
            "backupName": "cache-20261201-0300",
            "phase": "Verified",
            "reason": "KeysVerified",
            "message": "every shard holds the manifest's keys",
            "shards": 3,
            "keys": 3000,
            "loadedKeys": 3000,
        },
        "lastBackup": "cache-20261202-0300",
        "conditions": [
            condition("Ready"),
            condition("Progressing", "False", "Idle"),
            condition("Degraded", "False", "Healthy"),
        ],
    },
}

BACKUP: Obj = {
    "apiVersion": API_VERSION,
    "kind": "ValkeyBackup",
    "metadata": {**METADATA, "namespace": "apps"},
    "spec": {
        "clusterName": "cache",
        "destination": {
            "endpoint": "http://127.0.0.1:7070",
            "bucket": "backups",
            "credentialsSecretName": "s3",
        },
    },
    "status": {
        "phase": "Completed",
        "reason": "ManifestWritten",
        "message": "3 shards, 1.2 GiB",
        "startedAt": "2026-12-01T03:00:00Z",
        "completedAt": "2026-12-01T03:02:00Z",
        "observedGeneration": 1,
        "manifestKey": "apps/cache/b/manifest.json",
        "valkeyVersion": "9.1.2",
        "totalBytes": 1288490189,
        "totalKeys": 3000000,
        "size": "1.2 GiB",
        "shards": [
            {
                "index": 0,
                "slots": "0-5460,7000",
                "sourcePod": "cache-0-abcde",
                "sourceRole": "replica",
                "objectKey": "apps/cache/b/shard-0.rdb",
                "bytes": 429496729,
                "keys": 1000000,
                "sha256": HASH_B,
            },
            {"index": 1},
        ],
        "conditions": [condition("Ready")],
    },
}

KINDS: list[tuple[Any, Obj]] = [
    (ValkeyImage, IMAGE),
    (ValkeyConfig, CONFIG),
    (ValkeyRole, ROLE),
    (ValkeyCluster, CLUSTER),
    (ValkeyBackup, BACKUP),
]


@pytest.mark.parametrize(("model", "document"), KINDS, ids=lambda value: getattr(value, "__name__", ""))
def test_full_document_round_trips_exactly(model: Any, document: Obj) -> None:
    before = copy.deepcopy(document)
    parsed = model.from_dict(document)
    assert document == before, "from_dict must not mutate its input"
    assert parsed.to_dict() == document
    assert model.from_dict(parsed.to_dict()) == parsed


@pytest.mark.parametrize(("model", "document"), KINDS, ids=lambda value: getattr(value, "__name__", ""))
def test_parsed_model_does_not_alias_the_input(model: Any, document: Obj) -> None:
    mine = copy.deepcopy(document)
    parsed = model.from_dict(mine)
    mine["metadata"]["labels"]["team"] = "changed"
    assert parsed.metadata.labels == {"team": "payments"}
    rendered = parsed.to_dict()
    rendered["metadata"]["labels"]["team"] = "changed too"
    assert parsed.metadata.labels == {"team": "payments"}


def test_full_cluster_parses_into_typed_fields() -> None:
    cluster = ValkeyCluster.from_dict(CLUSTER)
    assert cluster.metadata.namespace == "apps"
    assert cluster.metadata.owner_references[0].controller is True
    user = cluster.spec.acl[0]
    assert user.permissions[0].keys[0] == KeyPattern(pattern="app:*", access=KeyAccess.READWRITE)
    assert user.permissions[1].channels == ()
    assert cluster.spec.tls == Tls(secret_ref="cache-tls")
    assert cluster.spec.placement is not None
    assert cluster.spec.placement.zone_spread is ZoneSpread.REQUIRED
    assert cluster.spec.placement.tolerations[1] == Toleration(operator=TolerationOperator.EXISTS)
    assert cluster.status is not None
    assert cluster.status.state is ClusterState.ACTIVE
    assert cluster.status.nodes[0].role is NodeRole.PRIMARY
    assert cluster.status.nodes[1] == NodeStatus(pod="cache-0-fghij", shard=0)
    assert cluster.status.conditions[1].status is ConditionStatus.FALSE


def minimal(kind: str, spec: Obj, namespace: str | None = None) -> Obj:
    metadata: Obj = {"name": "m"} if namespace is None else {"name": "m", "namespace": namespace}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def test_minimal_image() -> None:
    image = ValkeyImage.from_dict(
        minimal("ValkeyImage", {"repository": "valkey/valkey", "tag": "9.1", "version": "9.1.0"})
    )
    assert image.metadata == ObjectMeta(name="m")
    assert image.status is None
    assert image.reference == "valkey/valkey:9.1"
    assert image.parsed_version == (9, 1, 0)
    assert image.to_dict() == minimal(
        "ValkeyImage", {"repository": "valkey/valkey", "tag": "9.1", "version": "9.1.0"}
    )


def test_minimal_config_and_int_quantities() -> None:
    config = ValkeyConfig.from_dict(minimal("ValkeyConfig", {"baseRef": "parent"}))
    assert config.spec == ValkeyConfigSpec(base_ref="parent")
    assert config.spec.valkey == {}
    assert config.to_dict()["spec"] == {"baseRef": "parent"}
    # The schema allows int-or-string quantities; models keep strings.
    spec = ValkeyConfigSpec.from_dict({"imageRef": "i", "resources": {"cpu": 2}, "podSecurity": {}})
    assert spec.resources == Resources(cpu="2")
    assert spec.pod_security == PodSecurity()


def test_minimal_role() -> None:
    role = ValkeyRole.from_dict(minimal("ValkeyRole", {"categories": [{"name": "all", "access": "allow"}]}))
    assert role.spec == ValkeyRoleSpec(
        categories=(CategoryRule(name=AclCategory.ALL, access=Access.ALLOW),),
    )
    assert role.to_dict()["spec"] == {"categories": [{"name": "all", "access": "allow"}]}


def test_absent_access_gets_the_schema_default() -> None:
    assert CategoryRule.from_dict({"name": "read"}).access is Access.ALLOW
    assert (
        ValkeyRoleSpec.from_dict({"categories": [], "commands": [{"name": "get"}]}).commands[0].access
        is Access.ALLOW
    )
    assert KeyPattern.from_dict({"pattern": "*"}).access is KeyAccess.READWRITE


def test_minimal_cluster_gets_schema_defaults() -> None:
    cluster = ValkeyCluster.from_dict(minimal("ValkeyCluster", {"configRef": "standard"}, namespace="ns"))
    assert cluster.spec == ValkeyClusterSpec(config_ref="standard", shards=3, replicas_per_shard=1)
    assert cluster.spec.acl == () and cluster.spec.tls is None and cluster.spec.placement is None
    assert cluster.to_dict()["spec"] == {"configRef": "standard", "shards": 3, "replicasPerShard": 1}
    # An empty status (as a fresh status write may leave) parses to an all-unset status.
    assert ValkeyClusterStatus.from_dict({}) == ValkeyClusterStatus()
    assert ValkeyClusterStatus().to_dict() == {}


def test_null_values_count_as_absent() -> None:
    spec = ValkeyClusterSpec.from_dict({"configRef": "c", "acl": None, "tls": None, "podAnnotations": None})
    assert spec == ValkeyClusterSpec(config_ref="c")


def test_empty_nested_objects_are_kept_but_empty_collections_are_omitted() -> None:
    spec = ValkeyClusterSpec(config_ref="c", placement=Placement(), acl=())
    assert spec.to_dict() == {"configRef": "c", "shards": 3, "replicasPerShard": 1, "placement": {}}


def test_condition_message_is_always_rendered() -> None:
    parsed = Condition.from_dict(
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": "Starting",
            "lastTransitionTime": "2025-01-01T00:00:00Z",
        }
    )
    assert parsed.message == ""
    assert parsed.to_dict()["message"] == ""


def test_enums_render_as_plain_strings() -> None:
    rendered = ValkeyCluster.from_dict(CLUSTER).to_dict()
    state = rendered["status"]["state"]
    assert type(state) is str and state == "Active"
    assert type(rendered["spec"]["placement"]["tolerations"][0]["effect"]) is str


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9.0.1", (9, 0, 1)),
        ("9.1.0", (9, 1, 0)),
        ("10.0.0", (10, 0, 0)),
        ("9.0.0", (9, 0, 0)),
        ("9.1", None),
        ("v9.1.0", None),
        ("9.01.0", None),
        ("9.0.1-rc1", None),
        ("", None),
        ("9.0.1\n", None),
    ],
)
def test_parse_version(text: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected


def test_version_floor() -> None:
    assert meets_floor((9, 0, 1)) and meets_floor((10, 0, 0))
    assert not meets_floor((9, 0, 0)) and not meets_floor((8, 1, 8)) and not meets_floor(None)


# -- property-based round trips ---------------------------------------------------------------

text = st.text(max_size=12)
maps = st.dictionaries(text, text, max_size=3)


def small_tuples(elements: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(elements, max_size=3).map(tuple)


conditions = st.builds(
    Condition,
    type=text,
    status=st.sampled_from(ConditionStatus),
    reason=text,
    message=text,
    last_transition_time=text,
    observed_generation=st.none() | st.integers(min_value=0),
)
tolerations = st.builds(
    Toleration,
    key=st.none() | text,
    operator=st.none() | st.sampled_from(TolerationOperator),
    value=st.none() | text,
    effect=st.none() | st.sampled_from(TaintEffect),
    toleration_seconds=st.none() | st.integers(),
)
placements = st.builds(
    Placement,
    zones=small_tuples(text),
    zone_spread=st.none() | st.sampled_from(ZoneSpread),
    node_selector=maps,
    tolerations=small_tuples(tolerations),
    priority_class_name=st.none() | text,
)
permissions = st.builds(
    Permission,
    role_ref=text,
    keys=small_tuples(st.builds(KeyPattern, pattern=text, access=st.sampled_from(KeyAccess))),
    channels=small_tuples(text),
)
users = st.builds(
    AclUser,
    username=text,
    password_hashes=small_tuples(st.text("0123456789abcdef", min_size=64, max_size=64)),
    password_secret_name=st.none() | text,
    permissions=small_tuples(permissions),
)
destinations = st.builds(
    BackupDestination,
    endpoint=text,
    bucket=text,
    path=st.none() | text,
    region=st.none() | text,
    credentials_secret_name=text,
    ca_secret_name=st.none() | text,
)
cluster_specs = st.builds(
    ValkeyClusterSpec,
    config_ref=text,
    shards=st.integers(min_value=1, max_value=64),
    replicas_per_shard=st.integers(min_value=0, max_value=5),
    acl=small_tuples(users),
    tls=st.none() | st.builds(Tls, secret_ref=text),
    placement=st.none() | placements,
    pod_annotations=maps,
    image_pull_secrets=small_tuples(text),
    backup=st.none()
    | st.builds(
        BackupSchedule,
        schedule=text,
        destination=destinations,
        keep=st.integers(1, 1000),
        point_in_time=st.none() | st.just(PointInTime()),
    ),
    restore=st.none() | st.builds(Restore, backup_name=text),
)
node_statuses = st.builds(
    NodeStatus,
    pod=text,
    shard=st.integers(min_value=0),
    role=st.none() | st.sampled_from(NodeRole),
    node_id=st.none() | text,
    ip=st.none() | text,
    version=st.none() | text,
    slots=st.none() | text,
    in_sync=st.none() | st.booleans(),
)
counts = st.integers(min_value=0, max_value=2**31 - 1)
cluster_statuses = st.builds(
    ValkeyClusterStatus,
    state=st.none() | st.sampled_from(ClusterState),
    message=st.none() | text,
    endpoint=st.none() | text,
    observed_generation=st.none() | st.integers(min_value=0),
    shards=st.none() | st.integers(min_value=0),
    ready_shards=st.none() | st.integers(min_value=0),
    ready_nodes=st.none() | st.integers(min_value=0),
    ready=st.none() | text,
    current_image=st.none() | text,
    config_hash=st.none() | text,
    nodes=small_tuples(node_statuses),
    # decide() writes every field of the status through the model (status_document.py), and the
    # next pass reads it back: each nested status is generated too, all-None ones included (they
    # are None in the model, as the server's {} reads back as absent: api.convert.empty_to_none).
    rollout=st.none()
    | st.builds(
        RolloutStatus,
        shards_updated=counts,
        shards=counts,
        shard=counts,
        step=text,
        started_at=st.none() | text,
    ),
    max_primaries_per_node=st.none() | counts,
    tls=st.none()
    | st.builds(
        TlsStatus, secret_hash=st.none() | text, changed_at=st.none() | text, not_after=st.none() | text
    ),
    switchover=st.none()
    | st.builds(
        SwitchoverStatus,
        request=st.none() | text,
        phase=st.none() | st.sampled_from(SwitchoverPhase),
        from_=st.none() | text,
        to=st.none() | text,
        message=st.none() | text,
        started_at=st.none() | text,
        finished_at=st.none() | text,
    ),
    restore=st.none()
    | st.builds(
        RestoreStatus,
        backup_name=st.none() | text,
        phase=st.none() | st.sampled_from(RestorePhase),
        reason=st.none() | text,
        message=st.none() | text,
        shards=st.none() | st.integers(min_value=0),
        keys=st.none() | st.integers(min_value=0),
        loaded_keys=st.none() | st.integers(min_value=0),
    ),
    last_backup=st.none() | text,
    point_in_time=st.none()
    | st.builds(
        PointInTimeStatus,
        archived_until=st.none() | text,
        reason=st.none() | text,
        message=st.none() | text,
    ),
    conditions=small_tuples(conditions),
)
metadata = st.builds(
    ObjectMeta,
    name=text,
    namespace=st.none() | text,
    uid=st.none() | text,
    generation=st.none() | st.integers(min_value=1),
    resource_version=st.none() | text,
    labels=maps,
    annotations=maps,
    finalizers=small_tuples(text),
    deletion_timestamp=st.none() | text,
)


@given(cluster_specs)
def test_cluster_spec_round_trips(spec: ValkeyClusterSpec) -> None:
    assert ValkeyClusterSpec.from_dict(spec.to_dict()) == spec


@given(metadata, cluster_specs, st.none() | cluster_statuses)
def test_cluster_round_trips(
    meta: ObjectMeta, spec: ValkeyClusterSpec, status: ValkeyClusterStatus | None
) -> None:
    cluster = ValkeyCluster(metadata=meta, spec=spec, status=status)
    rendered = cluster.to_dict()
    assert rendered["apiVersion"] == API_VERSION and rendered["kind"] == "ValkeyCluster"
    assert ValkeyCluster.from_dict(rendered) == cluster


@given(
    st.builds(
        ValkeyConfigSpec,
        image_ref=st.none() | text,
        base_ref=st.none() | text,
        resources=st.none()
        | st.builds(
            Resources,
            cpu=st.none() | text,
            memory=st.none() | text,
            limits=st.none() | st.builds(ResourceLimits, cpu=st.none() | text, memory=st.none() | text),
        ),
        valkey=maps,
        pod_security=st.none()
        | st.builds(
            PodSecurity,
            run_as_user=st.none() | st.integers(min_value=1),
            run_as_group=st.none() | st.integers(min_value=1),
            fs_group=st.none() | st.integers(min_value=1),
        ),
    )
)
def test_config_spec_round_trips(spec: ValkeyConfigSpec) -> None:
    assert ValkeyConfigSpec.from_dict(spec.to_dict()) == spec


@given(st.builds(ValkeyImageSpec, repository=text, tag=text, version=text, digest=st.none() | text))
def test_image_spec_round_trips(spec: ValkeyImageSpec) -> None:
    assert ValkeyImageSpec.from_dict(spec.to_dict()) == spec


def test_image_reference_pins_the_digest_when_declared() -> None:
    meta = ObjectMeta(name="v")
    tagged = ValkeyImage(metadata=meta, spec=ValkeyImageSpec(repository="r/v", tag="9.1.2", version="9.1.2"))
    digest = "sha256:" + "0" * 64
    pinned = attrs.evolve(tagged, spec=attrs.evolve(tagged.spec, digest=digest))
    assert tagged.reference == "r/v:9.1.2"
    assert pinned.reference == f"r/v@{digest}"


def test_a_user_with_no_password_source_gets_a_generated_one() -> None:
    assert AclUser(username="a").generated_password
    assert not AclUser(username="a", password_hashes=("0" * 64,)).generated_password
    assert not AclUser(username="a", password_secret_name="s").generated_password


backup_shards = st.builds(
    BackupShard,
    index=st.integers(min_value=0),
    slots=st.none() | text,
    source_pod=st.none() | text,
    source_role=st.none() | st.sampled_from(SourceRole),
    object_key=st.none() | text,
    bytes=st.none() | st.integers(min_value=0),
    keys=st.none() | st.integers(min_value=0),
    sha256=st.none() | text,
)
backup_statuses = st.builds(
    ValkeyBackupStatus,
    phase=st.none() | st.sampled_from(BackupPhase),
    reason=st.none() | text,
    message=st.none() | text,
    started_at=st.none() | text,
    completed_at=st.none() | text,
    observed_generation=st.none() | st.integers(min_value=0),
    manifest_key=st.none() | text,
    valkey_version=st.none() | text,
    total_bytes=st.none() | st.integers(min_value=0),
    total_keys=st.none() | st.integers(min_value=0),
    size=st.none() | text,
    shards=small_tuples(backup_shards),
    conditions=small_tuples(conditions),
)


@given(
    metadata,
    st.builds(ValkeyBackupSpec, cluster_name=text, destination=destinations),
    st.none() | backup_statuses,
)
def test_backup_round_trips(
    meta: ObjectMeta, spec: ValkeyBackupSpec, status: ValkeyBackupStatus | None
) -> None:
    backup = ValkeyBackup(metadata=meta, spec=spec, status=status)
    rendered = backup.to_dict()
    assert rendered["apiVersion"] == API_VERSION and rendered["kind"] == "ValkeyBackup"
    assert ValkeyBackup.from_dict(rendered) == backup


def test_full_backup_parses_into_typed_fields() -> None:
    backup = ValkeyBackup.from_dict(BACKUP)
    assert backup.spec.destination.region is None and backup.spec.destination.ca_secret_name is None
    assert backup.status is not None
    assert backup.status.phase is BackupPhase.COMPLETED
    assert backup.status.shards[0].source_role is SourceRole.REPLICA
    assert backup.status.shards[0].bytes == 429496729 and backup.status.total_keys == 3000000
    assert backup.status.shards[1] == BackupShard(index=1)
    cluster = ValkeyCluster.from_dict(CLUSTER)
    assert cluster.spec.restore == Restore(backup_name="cache-20261201-0300")
    assert cluster.spec.backup is not None and cluster.spec.backup.keep == 7
    assert cluster.spec.backup.destination.ca_secret_name == "s3-ca"
    assert cluster.status is not None and cluster.status.restore is not None
    assert cluster.status.restore.phase is RestorePhase.VERIFIED
    assert cluster.status.last_backup == "cache-20261202-0300"
    # An empty restore status (a fresh status write) is no restore at all.
    assert ValkeyClusterStatus.from_dict({"restore": {}}).restore is None


def test_all_empty_nested_status_is_none_so_it_round_trips() -> None:
    status = ValkeyClusterStatus(restore=RestoreStatus())
    assert status.restore is None
    assert ValkeyClusterStatus.from_dict(status.to_dict()) == status
    kept = ValkeyClusterStatus(restore=RestoreStatus(backup_name="b1"))
    assert ValkeyClusterStatus.from_dict(kept.to_dict()) == kept


condition_steps = st.lists(
    st.tuples(st.sampled_from(["Ready", "Progressing", "Degraded"]), st.booleans(), text, text), max_size=8
)


@given(small_tuples(conditions), condition_steps, st.none() | st.integers(min_value=0, max_value=9))
def test_setting_conditions_on_the_model_is_what_it_is_on_the_document(
    start: tuple[Condition, ...], steps: list[tuple[str, bool, str, str]], generation: int | None
) -> None:
    """api.meta.set_condition (the cluster's typed status) and core.conditions.set_condition (the
    documents other kinds still build) keep the same order and transition times."""
    model, document = start, [condition.to_dict() for condition in start]
    for index, (kind, status, reason, message) in enumerate(steps):
        now = f"2026-12-04T10:00:0{index}Z"
        model = set_model_condition(model, kind, status, reason, message, generation, now)
        document = set_document_condition(document, kind, status, reason, message, generation, now)
        assert [condition.to_dict() for condition in model] == document
