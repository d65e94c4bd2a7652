"""Real OCI images on the test bed: the kubelet runs them with runc, enforcing the securityContext.

The operator image is the one `python -m valkey_testbed build` built
from the Containerfile. What the runtime enforces is read from the container's
main process (/proc status, namespaces) and tried (writes, a root user), not
taken from the pod spec.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from kubelet_support import Pods, container_status, pod_body, proc
from oci_support import write_archive

from valkey_operator.core.resource import CONFIG_MAPS, SECRETS
from valkey_testbed import images, ocistore, operatorimage
from valkey_testbed.kubelet import KubeletControl

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

Obj = dict[str, Any]
OPERATOR = operatorimage.default_reference(Path(__file__).resolve().parents[3])
RESTRICTED = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


@pytest.fixture(scope="module", autouse=True)
def operator_image_loaded() -> None:
    """The operator image must be built and loaded (`python -m valkey_testbed build`)."""
    entry = images.resolve_image(OPERATOR)
    assert entry is not None and entry.oci is not None, f"{OPERATOR} is not in the local OCI store"


def status_fields(pid: int) -> dict[str, str]:
    status = proc(pid, "status").decode()
    return {key: value.strip() for key, value in (line.split(":", 1) for line in status.splitlines())}


def sleeper(**security: Any) -> Obj:
    return {
        "image": OPERATOR,
        "command": ["sh", "-c", "echo started; exec sleep 3600"],
        "securityContext": {**RESTRICTED, **security},
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    }


async def test_restricted_operator_image_runs_as_its_uid_on_a_read_only_root(
    pods: Pods, kubelet: KubeletControl, namespace: str
) -> None:
    await pods.create(pod_body("restricted", sleeper(), volumes=[{"name": "scratch", "emptyDir": {}}]))
    pod = await pods.ready("restricted")
    pid = await pods.pid("restricted")
    fields = status_fields(pid)
    assert fields["Uid"].split() == ["65532"] * 4, "the image's USER, with no runAsUser in the pod"
    assert fields["Gid"].split() == ["65532"] * 4
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2", "RuntimeDefault is a seccomp filter"
    assert int(fields["CapBnd"], 16) == 0 and int(fields["CapEff"], 16) == 0, "drop ALL"
    assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid"), "own pid namespace"
    assert os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net"), "host network"
    status = container_status(pod)
    assert status["containerID"].startswith("runc://")
    entry = images.resolve_image(OPERATOR)
    assert entry is not None and entry.oci is not None
    assert status["imageID"] == f"valkey-operator@{entry.oci.digest}"

    write_root = await kubelet.exec(namespace, "restricted", "main", ["sh", "-c", "echo x > /x"])
    assert write_root.exit_code != 0
    assert b"Read-only file system" in write_root.output
    write_volume = await kubelet.exec(
        namespace, "restricted", "main", ["sh", "-c", "echo x > /scratch/x && id -u"]
    )
    assert (write_volume.exit_code, write_volume.output.strip()) == (0, b"65532"), "volumes stay writable"
    refused = await kubelet.exec(namespace, "restricted", "main", ["unshare", "--user", "true"])
    assert refused.exit_code != 0, "unshare is refused by the RuntimeDefault profile"

    started = time.monotonic()
    help_run = await kubelet.exec(namespace, "restricted", "main", ["valkey-operator", "--help"])
    elapsed = time.monotonic() - started
    assert help_run.exit_code == 0 and b"usage: valkey-operator" in help_run.output
    assert elapsed < 10, f"valkey-operator --help took {elapsed:.1f}s in the container"


async def test_a_writable_root_keeps_writes_in_the_container_not_the_image(
    pods: Pods, kubelet: KubeletControl, namespace: str
) -> None:
    await pods.create(
        pod_body(
            "writable",
            sleeper(readOnlyRootFilesystem=False),
            volumes=[{"name": "scratch", "emptyDir": {}}],
        )
    )
    await pods.ready("writable")
    wrote = await kubelet.exec(
        namespace, "writable", "main", ["sh", "-c", "echo x > /tmp/marker; cat /tmp/marker"]
    )
    assert (wrote.exit_code, wrote.output.strip()) == (0, b"x")
    entry = images.resolve_image(OPERATOR)
    assert entry is not None and entry.oci is not None
    assert not (entry.oci.rootfs / "tmp" / "marker").exists(), "the image's root filesystem is untouched"


async def test_an_image_running_as_root_is_refused_under_run_as_non_root(pods: Pods, tmp_path: Path) -> None:
    # An image whose config names no USER: it runs as root.
    archive = tmp_path / "root-user.oci.tar"
    write_archive(archive, [{"etc": None}], {"Entrypoint": ["/bin/true"]})
    reference = "testbed.local/root-user:1"
    ocistore.load(archive, [reference], lambda _: None, prefix=images.image_prefix())
    await pods.create(pod_body("rooted", {"image": reference, "securityContext": {"runAsNonRoot": True}}))
    message = await pods.waiting_message("rooted", "CreateContainerConfigError")
    assert "container has runAsNonRoot and image will run as root" in message


async def test_the_operator_image_runs_under_an_arbitrary_uid_in_group_0(
    pods: Pods, kubelet: KubeletControl, namespace: str
) -> None:
    """What OpenShift's restricted SCC does: a uid from the namespace's range, group 0."""
    arbitrary = {"runAsUser": 1000770000, "runAsGroup": 0}
    await pods.create(
        pod_body("openshift-like", sleeper(**arbitrary), volumes=[{"name": "scratch", "emptyDir": {}}])
    )
    await pods.ready("openshift-like")
    assert status_fields(await pods.pid("openshift-like"))["Uid"].split() == ["1000770000"] * 4
    ran = await kubelet.exec(namespace, "openshift-like", "main", ["valkey-operator", "--help"])
    assert ran.exit_code == 0 and b"usage: valkey-operator" in ran.output, ran


async def test_a_secret_mounted_inside_a_read_only_configmap_mount_runs_under_runc(
    pods: Pods, kubelet: KubeletControl, namespace: str
) -> None:
    """runc makes mounts in order: the nested mount point must exist before /config is read-only."""
    await pods.kube.create(
        CONFIG_MAPS, {"metadata": {"name": "conf", "namespace": namespace}, "data": {"a.conf": "a\n"}}
    )
    await pods.kube.create(
        SECRETS, {"metadata": {"name": "users", "namespace": namespace}, "stringData": {"users.acl": "u\n"}}
    )
    container = sleeper()
    container["volumeMounts"] = [
        *container["volumeMounts"],
        {"name": "conf", "mountPath": "/config", "readOnly": True},
        {"name": "users", "mountPath": "/config/users", "readOnly": True},
    ]
    volumes = [
        {"name": "scratch", "emptyDir": {}},
        {"name": "conf", "configMap": {"name": "conf"}},
        {"name": "users", "secret": {"secretName": "users"}},
    ]
    await pods.create(pod_body("nested", container, volumes=volumes))
    await pods.ready("nested")
    read = await kubelet.exec(
        namespace, "nested", "main", ["cat", "/config/a.conf", "/config/users/users.acl"]
    )
    assert (read.exit_code, read.output) == (0, b"a\nu\n")
