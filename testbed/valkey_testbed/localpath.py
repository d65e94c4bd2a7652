"""Real storage for the test bed: rancher's local-path-provisioner, run out of cluster.

kind ships this provisioner as its default StorageClass; here it is built from
its Go module (build.py) and started with the control plane like the other
components: its own kubeconfig (a token of its ServiceAccount, from a
TokenRequest, so the upstream RBAC is what authorizes it, as in cluster), its
ConfigMap (config.json with each test-bed node's own directory, helperPod.yaml,
the setup and teardown scripts), and the StorageClass `local-path`, default,
WaitForFirstConsumer, reclaim Delete.

The real PV controller of kube-controller-manager binds claims, the
scheduler's VolumeBinding plugin picks the node, the provisioner creates
the PersistentVolume (hostPath, DirectoryOrCreate, node affinity) after its
helper pod made the directory on that node, and the test-bed kubelet runs
that helper pod (image images.STORAGE_HELPER_IMAGE: the host's sh, mkdir and rm as root)
and mounts the volume. A PV deleted (reclaim Delete) has its directory
removed by the teardown helper pod. The provisioner has no listener.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from valkey_testbed import images, processes, versions
from valkey_testbed.build import Binaries, Progress, run_step

Obj = dict[str, Any]

BINARY = "local-path-provisioner"
PROVISIONER = "rancher.io/local-path"
STORAGE_CLASS = "local-path"
NAMESPACE = "local-path-storage"
SERVICE_ACCOUNT = "local-path-provisioner-service-account"
CONFIG_MAP = "local-path-config"
CMD_TIMEOUT_SECONDS = 120


def build_provisioner(work: Path, output: Path, progress: Progress) -> None:
    """Build the provisioner's main package from a module requiring it (like helm: a tools file)."""
    module = "github.com/rancher/local-path-provisioner"
    (work / "go.mod").write_text(
        f"module valkeyoperator.local/local-path-provisioner\n\ngo 1.26\n\n"
        f"require {module} {versions.LOCAL_PATH_PROVISIONER}\n"
    )
    (work / "tools.go").write_text(f'//go:build tools\n\npackage tools\n\nimport _ "{module}"\n')
    run_step(["go", "mod", "tidy"], work, progress)
    ldflags = f"-s -w -X main.VERSION={versions.LOCAL_PATH_PROVISIONER}"
    run_step(["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(output), module], work, progress)


def node_dir(state_dir: Path, node: str) -> Path:
    """A test-bed node's own directory: what survives its reboot, and is lost with its disk."""
    return state_dir / "nodes" / node


def volumes_dir(state_dir: Path, node: str) -> Path:
    """Where the provisioner makes the node's volumes (config.json's nodePathMap)."""
    return node_dir(state_dir, node) / "local-path"


def config_json(state_dir: Path, nodes: Sequence[str]) -> str:
    node_paths = [{"node": node, "paths": [str(volumes_dir(state_dir, node))]} for node in nodes]
    return json.dumps({"cmdTimeoutSeconds": CMD_TIMEOUT_SECONDS, "nodePathMap": node_paths}, indent=2)


def helper_pod_yaml() -> str:
    """Upstream's helperPod.yaml with the test bed's helper image."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "priorityClassName": "system-node-critical",
            "tolerations": [
                {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [
                {
                    "name": "helper-pod",
                    "image": images.STORAGE_HELPER_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
        },
    }
    return yaml.safe_dump(pod, sort_keys=False)


SETUP = '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n'
TEARDOWN = '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n'


def manifests(state_dir: Path, nodes: Sequence[str]) -> list[Obj]:
    """Upstream's deploy/local-path-storage.yaml minus the Deployment (the process runs out of
    cluster), with the test bed's paths and helper image, and the StorageClass marked default."""
    sa_subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
    role = "local-path-provisioner-role"
    bind = "local-path-provisioner-bind"
    rbac = "rbac.authorization.k8s.io/v1"
    read = ["get", "list", "watch"]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": role, "namespace": NAMESPACE},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": [*read, "create", "patch", "update", "delete"],
                }
            ],
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"],
                    "verbs": read,
                },
                {
                    "apiGroups": [""],
                    "resources": ["persistentvolumes"],
                    "verbs": [*read, "create", "patch", "update", "delete"],
                },
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
                {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": read},
            ],
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": bind, "namespace": NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": sa_subject,
        },
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": bind},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": sa_subject,
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE},
            "data": {
                "config.json": config_json(state_dir, nodes),
                "setup": SETUP,
                "teardown": TEARDOWN,
                "helperPod.yaml": helper_pod_yaml(),
            },
        },
    ]


def api_path(obj: Obj) -> str:
    """The collection an object is created in."""
    group_version = obj["apiVersion"]
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    plural = {
        "Namespace": "namespaces",
        "ServiceAccount": "serviceaccounts",
        "Role": "roles",
        "ClusterRole": "clusterroles",
        "RoleBinding": "rolebindings",
        "ClusterRoleBinding": "clusterrolebindings",
        "StorageClass": "storageclasses",
        "ConfigMap": "configmaps",
    }[obj["kind"]]
    namespace = obj["metadata"].get("namespace")
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"


TOKEN_SECONDS = 365 * 24 * 3600
"""The provisioner's token outlives any test bed."""


def token_request() -> tuple[str, Obj]:
    """Path and body of the TokenRequest for the provisioner's ServiceAccount token."""
    path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token"
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    }
    return path, body


def write_kubeconfig(path: Path, server: str, ca_cert: Path, token: str) -> None:
    """A kubeconfig with the provisioner's ServiceAccount token: the upstream RBAC authorizes it."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "testbed", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": SERVICE_ACCOUNT}}],
        "current-context": "testbed",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def start(bins: Binaries, kubeconfig: Path, log_file: Path) -> processes.ProcessRecord:
    """Run the provisioner out of cluster; it reads config.json and helperPod.yaml from its ConfigMap.

    No in-cluster variables in its environment: its helper-pod log copy (which only works in
    cluster) fails fast and is logged, as upstream does out of cluster.
    """
    env = {"PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)}
    argv: list[str | os.PathLike[str]] = [
        bins.local_path_provisioner,
        "start",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={NAMESPACE}",
        f"--configmap-name={CONFIG_MAP}",
        f"--service-account-name={SERVICE_ACCOUNT}",
        f"--helper-image={images.STORAGE_HELPER_IMAGE}",
        f"--provisioner-name={PROVISIONER}",
    ]
    return processes.start(BINARY, argv, log_file, env=env)
