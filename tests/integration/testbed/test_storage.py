"""Real storage on the test bed: the local-path-provisioner, the PV controller and the kubelet's claims.

A claim of the default StorageClass `local-path` waits for its first pod; the
scheduler's VolumeBinding plugin picks the node (the selected-node annotation),
the real local-path-provisioner has its helper pod make the directory on that
node and creates the PersistentVolume, the real PV controller binds the claim,
and the kubelet mounts the volume. These tests check each of those parts, what
survives (a new pod on the claim, a node reboot) and what does not (a node
failure that loses the disk, the claim's deletion).
"""

from __future__ import annotations

import asyncio
import shutil
import stat
from pathlib import Path
from typing import Any

import own_bed
import pytest
from kubelet_support import POD_IP_ENV, Pods, busybox, condition, container_status, pod_body, read_text

from valkey_operator.core.client import Client
from valkey_operator.core.resource import Resource
from valkey_operator.core.rest import ApiError
from valkey_testbed import localpath
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.wait import NotYet, eventually

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES  # a test bed of this module's own

# Fails nodes: runs on a test bed of its own.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

Obj = dict[str, Any]
CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False)
SELECTED_NODE = "volume.kubernetes.io/selected-node"
VALKEY_USER = {"runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999, "fsGroup": 999}


def claim_body(name: str, namespace: str, **spec: Any) -> Obj:
    """A claim with no storageClassName: the default class is what it gets."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}, **spec},
    }


def claim_pod(name: str, claim: str, script: str, *, read_only: bool = False, **spec: Any) -> Obj:
    """A non-root pod (the Valkey image's user, with fsGroup) with the claim at /data."""
    mount = {"name": "data", "mountPath": "/data", "readOnly": read_only}
    container = busybox(script, env=POD_IP_ENV, volumeMounts=[mount])
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return pod_body(name, container, securityContext=VALKEY_USER, volumes=volumes, **spec)


async def bound(kube: Client, namespace: str, claim: str) -> tuple[Obj, Obj]:
    """The claim once Bound, and its volume."""

    async def check() -> tuple[Obj, Obj] | NotYet:
        pvc = await kube.get(CLAIMS, claim, namespace)
        if pvc.get("status", {}).get("phase") != "Bound":
            return NotYet(pvc.get("status"))
        return pvc, await kube.get(VOLUMES, pvc["spec"]["volumeName"])

    found: tuple[Obj, Obj] = await eventually(check, f"claim {claim} Bound", 90)
    return found


def host_mode(path: Path) -> tuple[int, int, int] | None:
    """(permission bits, uid, gid) of a path on the host, None if it does not exist."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return stat.S_IMODE(found.st_mode), found.st_uid, found.st_gid


async def read(kubelet: KubeletControl, namespace: str, pod: str, *argv: str) -> tuple[int, str]:
    result = await kubelet.exec(namespace, pod, "main", list(argv))
    return result.exit_code, result.output.decode()


async def back_after_node_failure(pods: Pods, name: str, restarts: int) -> Obj:
    return await pods.wait(
        name,
        lambda p: condition(p, "Ready") == "True" and container_status(p).get("restartCount") == restarts,
        90,
        f"{name} running again after the node came back",
    )


async def test_default_class_is_local_path_with_the_upstream_settings(kube: Client) -> None:
    storage_class = await kube.get(STORAGE_CLASSES, localpath.STORAGE_CLASS)
    assert storage_class["provisioner"] == "rancher.io/local-path"
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class["reclaimPolicy"] == "Delete"
    assert not storage_class.get("allowVolumeExpansion"), "local-path volumes cannot be expanded"
    annotations = storage_class["metadata"]["annotations"]
    assert annotations["storageclass.kubernetes.io/is-default-class"] == "true"


async def test_claim_is_provisioned_bound_mounted_and_outlives_its_pod(
    kube: Client, kubelet: KubeletControl, pods: Pods, namespace: str, kube_control_plane: ControlPlane
) -> None:
    await kube.create(CLAIMS, claim_body("data", namespace))
    pending = await kube.get(CLAIMS, "data", namespace)
    assert pending["spec"]["storageClassName"] == localpath.STORAGE_CLASS, "the default class is set"
    assert pending["status"]["phase"] == "Pending", "WaitForFirstConsumer: no volume before a pod"

    await pods.create(claim_pod("writer", "data", "echo $(POD_IP) > /data/first; exec sleep 3600"))
    writer = await pods.ready("writer", 90)
    node = writer["spec"]["nodeName"]
    pvc, pv = await bound(kube, namespace, "data")
    assert pvc["metadata"]["annotations"][SELECTED_NODE] == node, "the scheduler picked the node"
    assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes", "the PV controller"
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "rancher.io/local-path"
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == [node]
    host_dir = Path(pv["spec"]["hostPath"]["path"])
    assert host_dir.parent == localpath.volumes_dir(kube_control_plane.state_dir, node)
    assert host_mode(host_dir) == (0o777, 0, 0), "the setup script's mode: any user writes"
    assert read_text(host_dir / "first").split() == [writer["status"]["podIP"]], "the pod wrote on the volume"
    assert host_mode(host_dir / "first") == (0o644, 999, 999), "written by the pod's non-root user"
    assert "kubernetes.io/pvc-protection" in pvc["metadata"]["finalizers"], "claim protection"
    assert "kubernetes.io/pv-protection" in pv["metadata"]["finalizers"], "volume protection"
    with pytest.raises(ApiError) as refused:
        await kube.patch(
            CLAIMS, "data", {"spec": {"resources": {"requests": {"storage": "128Mi"}}}}, namespace
        )
    assert refused.value.status == 403, "the class does not allow expansion: the API server says so"
    assert "must support resize" in refused.value.message

    await kube.delete(Resource("", "v1", "pods", "Pod"), "writer", namespace, grace_period_seconds=0)
    await eventually(lambda: pods_gone(kube, namespace, "writer"), "writer gone", 60)
    await pods.create(claim_pod("reader", "data", "exec sleep 3600", read_only=True))
    reader = await pods.ready("reader", 90)
    assert reader["spec"]["nodeName"] == node, "the volume's node affinity brings the pod back to it"
    code, text = await read(kubelet, namespace, "reader", "cat", "/data/first")
    assert (code, text.split()) == (0, [writer["status"]["podIP"]]), "the file outlives the pod"
    code, _ = await read(kubelet, namespace, "reader", "touch", "/data/second")
    assert code != 0, "a readOnly mount refuses writes"
    assert host_mode(host_dir / "second") is None


async def pods_gone(kube: Client, namespace: str, name: str) -> bool:
    return await kube.get_or_none(Resource("", "v1", "pods", "Pod"), name, namespace) is None


async def test_volume_survives_a_reboot_and_is_lost_with_the_disk(
    kube: Client, kubelet: KubeletControl, pods: Pods, namespace: str
) -> None:
    node = "node-1"
    await kube.create(CLAIMS, claim_body("data", namespace))
    body = claim_pod("durable", "data", "exec sleep 3600", nodeSelector={"kubernetes.io/hostname": node})
    body["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
    body["spec"]["containers"][0]["volumeMounts"].append({"name": "scratch", "mountPath": "/scratch"})
    await pods.create(body)
    await pods.ready("durable", 90)
    _, pv = await bound(kube, namespace, "data")
    host_dir = Path(pv["spec"]["hostPath"]["path"])
    write = "echo before >> /data/history && echo before >> /scratch/history"
    assert (await read(kubelet, namespace, "durable", "sh", "-c", write))[0] == 0

    await kubelet.fail_node(node)
    await kubelet.recover_node(node)
    await back_after_node_failure(pods, "durable", 1)
    for path in ("/data/history", "/scratch/history"):
        code, text = await read(kubelet, namespace, "durable", "cat", path)
        assert (code, text) == (0, "before\n"), f"{path} survives a reboot"

    await kubelet.fail_node(node, lose_disk=True)
    assert host_mode(host_dir) is None, "the node's disk is gone with its volume directories"
    await kubelet.recover_node(node)
    await back_after_node_failure(pods, "durable", 2)
    code, text = await read(kubelet, namespace, "durable", "ls", "-A", "/data", "/scratch")
    assert (code, text.split()) == (0, ["/data:", "/scratch:"]), "the volume and the emptyDir come back empty"
    assert host_mode(host_dir) == (0o755, 0, 0), "recreated as the kubelet's hostPath does"
    code, _ = await read(kubelet, namespace, "durable", "touch", "/data/again")
    assert code != 0, "a non-root user cannot write the recreated directory, as on a node with a new disk"


async def test_a_pod_waits_for_its_claim_and_deleting_the_claim_deletes_the_volume(
    kube: Client, kubelet: KubeletControl, pods: Pods, namespace: str, kube_control_plane: ControlPlane
) -> None:
    node = "node-3"
    await kube.create(CLAIMS, claim_body("data", namespace))
    # Bound to the node by hand, past the scheduler: nothing selects a node for the claim yet.
    await pods.create(claim_pod("early", "data", "echo here > /data/mark; exec sleep 3600", nodeName=node))
    await pods.wait(
        "early",
        lambda p: 'persistentvolumeclaim "data" is not bound' in (p["status"].get("message") or ""),
        60,
        "the kubelet waiting for the claim",
    )
    # What the scheduler's VolumeBinding plugin does for a pod it schedules.
    await kube.patch(CLAIMS, "data", {"metadata": {"annotations": {SELECTED_NODE: node}}}, namespace)
    await pods.ready("early", 90)
    _, pv = await bound(kube, namespace, "data")
    host_dir = Path(pv["spec"]["hostPath"]["path"])
    assert host_dir.parent == localpath.volumes_dir(kube_control_plane.state_dir, node)
    assert read_text(host_dir / "mark") == "here\n"

    await kube.delete(CLAIMS, "data", namespace)
    in_use = await kube.get(CLAIMS, "data", namespace)
    assert in_use["metadata"].get("deletionTimestamp"), "deleting"
    assert "kubernetes.io/pvc-protection" in in_use["metadata"]["finalizers"], "kept while a pod uses it"
    assert host_mode(host_dir) is not None
    await kube.delete(Resource("", "v1", "pods", "Pod"), "early", namespace, grace_period_seconds=0)

    async def volume_deleted() -> bool | NotYet:
        left = await kube.get_or_none(VOLUMES, pv["metadata"]["name"])
        directory = host_mode(host_dir)
        if left is not None or directory is not None:
            return NotYet({"pv": left and left.get("status"), "directory": directory})
        return True

    await eventually(volume_deleted, "the PV and its directory deleted (reclaim Delete, teardown pod)", 90)
    assert await kube.get_or_none(CLAIMS, "data", namespace) is None


def make_dir(path: Path, content: str) -> None:
    """A root-owned 0755 directory holding one root-owned 0644 file, as an admin prepared it."""
    path.mkdir(parents=True)
    path.chmod(0o755)
    (path / "old").write_text(content)
    (path / "old").chmod(0o644)


async def test_a_static_local_volume_is_bound_and_given_the_pods_fsgroup(
    kube: Client, kubelet: KubeletControl, pods: Pods, namespace: str, kube_control_plane: ControlPlane
) -> None:
    """A hand-made `local` PV: the PV controller binds a class-less claim to it, and the kubelet gives
    the volume the pod's fsGroup (a real kubelet manages ownership of local volumes, not hostPath)."""
    node = "node-2"
    directory = localpath.node_dir(kube_control_plane.state_dir, node) / f"static-{namespace}"
    await asyncio.to_thread(make_dir, directory, "prepared\n")
    name = f"static-{namespace}"
    affinity = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "64Mi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "local": {"path": str(directory)},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [affinity]}]}},
        },
    }
    await kube.create(VOLUMES, volume)
    try:
        await kube.create(CLAIMS, claim_body("data", namespace, storageClassName="", volumeName=name))
        await pods.create(claim_pod("owner", "data", "echo new > /data/new; exec sleep 3600"))
        owner = await pods.ready("owner", 90)
        assert owner["spec"]["nodeName"] == node, "the local volume's node affinity places the pod"
        assert host_mode(directory) == (0o2775, 0, 999), "group-owned by fsGroup, setgid, group-writable"
        assert host_mode(directory / "old") == (0o664, 0, 999), "existing files join the group"
        assert host_mode(directory / "new") == (0o644, 999, 999), "the non-root pod wrote a new file"
        code, text = await read(kubelet, namespace, "owner", "cat", "/data/old")
        assert (code, text) == (0, "prepared\n")
    finally:
        await kube.delete(Resource("", "v1", "pods", "Pod"), "owner", namespace, grace_period_seconds=0)
        await eventually(lambda: pods_gone(kube, namespace, "owner"), "owner gone", 60)
        await kube.delete(CLAIMS, "data", namespace)
        await kube.delete(VOLUMES, name)
        await asyncio.to_thread(shutil.rmtree, directory, True)
