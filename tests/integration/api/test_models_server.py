"""The attrs models agree with the CRDs: what they render the real API server accepts and returns unchanged.

Also the other direction: renders that break the schema are rejected (422),
and the schema's field layout and enums are exactly the models'.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import pytest_asyncio

from valkey_operator.api.backup import (
    BackupConsistency,
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
    Authentication,
    ClientAuth,
    ClusterState,
    Exporter,
    KeyAccess,
    KeyPattern,
    Metrics,
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
    Appendfsync,
    PersistenceMode,
    PersistenceSpec,
    PodSecurity,
    ReclaimPolicy,
    ResolvedImage,
    ResolvedPersistence,
    ResourceLimits,
    Resources,
    ValkeyConfig,
    ValkeyConfigSpec,
    ValkeyConfigStatus,
)
from valkey_operator.api.external import ExternalAccess, ExternalEndpoint, ExternalServiceType
from valkey_operator.api.image import ValkeyImage, ValkeyImageSpec, ValkeyImageStatus
from valkey_operator.api.meta import Condition, ConditionStatus, ObjectMeta, OwnerReference
from valkey_operator.api.network import (
    IpBlock,
    LabelSelector,
    NetworkPolicyPeer,
    NetworkPolicySpec,
    SelectorOperator,
    SelectorRequirement,
)
from valkey_operator.api.resources import API_VERSION
from valkey_operator.api.role import (
    Access,
    AclCategory,
    CategoryRule,
    CommandRule,
    ValkeyRole,
    ValkeyRoleSpec,
    ValkeyRoleStatus,
)
from valkey_operator.core.client import Client
from valkey_operator.core.resource import CONFIG_MAPS, Resource
from valkey_operator.core.rest import ApiError, Obj
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.crds import load_manifests, product_crds

# Writes and reads the status of cluster-scoped objects by hand, so no operator of another module
# may reconcile them meanwhile: the module runs on a control plane of its own (lone_plane).
pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def kubeconfig_path(lone_plane: ControlPlane) -> Path:
    """The test bed's fixtures (kube_api, kube, namespace, kubectl) on this module's own plane."""
    return lone_plane.kubeconfig


HOLD = "example.com/hold"
Model = ValkeyImage | ValkeyConfig | ValkeyRole | ValkeyCluster | ValkeyBackup
Tracked = list[tuple[Resource, str, str | None]]


@pytest_asyncio.fixture
async def tracked(kube: Client) -> AsyncIterator[Tracked]:
    """Objects a test made; released from finalizers and deleted afterwards, newest first."""
    objects: Tracked = []
    yield objects
    for resource, name, namespace in reversed(objects):
        try:
            await kube.patch(resource, name, {"metadata": {"finalizers": None}}, namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
        await kube.delete(resource, name, namespace)


def conditions(*types: str) -> tuple[Condition, ...]:
    return tuple(
        Condition(
            type=type_,
            status=ConditionStatus.TRUE,
            reason="Testing",
            message=f"{type_} for the test",
            last_transition_time="2025-01-01T00:00:00Z",
            observed_generation=1,
        )
        for type_ in types
    )


def meta(name: str, namespace: str | None = None, **extra: Any) -> ObjectMeta:
    return ObjectMeta(
        name=name,
        namespace=namespace,
        labels={"app.kubernetes.io/part-of": "tests"},
        annotations={"example.com/note": "every field"},
        finalizers=(HOLD,),
        **extra,
    )


def every_peer() -> tuple[NetworkPolicyPeer, ...]:
    """NetworkPolicy peers using every field: selectors (labels and expressions) and an ipBlock."""
    selector = LabelSelector(
        match_labels={"app": "checkout"},
        match_expressions=(SelectorRequirement(key="tier", operator=SelectorOperator.IN, values=("w",)),),
    )
    return (
        NetworkPolicyPeer(pod_selector=selector, namespace_selector=selector),
        NetworkPolicyPeer(ip_block=IpBlock(cidr="10.0.0.0/8", except_=("10.1.0.0/16",))),
    )


def full_models(suffix: str, namespace: str, owner: OwnerReference) -> list[Model]:
    """One object of each kind with every field the models know populated."""
    image = ValkeyImage(
        metadata=meta(f"image-{suffix}"),
        spec=ValkeyImageSpec(
            repository="docker.io/valkey/valkey", tag="9.0.1", version="9.0.1", digest="sha256:" + "c" * 64
        ),
        status=ValkeyImageStatus(),
    )
    config = ValkeyConfig(
        metadata=meta(f"config-{suffix}"),
        spec=ValkeyConfigSpec(
            image_ref=image.metadata.name,
            base_ref=f"base-{suffix}",
            resources=Resources(cpu="500m", memory="1Gi", limits=ResourceLimits(cpu="2", memory="2Gi")),
            valkey={"maxmemory-policy": "allkeys-lru", "Maxmemory": "700mb", "io-threads": "2"},
            pod_security=PodSecurity(run_as_user=1000, run_as_group=1001, fs_group=1002),
            persistence=PersistenceSpec(
                mode=PersistenceMode.AOF,
                size="10Gi",
                storage_class_name="local-path",
                appendfsync=Appendfsync.ALWAYS,
                reclaim_policy=ReclaimPolicy.RETAIN,
            ),
        ),
        status=ValkeyConfigStatus(
            observed_generation=1,
            resolved_image=ResolvedImage(
                name=image.metadata.name,
                repository="docker.io/valkey/valkey",
                tag="9.0.1",
                version="9.0.1",
                digest="sha256:" + "c" * 64,
            ),
            settings_hash="0123abcd",
            persistence=ResolvedPersistence(
                mode=PersistenceMode.AOF,
                size="10Gi",
                storage_class_name="local-path",
                appendfsync=Appendfsync.ALWAYS,
                reclaim_policy=ReclaimPolicy.RETAIN,
            ),
            conditions=conditions("Resolved"),
        ),
    )
    role = ValkeyRole(
        metadata=meta(f"role-{suffix}"),
        spec=ValkeyRoleSpec(
            categories=(
                CategoryRule(name=AclCategory.READ, access=Access.ALLOW),
                CategoryRule(name=AclCategory.DANGEROUS, access=Access.DENY),
            ),
            commands=(
                CommandRule(name="client|kill", access=Access.DENY),
                CommandRule(name="cluster_x-1", access=Access.ALLOW),
            ),
        ),
        status=ValkeyRoleStatus(
            observed_generation=1, summary="+read -dangerous", conditions=conditions("Ready")
        ),
    )
    cluster = ValkeyCluster(
        metadata=meta("cache", namespace, owner_references=(owner,)),
        spec=ValkeyClusterSpec(
            config_ref=config.metadata.name,
            shards=5,
            replicas_per_shard=2,
            acl=(
                AclUser(
                    username="app.user_1-x",
                    password_hashes=("a" * 64, "0123456789abcdef" * 4),
                    permissions=(
                        Permission(
                            role_ref=role.metadata.name,
                            keys=(
                                KeyPattern(pattern="app:*", access=KeyAccess.READWRITE),
                                KeyPattern(pattern="ro:*", access=KeyAccess.READ),
                            ),
                            channels=("events.*",),
                        ),
                        Permission(
                            role_ref=role.metadata.name,
                            keys=(KeyPattern(pattern="log:*", access=KeyAccess.WRITE),),
                        ),
                    ),
                ),
                AclUser(
                    username="reports",
                    password_secret_name="reports-passwords",
                    permissions=(Permission(role_ref=role.metadata.name),),
                ),
                AclUser(
                    username="by-certificate",
                    authentication=Authentication.CERTIFICATE,
                    permissions=(Permission(role_ref=role.metadata.name),),
                ),
            ),
            tls=Tls(secret_ref="cache-tls", client_auth=ClientAuth.REQUIRED),
            external_access=ExternalAccess(
                type=ExternalServiceType.LOAD_BALANCER, service_annotations={"example.com/lb": "internal"}
            ),
            placement=Placement(
                zones=("zone-a", "zone-b"),
                zone_spread=ZoneSpread.REQUIRED,
                node_selector={"pool": "cache"},
                tolerations=(
                    Toleration(
                        key="dedicated",
                        operator=TolerationOperator.EQUAL,
                        value="cache",
                        effect=TaintEffect.NO_EXECUTE,
                        toleration_seconds=300,
                    ),
                    Toleration(operator=TolerationOperator.EXISTS, effect=TaintEffect.PREFER_NO_SCHEDULE),
                ),
                priority_class_name="high-priority",
            ),
            pod_annotations={"example.com/scrape": "true"},
            network_policy=NetworkPolicySpec(
                enabled=True, client_from=every_peer(), metrics_from=every_peer()
            ),
            image_pull_secrets=("registry",),
            metrics=Metrics(exporter=Exporter(enabled=False)),  # enabled is refused with tls
            backup=BackupSchedule(
                schedule="0 3 * * *",
                destination=DESTINATION,
                keep=7,
                consistency=BackupConsistency.ONE_INSTANT,
                point_in_time=PointInTime(retention="7d"),
            ),
            restore=Restore(backup_name=f"nightly-{suffix}"),
        ),
        status=ValkeyClusterStatus(
            state=ClusterState.ACTIVE,
            message="ready",
            endpoint=f"cache.{namespace}.svc.cluster.local:6379",
            observed_generation=1,
            shards=5,
            ready_shards=5,
            ready_nodes=15,
            ready="15/18",
            current_image="docker.io/valkey/valkey:9.0.1",
            config_hash="0123abcd",
            nodes=(
                NodeStatus(
                    pod="cache-0-abcde",
                    shard=0,
                    role=NodeRole.PRIMARY,
                    node_id="f" * 40,
                    ip="10.0.0.7",
                    version="9.0.1",
                    slots="0-3276",
                ),
                NodeStatus(pod="cache-0-fghij", shard=0, role=NodeRole.REPLICA, in_sync=True),
            ),
            conditions=conditions("Ready", "Progressing", "Degraded"),
            rollout=RolloutStatus(
                shards_updated=2, shards=5, shard=2, step="FailingOver", started_at="2026-12-01T10:00:00Z"
            ),
            max_primaries_per_node=2,
            tls=TlsStatus(
                secret_hash="0123456789abcdef",
                changed_at="2026-12-01T10:00:00Z",
                client_auth=ClientAuth.REQUIRED,
                not_after="2027-03-01T10:00:00Z",
            ),
            external_endpoints=(ExternalEndpoint(pod="cache-0-abcde", host="203.0.113.7", port=6379),),
            restore=RestoreStatus(
                backup_name=f"nightly-{suffix}",
                phase=RestorePhase.VERIFIED,
                reason="KeysVerified",
                message="every shard holds the manifest's keys",
                shards=3,
                keys=3000,
                loaded_keys=3000,
            ),
            last_backup=f"nightly-{suffix}-2",
            point_in_time=PointInTimeStatus(
                archived_until="2026-12-01T10:00:00Z", reason="ArchiveGap", message="history lost"
            ),
            switchover=SwitchoverStatus(
                request="0/cache-0-fghij@20261201T100000Z",
                phase=SwitchoverPhase.SUCCEEDED,
                from_="cache-0-abcde",
                to="cache-0-fghij",
                message="cache-0-fghij is the primary of shard 0",
                started_at="2026-12-01T10:00:00Z",
                finished_at="2026-12-01T10:00:03Z",
            ),
        ),
    )
    backup = ValkeyBackup(
        metadata=meta(f"nightly-{suffix}", namespace),
        spec=ValkeyBackupSpec(
            cluster_name="cache", destination=DESTINATION, consistency=BackupConsistency.ONE_INSTANT
        ),
        status=ValkeyBackupStatus(
            phase=BackupPhase.COMPLETED,
            reason="ManifestWritten",
            message="3 shards",
            started_at="2026-12-01T03:00:00Z",
            completed_at="2026-12-01T03:02:00Z",
            observed_generation=1,
            manifest_key="team-a/manifest.json",
            valkey_version="9.1.2",
            total_bytes=3 * 2**32,
            total_keys=3000,
            size="12 GiB",
            consistency=BackupConsistency.ONE_INSTANT,
            write_pause_milliseconds=21,
            shards=(
                BackupShard(
                    index=0,
                    slots="0-5460,7000",
                    source_pod="cache-0-abcde",
                    source_role=SourceRole.REPLICA,
                    object_key="team-a/shard-0.rdb",
                    bytes=2**33,
                    keys=1000,
                    sha256="0123456789abcdef" * 4,
                ),
                BackupShard(index=1, source_role=SourceRole.PRIMARY),
            ),
            conditions=conditions("Ready"),
        ),
    )
    to_a_second = Restore(point_in_time="2026-12-01T09:59:59Z", cluster_name="cache", destination=DESTINATION)
    restored = attrs.evolve(
        cluster,
        metadata=meta("cache-then", namespace, owner_references=(owner,)),
        spec=attrs.evolve(cluster.spec, restore=to_a_second),
        status=attrs.evolve(
            cluster.status,
            restore=RestoreStatus(
                point_in_time=to_a_second.point_in_time, phase=RestorePhase.LOADING, shards=3, loaded_keys=10
            ),
        ),
    )
    return [image, config, role, cluster, restored, backup]


DESTINATION = BackupDestination(
    endpoint="https://s3.eu-west-1.amazonaws.com",
    bucket="shop-valkey-backups",
    path="team-a",
    region="eu-west-1",
    credentials_secret_name="s3-credentials",
    ca_secret_name="s3-ca",
)


def without_server_fields(metadata: ObjectMeta) -> ObjectMeta:
    return attrs.evolve(metadata, uid=None, generation=None, resource_version=None)


async def create(kube: Client, tracked: Tracked, model: Model) -> Obj:
    resource, metadata = model.RESOURCE, model.metadata
    answer = await kube.create(resource, model.to_dict())
    tracked.append((resource, metadata.name, metadata.namespace))
    return answer


async def test_full_objects_are_accepted_and_round_trip(
    kube: Client, valkey_crds: None, namespace: str, tracked: Tracked
) -> None:
    owner_map = await kube.create(CONFIG_MAPS, {"metadata": {"name": "owner", "namespace": namespace}})
    owner = OwnerReference(
        api_version="v1",
        kind="ConfigMap",
        name="owner",
        uid=owner_map["metadata"]["uid"],
        controller=True,
        block_owner_deletion=False,
    )
    for model in full_models(namespace, namespace, owner):
        kind = type(model)
        answer = await create(kube, tracked, attrs.evolve(model, status=None))
        parsed = kind.from_dict(answer)
        assert parsed.metadata.uid and parsed.metadata.generation == 1
        assert attrs.evolve(parsed, metadata=without_server_fields(parsed.metadata)) == attrs.evolve(
            model, status=None
        )
        # The whole render, status included, through the status subresource (PUT, optimistic).
        current = attrs.evolve(model, metadata=parsed.metadata)
        answer = await kube.replace_status(model.RESOURCE, current.to_dict())
        parsed = kind.from_dict(answer)
        assert attrs.evolve(parsed, metadata=without_server_fields(parsed.metadata)) == model


async def test_minimal_objects_are_accepted_and_parse_with_schema_defaults(
    kube: Client, valkey_crds: None, namespace: str, tracked: Tracked
) -> None:
    suffix = namespace
    minimal: list[Model] = [
        ValkeyImage(
            metadata=ObjectMeta(name=f"min-image-{suffix}"),
            spec=ValkeyImageSpec(repository="valkey/valkey", tag="10.0.0", version="10.0.0"),
        ),
        ValkeyConfig(metadata=ObjectMeta(name=f"min-config-{suffix}"), spec=ValkeyConfigSpec(image_ref="x")),
        ValkeyConfig(metadata=ObjectMeta(name=f"min-derived-{suffix}"), spec=ValkeyConfigSpec(base_ref="x")),
        ValkeyRole(
            metadata=ObjectMeta(name=f"min-role-{suffix}"),
            spec=ValkeyRoleSpec(categories=(CategoryRule(name=AclCategory.ALL, access=Access.ALLOW),)),
        ),
        ValkeyCluster(
            metadata=ObjectMeta(name="min", namespace=namespace), spec=ValkeyClusterSpec(config_ref="x")
        ),
        ValkeyBackup(
            metadata=ObjectMeta(name="min", namespace=namespace),
            spec=ValkeyBackupSpec(
                cluster_name="min",
                destination=BackupDestination(endpoint="http://h", bucket="b-1", credentials_secret_name="s"),
            ),
        ),
    ]
    for model in minimal:
        answer = await create(kube, tracked, model)
        parsed = type(model).from_dict(answer)
        assert attrs.evolve(parsed, metadata=without_server_fields(parsed.metadata)) == model

    # Defaults are the schema's: what a spec leaves out, the server fills in as the model assumes.
    cluster = {
        "configRef": "x",
        "acl": [
            {
                "username": "u",
                "passwordHashes": ["a" * 64],
                "permissions": [{"roleRef": "r", "keys": [{"pattern": "*"}]}],
            }
        ],
    }
    answer = await kube.create(
        ValkeyCluster.RESOURCE,
        {
            "apiVersion": API_VERSION,
            "kind": "ValkeyCluster",
            "metadata": {"name": "defaults", "namespace": namespace},
            "spec": cluster,
        },
    )
    tracked.append((ValkeyCluster.RESOURCE, "defaults", namespace))
    user = AclUser(
        username="u",
        password_hashes=("a" * 64,),
        permissions=(Permission(role_ref="r", keys=(KeyPattern(pattern="*"),)),),
    )
    expected = ValkeyClusterSpec(config_ref="x", shards=3, replicas_per_shard=1, acl=(user,))
    assert ValkeyCluster.from_dict(answer).spec == expected
    role = {"categories": [{"name": "read"}], "commands": [{"name": "get"}]}
    answer = await kube.create(
        ValkeyRole.RESOURCE,
        {
            "apiVersion": API_VERSION,
            "kind": "ValkeyRole",
            "metadata": {"name": f"defaults-{suffix}"},
            "spec": role,
        },
    )
    tracked.append((ValkeyRole.RESOURCE, f"defaults-{suffix}", None))
    expected_role = ValkeyRoleSpec(
        categories=(CategoryRule(name=AclCategory.READ),), commands=(CommandRule(name="get"),)
    )
    assert ValkeyRole.from_dict(answer).spec == expected_role


def _cluster(**spec: Any) -> Model:
    return ValkeyCluster(metadata=ObjectMeta(name="bad"), spec=ValkeyClusterSpec(config_ref="x", **spec))


def _user(**fields: Any) -> AclUser:
    values: dict[str, Any] = {
        "username": "app",
        "password_hashes": ("a" * 64,),
        "permissions": (Permission(role_ref="r", keys=(KeyPattern(pattern="*", access=KeyAccess.READ),)),),
    }
    return AclUser(**{**values, **fields})


def _image(version: str) -> Model:
    return ValkeyImage(
        metadata=ObjectMeta(name="bad"),
        spec=ValkeyImageSpec(repository="valkey/valkey", tag="t", version=version),
    )


def _config(**spec: Any) -> Model:
    return ValkeyConfig(metadata=ObjectMeta(name="bad"), spec=ValkeyConfigSpec(**spec))


def _role(*commands: CommandRule) -> Model:
    categories = (CategoryRule(name=AclCategory.READ, access=Access.ALLOW),)
    return ValkeyRole(
        metadata=ObjectMeta(name="bad"), spec=ValkeyRoleSpec(categories=categories, commands=commands)
    )


def _edit(path: str, value: Any) -> Callable[[Obj], None]:
    """Set a dotted path in a rendered object (digits index lists): what the typed models cannot express."""

    def edit(obj: Obj) -> None:
        *parents, last = path.split(".")
        target: Any = obj
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value

    return edit


def _as_rendered(obj: Obj) -> None:
    """The typed render is invalid as it is."""


INVALID: dict[str, tuple[Model, Callable[[Obj], None], str]] = {
    # case: (typed model, edit of its render, the field the server's message names)
    "shards 0": (_cluster(shards=0), _as_rendered, "spec.shards"),
    "shards 65": (_cluster(shards=65), _as_rendered, "spec.shards"),
    "replicasPerShard -1": (_cluster(replicas_per_shard=-1), _as_rendered, "spec.replicasPerShard"),
    "replicasPerShard 6": (_cluster(replicas_per_shard=6), _as_rendered, "spec.replicasPerShard"),
    "shards of the wrong type": (_cluster(), _edit("spec.shards", "three"), "spec.shards"),
    "unknown zoneSpread": (
        _cluster(placement=Placement()),
        _edit("spec.placement.zoneSpread", "sometimes"),
        "spec.placement.zoneSpread",
    ),
    "unknown key access": (
        _cluster(acl=(_user(),)),
        _edit("spec.acl.0.permissions.0.keys.0.access", "append"),
        "spec.acl[0].permissions[0].keys[0].access",
    ),
    "reserved username": (
        _cluster(acl=(_user(username="valkey-operator"),)),
        _as_rendered,
        "spec.acl[0].username",
    ),
    "uppercase password hash": (
        _cluster(acl=(_user(password_hashes=("A" * 64,)),)),
        _as_rendered,
        "spec.acl[0].passwordHashes[0]",
    ),
    "reserved pod annotation": (
        _cluster(pod_annotations={"valkey.gomomento.com/paused": "true"}),
        _as_rendered,
        "spec.podAnnotations",
    ),
    "image below the floor": (_image("9.0.0"), _as_rendered, "spec.version"),
    "image version with a prefix": (_image("v9.1.0"), _as_rendered, "spec.version"),
    "config without imageRef or baseRef": (_config(), _as_rendered, "spec"),
    "config with an operator-owned directive": (
        _config(image_ref="i", valkey={"port": "1"}),
        _as_rendered,
        "spec.valkey",
    ),
    "config value with a newline": (
        _config(image_ref="i", valkey={"maxmemory": "1gb\nport 1"}),
        _as_rendered,
        "spec.valkey",
    ),
    "config runAsUser 0": (
        _config(image_ref="i", pod_security=PodSecurity(run_as_user=0)),
        _as_rendered,
        "spec.podSecurity.runAsUser",
    ),
    "unknown category access": (
        _role(),
        _edit("spec.categories.0.access", "maybe"),
        "spec.categories[0].access",
    ),
    "unknown category": (_role(), _edit("spec.categories.0.name", "everything"), "spec.categories[0].name"),
    "backup spec without a bucket name": (
        ValkeyBackup(
            metadata=ObjectMeta(name="bad"),
            spec=ValkeyBackupSpec(cluster_name="c", destination=attrs.evolve(DESTINATION, bucket="B")),
        ),
        _as_rendered,
        "spec.destination.bucket",
    ),
    "schedule keep 0": (
        _cluster(backup=BackupSchedule(schedule="0 3 * * *", destination=DESTINATION, keep=0)),
        _as_rendered,
        "spec.backup.keep",
    ),
    "uppercase command": (
        _role(CommandRule(name="GET", access=Access.ALLOW)),
        _as_rendered,
        "spec.commands[0].name",
    ),
}


@pytest.mark.parametrize("case", INVALID)
async def test_schema_invalid_renders_are_rejected(
    kube: Client, valkey_crds: None, namespace: str, tracked: Tracked, case: str
) -> None:
    model, edit, field = INVALID[case]
    if model.RESOURCE.namespaced:
        metadata = ObjectMeta(name="bad", namespace=namespace)
    else:
        metadata = ObjectMeta(name=f"bad-{namespace}")
    obj = attrs.evolve(model, metadata=metadata).to_dict()
    edit(obj)
    with pytest.raises(ApiError) as rejected:
        await kube.create(model.RESOURCE, obj)
        tracked.append((model.RESOURCE, metadata.name, metadata.namespace))
    assert rejected.value.status == 422, rejected.value
    assert f"{field}: " in rejected.value.message, rejected.value.message


# -- the schema's layout is the models' ------------------------------------------------------


def _crd_schemas() -> dict[str, Obj]:
    schemas = {}
    for crd in load_manifests(product_crds()):
        if crd.get("kind") == "CustomResourceDefinition":
            (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
            schemas[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return schemas


def _schema_paths(schema: Obj, prefix: str) -> Iterator[str]:
    for key, sub in schema.get("properties", {}).items():
        yield f"{prefix}.{key}"
        yield from _schema_paths(sub.get("items", sub), f"{prefix}.{key}")


def _document_paths(value: Any, schema: Obj, prefix: str) -> Iterator[str]:
    """Keys of a document, following lists; maps (additionalProperties in the schema) count as leaves."""
    if isinstance(value, list):
        for item in value:
            yield from _document_paths(item, schema.get("items", {}), prefix)
    elif isinstance(value, dict) and "additionalProperties" not in schema:
        for key, sub in value.items():
            yield f"{prefix}.{key}"
            yield from _document_paths(sub, schema.get("properties", {}).get(key, {}), f"{prefix}.{key}")


def test_schema_fields_and_enums_are_exactly_the_models() -> None:
    schemas = _crd_schemas()
    owner = OwnerReference(api_version="v1", kind="ConfigMap", name="o", uid="u")
    used: dict[tuple[str, str], set[str]] = {}
    for model in full_models("x", "ns", owner):  # a kind's objects together use every field
        schema = schemas[model.RESOURCE.kind]
        rendered = model.to_dict()
        for part in ("spec", "status"):
            found = _document_paths(rendered[part], schema["properties"][part], part)
            used.setdefault((model.RESOURCE.kind, part), set()).update(found)
    for (kind, part), paths in used.items():
        declared = set(_schema_paths(schemas[kind]["properties"][part], part))
        assert paths == declared, (kind, paths ^ declared)

    def node_at(kind: str, *path: str) -> Obj:
        node = schemas[kind]
        for key in path:
            node = node["items"] if key == "[]" else node["properties"][key]
        return node

    def enum_at(kind: str, *path: str) -> set[str]:
        return set(node_at(kind, *path).get("enum", ()))

    assert enum_at("ValkeyRole", "spec", "categories", "[]", "name") == set(AclCategory)
    assert enum_at("ValkeyRole", "spec", "categories", "[]", "access") == set(Access)
    assert enum_at("ValkeyRole", "spec", "commands", "[]", "access") == set(Access)
    acl_keys = ("spec", "acl", "[]", "permissions", "[]", "keys", "[]", "access")
    assert enum_at("ValkeyCluster", *acl_keys) == set(KeyAccess)
    assert enum_at("ValkeyCluster", "spec", "placement", "zoneSpread") == set(ZoneSpread)
    for part in ("spec", "status"):
        assert enum_at("ValkeyConfig", part, "persistence", "mode") == set(PersistenceMode)
        assert enum_at("ValkeyConfig", part, "persistence", "appendfsync") == set(Appendfsync)
        assert enum_at("ValkeyConfig", part, "persistence", "reclaimPolicy") == set(ReclaimPolicy)
    tolerations = ("spec", "placement", "tolerations", "[]")
    assert enum_at("ValkeyCluster", *tolerations, "operator") == set(TolerationOperator)
    assert enum_at("ValkeyCluster", *tolerations, "effect") == set(TaintEffect)
    assert enum_at("ValkeyCluster", "status", "state") == set(ClusterState)
    selector = ("spec", "networkPolicy", "clientFrom", "[]", "podSelector", "matchExpressions", "[]")
    assert enum_at("ValkeyCluster", *selector, "operator") == set(SelectorOperator)
    assert enum_at("ValkeyCluster", "status", "nodes", "[]", "role") == set(NodeRole)
    assert enum_at("ValkeyCluster", "status", "restore", "phase") == set(RestorePhase)
    assert enum_at("ValkeyBackup", "status", "phase") == set(BackupPhase)
    assert enum_at("ValkeyBackup", "status", "shards", "[]", "sourceRole") == set(SourceRole)
    assert node_at("ValkeyCluster", "spec", "shards")["default"] == ValkeyClusterSpec(config_ref="x").shards
    replicas = ValkeyClusterSpec(config_ref="x").replicas_per_shard
    assert node_at("ValkeyCluster", "spec", "replicasPerShard")["default"] == replicas
    assert node_at("ValkeyCluster", *acl_keys)["default"] == KeyPattern(pattern="*").access
    for rules in ("categories", "commands"):
        assert node_at("ValkeyRole", "spec", rules, "[]", "access")["default"] == CommandRule(name="x").access
