"""The chart on one Kubernetes minor, start to finish, in both RBAC modes: what `python -m
valkey_testbed compat` runs on each minor (docs/install.md, "Kubernetes versions"), and
CI on the default one.

helm install of the chart (its CRDs, with their CEL rules, created or upgraded by Helm), the
operator it runs reconciling a 2x1 TLS ValkeyCluster with an ACL user of a ValkeyRole to Active,
one scale (2 -> 3 shards), a crowded node relieved by the primary spread, one rolling update (a
ValkeyConfig resources edit replaces every pod), one certificate rotation (every node presents the
new leaf, no pod replaced), its NetworkPolicy switched off, delete, helm uninstall.

The chart's RBAC is judged by the API server's audit log (testing/audit.py) of the operator's
ServiceAccount over that lifecycle: enough when no request was refused, least when every rule the
chart grants was used, but for the few listed in UNUSED_GRANTS with the reason each is kept.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import json
import math
import os
import shutil
import socket
import ssl
import time
from pathlib import Path

import attrs
import own_bed
import pytest
from chart_support import CHART, RELEASE, can_i_list, helm, install, package
from cluster_support import (
    Catalog,
    admin_client,
    crowding,
    fail_over_by_hand,
    image_config,
    owned_pods,
    pause,
    primaries_by_pod,
    put_tls_secret,
    resume,
    settled,
    status_of,
)
from cryptography import x509

from controllers.shared import layout
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_ROLES
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import is_true
from valkey_operator.core.resource import CUSTOM_RESOURCE_DEFINITIONS, DEPLOYMENTS, NETWORK_POLICIES, PODS
from valkey_operator.core.rest import Obj
from valkey_testbed import audit, certs, compat, images, operatorimage
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.crds import load_manifests, product_crds
from valkey_testbed.wait import NotYet, eventually

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES  # a test bed of this module's own

pytestmark = [pytest.mark.integration]

SYNC_SECONDS = 5
"""The operator's secretSyncSeconds here: the test bed's kubelet writes Secret files after 2 s."""
MODES = {"namespaced": True, "cluster-wide": False}
"""Whether the release sets watchNamespaces (Roles in the watched namespace) or not (ClusterRoles)."""
_APPLY = "server-side apply of a missing object is a PATCH the API server also authorizes as create"
_BACKUPS = "ValkeyBackups: this scenario takes none (the backup e2e modules exercise them)"
UNUSED_GRANTS: dict[tuple[str, str], str] = {
    ("configmaps", "create"): _APPLY,
    ("services", "create"): _APPLY,
    ("poddisruptionbudgets.policy", "create"): _APPLY,
    ("networkpolicies.networking.k8s.io", "create"): _APPLY,
    ("valkeyclusters.valkey.gomomento.com/finalizers", "update"): "checked by the "
    "OwnerReferencesPermissionEnforcement admission plugin on blockOwnerDeletion, not requested",
    ("services", "delete"): "the per-pod Services of spec.externalAccess once it is switched off "
    "(tests/e2e/test_external_access.py); this scenario's clusters have no external access",
    ("pods/resize", "patch"): "in-place resize of a resources change; this scenario changes no resources",
    ("secrets", "patch"): "server-side apply of the internal Secret when spec.acl or a user's password "
    "changes; decide() creates it whole, and this scenario's users exist from the cluster's creation",
    **{
        ("persistentvolumeclaims", verb): "data claims of clusters with persistence; this scenario's "
        "clusters are caches"
        for verb in ("create", "patch", "delete")
    },
    **{
        (resource, verb): _BACKUPS
        for resource, verbs in (
            ("valkeybackups.valkey.gomomento.com", ("create", "delete")),
            ("valkeybackups.valkey.gomomento.com/status", ("patch",)),
        )
        for verb in verbs
    },
}
"""(resource, verb) the chart grants that no request uses, with why each stays."""


def chart_for(minor: str, tmp_path: Path) -> Path:
    """The chart as it is; only under `compat` (CANDIDATE set), for a minor older than its
    kubeVersion's floor, a copy whose floor is that minor."""
    claimed = compat.chart_kube_version((CHART / "Chart.yaml").read_text())
    if compat.admits(claimed, minor) or not os.environ.get(compat.CANDIDATE):
        return CHART
    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy, symlinks=False)
    widened = compat.kube_version_floor([minor])
    chart_file = copy / "Chart.yaml"
    chart_file.write_text(compat.with_kube_version(chart_file.read_text(), widened))
    print(f"[compat] the chart claims {claimed!r}; a candidate run installs it claiming {widened!r}")
    return copy


async def adopt_existing_crds(kube: Client, namespace: str) -> None:
    """CRDs other tests applied become this release's (docs/install.md, "CRDs installed by hand");
    on a fresh control plane there are none and Helm creates them."""
    for crd in load_manifests(product_crds()):
        name = crd["metadata"]["name"]
        if await kube.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, name) is None:
            continue
        annotations = {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": namespace}
        patch = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "Helm"}, "annotations": annotations}}
        await kube.patch(CUSTOM_RESOURCE_DEFINITIONS, name, patch)


async def crds_established(kube: Client) -> None:
    names = [crd["metadata"]["name"] for crd in load_manifests(product_crds())]

    async def done() -> bool | NotYet:
        waiting = []
        for name in names:
            crd = await kube.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, name)
            if crd is None or not is_true(crd.get("status", {}).get("conditions"), "Established"):
                waiting.append(name)
        return NotYet(waiting) if waiting else True

    await eventually(done, "the chart's CRDs Established", 60)


def presented_serial(ip: str) -> str:
    """The serial of the certificate the node at ip presents (unverified: we want to see it)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection((ip, layout.VALKEY_PORT), 2.0) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return format(x509.load_der_x509_certificate(der).serial_number, "X")


def pod_uids(pods: list[Obj]) -> set[str]:
    return {pod["metadata"]["uid"] for pod in pods}


def granted(lines: set[str]) -> set[tuple[str, str]]:
    """(resource, verb) pairs of `kubectl auth can-i --list` lines (resource names dropped)."""
    pairs = set()
    for line in lines:
        resource, *_, verbs = line.split(" [")
        pairs |= {(resource, verb) for verb in verbs.rstrip("]").split()}
    return pairs


def used(events: list[audit.AuditEvent]) -> set[tuple[str, str]]:
    """(resource, verb) pairs of the requests, named as can-i names them (resource.group/sub)."""
    pairs = set()
    for event in events:
        if not event.resource:
            continue
        base, _, sub = event.resource.partition("/")
        name = f"{base}.{event.group}" if event.group else base
        pairs.add((f"{name}/{sub}" if sub else name, event.verb))
    return pairs


def refused(event: audit.AuditEvent) -> bool:
    """The authorizer said no. A 403 it allowed came from admission: a namespace being deleted (a
    cluster-wide operator meets other tests' namespaces as they go), not from the chart's RBAC."""
    return event.decision != "allow"


def judge_rbac(log: Path, account: str, grants: set[tuple[str, str]], uninstalled_at: str) -> None:
    """Enough: the API server refused the operator nothing until `helm uninstall`. Least: it used
    every grant but those UNUSED_GRANTS explains.

    Helm deletes the Deployment and then, without waiting for its pods to stop, the bindings: what
    the stopping operator still sends (its last status patch, the release of its Lease) can be
    refused then, and is not judged.
    """
    requests = [event for event in audit.events(log) if event.user == account]
    assert len(requests) > 100, f"the audit log holds {len(requests)} requests of {account}"
    during = [event for event in requests if event.received < uninstalled_at]
    refusals = [attrs.asdict(event) for event in during if refused(event)]
    assert not refusals, f"the API server refused the operator: {refusals[:5]}"
    late = sorted({(e.verb, e.resource) for e in requests if e.received >= uninstalled_at and refused(e)})
    print(f"[compat] refused while helm uninstall removed the bindings (not judged): {late}")
    unused = grants - used(requests)
    print(f"[compat] {len(requests)} requests of the operator; granted but unused: {sorted(unused)}")
    assert unused <= set(UNUSED_GRANTS), f"rules the chart grants that no request used: {sorted(unused)}"


@pytest.mark.timeout(1500)
@pytest.mark.parametrize(
    "mode",
    [
        # Helm owns the CRDs and the chart's ClusterRoles while a release is installed, and the
        # cluster-wide operator reconciles every namespace's clusters: the module runs on a test
        # bed of its own (own_bed.py), one mode after the other.
        "namespaced",
        "cluster-wide",
    ],
)
async def test_chart_install_tls_cluster_scale_roll_rotate_delete_uninstall(
    mode: str,
    kube: Client,
    kube_control_plane: ControlPlane,
    kubeconfig_path: Path,
    namespace: str,
    workloads: str,
    catalog: Catalog,
    tmp_path: Path,
    release: str,
    operator_image: operatorimage.BuiltImage,
) -> None:
    timings: dict[str, float] = {}

    def lap(step: str, started: float) -> None:
        timings[step] = round(time.monotonic() - started, 1)
        print(f"[compat] {step}: {timings[step]} s")

    _, version = kube_control_plane.get("/version")
    server = json.loads(version)
    minor = f"{server['major']}.{server['minor'].rstrip('+')}"
    print(f"[compat] API server {server['gitVersion']}")

    # 1. helm install of the packaged chart (the .tgz users get): Helm checks kubeVersion against
    # the server, creates (or adopts) the CRDs the archive carries; helm test passes. The image is
    # this checkout's, pinned by digest (its tag is shared by every checkout on the machine).
    started = time.monotonic()
    await adopt_existing_crds(kube, namespace)
    install(
        kubeconfig_path,
        namespace,
        *([f"watchNamespaces={{{workloads}}}"] if MODES[mode] else []),
        f"operatorConfig.secretSyncSeconds={SYNC_SECONDS}",
        f"image.digest={operator_image.digest}",
        chart=package(tmp_path / "package", chart_for(minor, tmp_path)),
    )
    account = f"system:serviceaccount:{namespace}:{RELEASE}-valkey-operator"
    grants = granted(can_i_list(kubeconfig_path, account, namespace))
    grants |= granted(can_i_list(kubeconfig_path, account, workloads))
    await crds_established(kube)
    tested = helm(kubeconfig_path, "test", RELEASE, "-n", namespace, "--timeout", "2m")
    phases = [line.split()[-1] for line in tested.splitlines() if line.startswith("Phase:")]
    assert phases and set(phases) == {"Succeeded"}, tested
    lap("helm install + helm test", started)

    # 2. A 2x1 TLS cluster (its ValkeyImage passes the CRD's CEL rules) becomes Active.
    started = time.monotonic()
    pki_ca, pki_key = certs.issue_ca("compat-ca")
    ca = certs.pem(pki_ca)

    def leaf() -> tuple[bytes, bytes]:
        cert, key = certs.issue_leaf(
            pki_ca, pki_key, "valkey", ip_addresses=("127.0.0.1",), server=True, client=True
        )
        return certs.pem(cert), certs.key_pem(key)

    await put_tls_secret(kube, workloads, leaf(), ca)
    config = await image_config(catalog, images.tls_image())
    role = catalog("rw")
    categories = [{"name": "read", "access": "allow"}, {"name": "write", "access": "allow"}]
    await catalog.create(VALKEY_ROLES, {"metadata": {"name": role}, "spec": {"categories": categories}})
    user = {
        "username": "app",
        "passwordHashes": [hashlib.sha256(b"app-password").hexdigest()],
        "permissions": [{"roleRef": role, "keys": [{"pattern": "*", "access": "readwrite"}]}],
    }
    spec = {
        "configRef": config,
        "shards": 2,
        "replicasPerShard": 1,
        "tls": {"secretRef": "tls"},
        "acl": [user],
    }
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": "compat", "namespace": workloads},
        "spec": spec,
    }
    await kube.create(VALKEY_CLUSTERS, body)
    status = await settled(kube, workloads, "compat", 360)
    assert len(status["nodes"]) == 4, status["nodes"]
    lap("2x1 Active", started)

    # 3. One scale: 2 -> 3 shards.
    started = time.monotonic()
    await kube.patch(VALKEY_CLUSTERS, "compat", {"spec": {"shards": 3}}, workloads)
    status = await settled(kube, workloads, "compat", 600)
    assert len(status["nodes"]) == 6, status["nodes"]
    lap("scale to 3x1", started)

    # 3b. The primary spread: one node crowded by hand (paused), relieved by the operator.
    started = time.monotonic()
    admin = attrs.evolve(await admin_client(kube, workloads, "compat"), ca_pem=ca.decode())
    pods = await owned_pods(kube, workloads, "compat")
    hosts = {pod["metadata"]["name"]: pod["spec"]["nodeName"] for pod in pods}
    share = math.ceil(3 / len(set(hosts.values())))
    crowded, wanted = crowding(hosts, status)
    assert len(wanted) > share, f"no node holds copies of more than {share} shards: {hosts}"
    await pause(kube, workloads, "compat")
    replicas = [node["ip"] for node in status["nodes"] if node["pod"] in wanted and node["role"] == "replica"]
    await fail_over_by_hand(admin, replicas)
    await resume(kube, workloads, "compat")

    async def relieved() -> bool | NotYet:
        current = await status_of(kube, workloads, "compat")
        on_crowded = [pod for pod in await primaries_by_pod(admin, current) if hosts[pod] == crowded]
        done = current.get("state") == "Active" and len(on_crowded) <= share
        return done or NotYet((current.get("maxPrimariesPerNode"), on_crowded))

    await eventually(relieved, f"{crowded} relieved to {share} primaries", 180, interval=0.5)
    lap("spread", started)

    # 4. One rolling update: a resources edit of its ValkeyConfig changes the pod template. The
    # config set no resources, so the pods have none: a first request changes their QoS class,
    # which pods/resize cannot, and every pod is replaced (not resized in place).
    started = time.monotonic()
    before = pod_uids(await owned_pods(kube, workloads, "compat"))
    await kube.patch(VALKEY_CONFIGS, config, {"spec": {"resources": {"cpu": "100m"}}})

    async def rolled() -> Obj | NotYet:
        pods = await owned_pods(kube, workloads, "compat")
        current = await status_of(kube, workloads, "compat")
        fresh = len(pods) == 6 and not before & pod_uids(pods)
        done = fresh and current.get("state") == "Active" and "rollout" not in current
        return (
            current
            if done
            else NotYet({"old pods": len(before & pod_uids(pods)), "state": current.get("state")})
        )

    await eventually(rolled, "every pod replaced and the cluster Active", 900, interval=1.0)
    pods = await owned_pods(kube, workloads, "compat")
    assert all(p["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m" for p in pods)
    lap("rolling update", started)

    # 5. Certificate rotation: every node presents the new leaf, no pod replaced.
    started = time.monotonic()
    uids = pod_uids(pods)
    second = leaf()
    serial = format(x509.load_pem_x509_certificate(second[0]).serial_number, "X")
    await put_tls_secret(kube, workloads, second, ca)

    async def everyone_presents() -> bool | NotYet:
        seen = {}
        for pod in await owned_pods(kube, workloads, "compat"):
            ip = pod["status"].get("podIP")
            seen[pod["metadata"]["name"]] = await asyncio.to_thread(presented_serial, ip) if ip else None
        return all(value == serial for value in seen.values()) or NotYet(seen)

    await eventually(everyone_presents, f"every node presenting {serial}", 120, interval=0.5)
    assert pod_uids(await owned_pods(kube, workloads, "compat")) == uids
    lap("TLS rotation", started)

    # 5b. The NetworkPolicy rendered by default goes when switched off (the grant's delete).
    started = time.monotonic()
    assert await kube.get_or_none(NETWORK_POLICIES, "compat", workloads) is not None
    await kube.patch(VALKEY_CLUSTERS, "compat", {"spec": {"networkPolicy": {"enabled": False}}}, workloads)

    async def policy_gone() -> bool | NotYet:
        return await kube.get_or_none(NETWORK_POLICIES, "compat", workloads) is None or NotYet("still there")

    await eventually(policy_gone, "the NetworkPolicy deleted", 60, interval=0.5)
    lap("NetworkPolicy off", started)

    # 6. Delete: the cluster and its pods go.
    started = time.monotonic()
    await kube.delete(VALKEY_CLUSTERS, "compat", workloads)

    async def gone() -> bool | NotYet:
        left = await kube.get_or_none(VALKEY_CLUSTERS, "compat", workloads)
        pods = await kube.list(PODS, workloads)
        return (left is None and not pods) or NotYet({"cluster": left is not None, "pods": len(pods)})

    await eventually(gone, "the cluster and its pods deleted", 180, interval=0.5)
    lap("delete", started)

    # 7. helm uninstall: the operator goes, the CRDs stay.
    started = time.monotonic()
    uninstalled_at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    helm(kubeconfig_path, "uninstall", RELEASE, "-n", namespace, "--wait")
    assert await kube.list(DEPLOYMENTS, namespace) == []
    for crd in load_manifests(product_crds()):
        assert await kube.get_or_none(CUSTOM_RESOURCE_DEFINITIONS, crd["metadata"]["name"]) is not None
    lap("helm uninstall", started)
    print(f"[compat] Kubernetes {server['gitVersion']}, {mode}: {timings}")
    judge_rbac(kube_control_plane.audit_log, account, grants, uninstalled_at)
