"""ValkeyCluster bootstrap end to end: the operator's reconcilers in this process, real pods, real Valkey.

The session test bed's process kubelet runs every pod as real valkey-server
processes on 127.x pod IPs; the operator probes and joins them exactly as it
would in a cluster (SPEC 1.4 "Creating", SPEC 5).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import time

import attrs
import pytest
from chart_operator import ChartOperator
from cluster_support import (
    CLUSTER_CONTROLLER,
    SUPERUSER,
    SUPERUSER_PASSWORD,
    Catalog,
    PodsCreated,
    admin_client,
    create_cluster,
    image_config,
    node_reports,
    owned_pods,
    require_image,
    status_of,
    wait_for_state,
    whole_passes,
)
from cryptography.hazmat.primitives import serialization

from valkey_operator.api.resources import (
    CONFIG_PROTECTION_FINALIZER,
    PAUSED_ANNOTATION,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_ROLES,
)
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import (
    CONFIG_MAPS,
    NAMESPACES,
    POD_DISRUPTION_BUDGETS,
    SECRETS,
    SERVICES,
    Resource,
)
from valkey_operator.valkey.admin import AdminClient, Credentials, ValkeyAdminError, ValkeyCommandError
from valkey_operator.valkey.slots import even_split, format_slot_ranges
from valkey_testbed import audit, certs, images
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.datachecker import DataChecker
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]


@pytest.mark.timeout(240)
async def test_one_shard_without_replicas_reaches_active(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    image = images.newest_image()
    config = await image_config(catalog, image)
    started = time.monotonic()
    await create_cluster(kube, namespace, "solo", config, shards=1, replicas=0)
    status = await wait_for_state(kube, namespace, "solo", "Active", 180)
    print(f"1x0 Active after {time.monotonic() - started:.1f}s")
    assert status["endpoint"] == f"solo-client.{namespace}.svc.cluster.local:6379"
    assert status["readyShards"] == 1
    assert [node["slots"] for node in status["nodes"]] == ["0-16383"]
    assert status["currentImage"] == image
    ready = find_condition(status["conditions"], "Ready")
    assert ready is not None and ready["status"] == "True", status
    cluster = await kube.get(VALKEY_CLUSTERS, "solo", namespace)
    assert status["observedGeneration"] == cluster["metadata"]["generation"]
    for resource, name in [
        (SERVICES, "solo"),
        (SERVICES, "solo-client"),
        (CONFIG_MAPS, "solo-config"),
        (SECRETS, "solo-internal"),
        (POD_DISRUPTION_BUDGETS, "solo-0"),
    ]:
        assert await kube.get_or_none(resource, name, namespace) is not None, name


@pytest.mark.timeout(300)
async def test_passes_over_an_unchanged_cluster_write_no_status(
    operator: ChartOperator,
    kube: Client,
    catalog: Catalog,
    namespace: str,
    kube_control_plane: ControlPlane,
) -> None:
    """A pass parses the stored status into the model decide reads and writes the decided model back
    only when it differs: over a cluster where nothing changes, every pass decides the stored status
    again and sends nothing. Counted where it cannot be missed, in the API server's audit log of the
    operator's service account (its pod runs under the chart's)."""
    config = await image_config(catalog, images.newest_image())
    await create_cluster(kube, namespace, "calm", config, shards=1, replicas=1)
    await wait_for_state(kube, namespace, "calm", "Active", 240)
    await whole_passes(operator, kube, namespace, "calm", count=2)  # what Active still settles
    account = f"system:serviceaccount:{namespace}:"

    def status_writes(since: str = "") -> list[audit.AuditEvent]:
        return [
            event
            for event in audit.events(kube_control_plane.audit_log)
            if event.user.startswith(account)
            and event.resource == "valkeyclusters/status"
            and event.verb in {"patch", "update"}
            and event.name == "calm"
            and event.received > since
        ]

    assert status_writes(), "the audit log shows the writes up to Active (else it proves nothing)"
    mark = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    stored = await status_of(kube, namespace, "calm")
    passes = await operator.reconciles(CLUSTER_CONTROLLER)
    await whole_passes(operator, kube, namespace, "calm", count=5)
    ran = await operator.reconciles(CLUSTER_CONTROLLER) - passes
    print(f"{ran} passes over the unchanged cluster")
    assert ran >= 5
    assert status_writes(mark) == [], "a pass over an unchanged cluster wrote its status"
    assert await status_of(kube, namespace, "calm") == stored


@pytest.mark.timeout(420)
async def test_three_shards_with_a_replica_each_reach_active_and_serve_keys(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    config = await image_config(catalog, images.newest_image())
    started = time.monotonic()
    await create_cluster(kube, namespace, "trio", config, shards=3, replicas=1)
    status = await wait_for_state(kube, namespace, "trio", "Active", 360)
    print(f"3x1 Active after {time.monotonic() - started:.1f}s")
    assert status["readyShards"] == 3 and len(status["nodes"]) == 6
    primaries = [node for node in status["nodes"] if node.get("role") == "primary"]
    replicas = [node for node in status["nodes"] if node.get("role") == "replica"]
    assert len(primaries) == 3 and len(replicas) == 3, status["nodes"]
    layout = {format_slot_ranges(share) for share in even_split(3)}
    assert {node["slots"] for node in primaries} == layout, primaries
    assert {node["shard"] for node in primaries} == {0, 1, 2}

    admin = await admin_client(kube, namespace, "trio")
    for node in status["nodes"]:
        report = await node_reports(admin, node["ip"])
        assert report["cluster"]["cluster_state"] == "ok", node
        assert report["cluster"]["cluster_slots_assigned"] == "16384"
        if node["role"] == "replica":
            assert report["info"]["master_link_status"] == "up", node
        else:
            assert report["info"]["connected_slaves"] == "1", node

    seeds = [(node["ip"], 6379) for node in primaries]
    async with DataChecker(seeds, replicas=1, username=SUPERUSER, password=SUPERUSER_PASSWORD) as checker:
        written = await checker.write(300)
        assert written.acknowledged == 300, written
        verified = await checker.verify()
        assert verified.ok, verified


@pytest.mark.timeout(180)
async def test_image_below_the_floor_declared_above_it_fails_and_no_node_joins(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    reference = "valkey/valkey:9.0.0"
    require_image(reference)
    config = await catalog.config("cfg", await catalog.image("old", "9.0.0", version="9.0.1"))
    await create_cluster(kube, namespace, "old", config, shards=2, replicas=0)
    status = await wait_for_state(kube, namespace, "old", "Failed", 150)
    message = status["message"]
    assert reference in message and "Valkey 9.0.0" in message and "9.0.1" in message, message
    ready = find_condition(status["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "VersionBelowFloor"
    await whole_passes(operator, kube, namespace, "old")  # passes that could have joined the nodes
    admin = await admin_client(kube, namespace, "old")
    pods = await owned_pods(kube, namespace, "old")
    assert len(pods) == 2
    for pod in pods:
        report = await node_reports(admin, pod["status"]["podIP"])
        assert len(report["nodes"].strip().splitlines()) == 1, report["nodes"]
        assert report["cluster"]["cluster_slots_assigned"] == "0"
    events = await kube.list(Resource("events.k8s.io", "v1", "events", "Event"), namespace)
    warnings = [e for e in events if e.get("reason") == "VersionBelowFloor" and e.get("type") == "Warning"]
    assert warnings and reference in warnings[0]["note"], events
    rejections = await operator.sample(
        "valkey_operator_version_floor_rejections_total", {"namespace": namespace, "cluster": "old"}
    )
    assert rejections == 1


@pytest.mark.timeout(180)
async def test_image_whose_server_cannot_start_fails_without_a_pod_storm(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    """Valkey 8.1.8 rejects the operator's valkey.conf (shutdown-on-sigterm failover) and exits at once.

    Its termination message (the end of its log) names its version, so the status names image, found
    version and floor, as for a below-floor server that does start.
    """
    reference = "valkey/valkey:8.1.8"
    require_image(reference)
    config = await catalog.config("cfg", await catalog.image("old", "8.1.8", version="9.0.1"))
    async with PodsCreated(kube, namespace, "old") as pods:  # failed pods are pruned: count creations
        await create_cluster(kube, namespace, "old", config, shards=2, replicas=0)
        status = await wait_for_state(kube, namespace, "old", "Failed", 150)
        message = status["message"]
        assert reference in message and "Valkey 8.1.8" in message and "floor 9.0.1" in message, status
        assert "no node joined" in message, status
        degraded = find_condition(status["conditions"], "Degraded")
        assert degraded is not None and degraded["status"] == "True" and degraded["reason"] == "PodsFailing"

        # Positive signals first: every pod created so far has ended, then the operator looked again.
        # Without the crash-loop guard a pass that sees no live pod in a shard creates one.
        def all_ended() -> bool | NotYet:
            return (pods.created > 0 and not pods.live()) or NotYet(pods.phases)

        await eventually(all_ended, "every pod created so far to end", 60)
        ended = pods.created
        await whole_passes(operator, kube, namespace, "old")
        assert pods.created == ended, f"{pods.created - ended} pods created after all {ended} had failed"
        # The guard stops a shard after 3 failures in its window: 2 shards, 3 pods each.
        assert ended <= 2 * 3, f"{ended} pods created for 2 shards: {pods.phases}"
        print(f"{ended} pods created, all ended: {pods.phases}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("broken", ["ImageNotFound", "BaseNotFound", "ConfigNotFound"])
async def test_unresolvable_config_does_not_progress_and_creates_nothing(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str, broken: str
) -> None:
    """A missing image, a broken baseRef chain or a missing config: status says why, nothing is created."""
    if broken == "ImageNotFound":
        config = await catalog.config("cfg", catalog("absent"))
    elif broken == "BaseNotFound":
        config = catalog("child")
        body = {"metadata": {"name": config}, "spec": {"baseRef": catalog("absent")}}
        await catalog.create(VALKEY_CONFIGS, body)
    else:
        config = catalog("absent")
    await create_cluster(kube, namespace, "blocked", config, shards=1, replicas=0)

    async def explained() -> bool:
        status = await status_of(kube, namespace, "blocked")
        progressing = find_condition(status.get("conditions"), "Progressing")
        return progressing is not None and progressing["status"] == "False" and bool(status.get("message"))

    await eventually(explained, "the reason in status", 60)
    status = await status_of(kube, namespace, "blocked")
    progressing = find_condition(status["conditions"], "Progressing")
    assert progressing is not None, status
    assert progressing["reason"] == broken, status
    assert catalog("absent") in status["message"], status
    assert status["state"] != "Active"
    await whole_passes(operator, kube, namespace, "blocked")  # passes that could have created objects
    assert await owned_pods(kube, namespace, "blocked") == []
    for resource, name in [
        (SERVICES, "blocked"),
        (SERVICES, "blocked-client"),
        (CONFIG_MAPS, "blocked-config"),
        (SECRETS, "blocked-internal"),
    ]:
        assert await kube.get_or_none(resource, name, namespace) is None, name


@pytest.mark.timeout(240)
async def test_deleting_the_cluster_removes_what_it_owns_and_releases_the_config(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    config = await image_config(catalog, images.newest_image())
    await create_cluster(kube, namespace, "doomed", config, shards=1, replicas=0)
    await wait_for_state(kube, namespace, "doomed", "Active", 180)
    protected = await kube.get(VALKEY_CONFIGS, config)
    assert CONFIG_PROTECTION_FINALIZER in protected["metadata"].get("finalizers", [])

    await kube.delete(VALKEY_CLUSTERS, "doomed", namespace)
    owned = [
        (SERVICES, "doomed"),
        (SERVICES, "doomed-client"),
        (CONFIG_MAPS, "doomed-config"),
        (SECRETS, "doomed-internal"),
        (POD_DISRUPTION_BUDGETS, "doomed-0"),
    ]

    async def all_gone() -> bool:
        if await owned_pods(kube, namespace, "doomed"):
            return False
        return all([await kube.get_or_none(resource, name, namespace) is None for resource, name in owned])

    await eventually(all_gone, "owned objects garbage-collected", 120)

    async def released() -> bool:
        current = await kube.get(VALKEY_CONFIGS, config)
        return CONFIG_PROTECTION_FINALIZER not in current["metadata"].get("finalizers", [])

    await eventually(released, "the config's protection released", 30)


@pytest.mark.timeout(420)
async def test_an_operator_restarted_mid_bootstrap_resumes_and_finishes(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    config = await image_config(catalog, images.newest_image())
    await create_cluster(kube, namespace, "resumed", config, shards=3, replicas=1)

    async def some_pods() -> bool:
        return len(await owned_pods(kube, namespace, "resumed")) >= 3

    await eventually(some_pods, "the first pods", 60)
    await operator.stop()  # mid-bootstrap: pods exist, the cluster is not formed yet
    assert (await status_of(kube, namespace, "resumed")).get("state") != "Active"
    await operator.start()
    status = await wait_for_state(kube, namespace, "resumed", "Active", 360)
    assert status["readyShards"] == 3
    assert len(await owned_pods(kube, namespace, "resumed")) == 6, "no duplicate pods after the restart"


@pytest.mark.timeout(240)
async def test_pods_pass_the_restricted_pod_security_standard(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    require_image(images.newest_image())
    labels = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    await kube.patch(NAMESPACES, namespace, {"metadata": {"labels": labels}})
    config = await image_config(catalog, images.newest_image())
    await create_cluster(kube, namespace, "strict", config, shards=1, replicas=1)
    status = await wait_for_state(kube, namespace, "strict", "Active", 180)
    assert len(status["nodes"]) == 2


@pytest.mark.timeout(120)
async def test_a_paused_cluster_changes_nothing_but_reports_status(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    config = await image_config(catalog, images.newest_image())
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": "held", "namespace": namespace, "annotations": {PAUSED_ANNOTATION: "true"}},
        "spec": {"configRef": config, "shards": 1, "replicasPerShard": 0},
    }
    await kube.create(VALKEY_CLUSTERS, body)

    async def reported() -> bool:
        return (await status_of(kube, namespace, "held")).get("message", "").startswith("paused")

    await eventually(reported, "a paused status", 60)
    progressing = find_condition((await status_of(kube, namespace, "held"))["conditions"], "Progressing")
    assert progressing is not None and progressing["reason"] == "Paused"
    await whole_passes(operator, kube, namespace, "held")  # passes that could have created objects
    assert await owned_pods(kube, namespace, "held") == []
    assert await kube.get_or_none(SERVICES, "held", namespace) is None

    await kube.patch(
        VALKEY_CLUSTERS, "held", {"metadata": {"annotations": {PAUSED_ANNOTATION: None}}}, namespace
    )
    await wait_for_state(kube, namespace, "held", "Active", 90)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def _can_auth(ip: str, username: str, password: str) -> bool:
    client = AdminClient(
        credentials=Credentials(username=username, password=password), allowed_networks=LOOPBACK_NETWORKS
    )
    try:
        async with client.connect(ip) as node:
            return await node.text("PING") == "PONG"
    except ValkeyAdminError:
        return False


@pytest.mark.timeout(240)
async def test_acl_users_are_loaded_at_start_and_changed_at_runtime(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    config = await image_config(catalog, images.newest_image())
    role = catalog("rw")
    spec = {"categories": [{"name": "read", "access": "allow"}, {"name": "write", "access": "allow"}]}
    await catalog.create(VALKEY_ROLES, {"metadata": {"name": role}, "spec": spec})
    user = {
        "username": "app",
        "passwordHashes": [_sha256("first-password")],
        "permissions": [{"roleRef": role, "keys": [{"pattern": "app:*", "access": "readwrite"}]}],
    }
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": "acl", "namespace": namespace},
        "spec": {"configRef": config, "shards": 1, "replicasPerShard": 1, "acl": [user]},
    }
    await kube.create(VALKEY_CLUSTERS, body)
    status = await wait_for_state(kube, namespace, "acl", "Active", 180)
    ips = [node["ip"] for node in status["nodes"]]
    primary = next(node["ip"] for node in status["nodes"] if node["role"] == "primary")
    for ip in ips:
        assert await _can_auth(ip, "app", "first-password"), ip
        assert not await _can_auth(ip, "default", "")
    app = AdminClient(
        credentials=Credentials(username="app", password="first-password"), allowed_networks=LOOPBACK_NETWORKS
    )
    async with app.connect(primary) as node:
        assert await node.text("SET", "app:1", "v") == "OK"
        with pytest.raises(ValkeyCommandError):
            await node.command("SET", "other:1", "v")

    user["passwordHashes"] = [_sha256("second-password")]
    await kube.patch(VALKEY_CLUSTERS, "acl", {"spec": {"acl": [user]}}, namespace)
    print(f"ACL changed at {time.strftime('%H:%M:%S')}")

    async def rotated() -> bool:
        for ip in ips:
            if not await _can_auth(ip, "app", "second-password") or await _can_auth(
                ip, "app", "first-password"
            ):
                return False
        return True

    changed = time.monotonic()
    await eventually(rotated, "the new password on every node", 60)
    print(f"new password on every node after {time.monotonic() - changed:.1f}s")


@pytest.mark.timeout(240)
async def test_a_tls_cluster_forms_and_serves_only_tls(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    require_image(images.tls_image())
    ca_cert, ca_key = certs.issue_ca("tls-e2e-ca")
    # Cluster addresses are IPs that are not known before the pods start: the nodes and the
    # operator verify the CA, not the names (see docs/cluster-internals.md).
    cert, key = certs.issue_leaf(
        ca_cert, ca_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    data = {
        "tls.crt": cert.public_bytes(pem),
        "tls.key": key_pem,
        "ca.crt": ca_cert.public_bytes(pem),
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "tls", "namespace": namespace},
        "data": {name: base64.b64encode(value).decode() for name, value in data.items()},
    }
    await kube.create(SECRETS, secret)
    config = await image_config(catalog, images.tls_image())
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": "secure", "namespace": namespace},
        "spec": {"configRef": config, "shards": 1, "replicasPerShard": 1, "tls": {"secretRef": "tls"}},
    }
    await kube.create(VALKEY_CLUSTERS, body)
    status = await wait_for_state(kube, namespace, "secure", "Active", 180)
    admin = await admin_client(kube, namespace, "secure")
    secure = attrs.evolve(admin, ca_pem=data["ca.crt"].decode())
    for node in status["nodes"]:
        async with secure.connect(node["ip"]) as connection:
            assert (await connection.cluster_info())["cluster_state"] == "ok"
        with pytest.raises(ValkeyAdminError):  # TLS-only: the same port refuses plain RESP
            async with admin.connect(node["ip"]) as plain:
                await plain.text("PING")
