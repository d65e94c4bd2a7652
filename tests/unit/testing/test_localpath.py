"""The local-path-provisioner's setup (localpath.py): what `up` creates, checked without a server."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from valkey_testbed import images, localpath


def by_kind(objects: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(obj["kind"]): obj for obj in objects}


def test_each_node_gets_its_own_directory_under_its_node_dir(tmp_path: Path) -> None:
    objects = by_kind(localpath.manifests(tmp_path, ["node-1", "node-2"]))
    data = objects["ConfigMap"]["data"]
    assert isinstance(data, dict)
    config = json.loads(data["config.json"])
    assert config["nodePathMap"] == [
        {"node": "node-1", "paths": [str(tmp_path / "nodes" / "node-1" / "local-path")]},
        {"node": "node-2", "paths": [str(tmp_path / "nodes" / "node-2" / "local-path")]},
    ]
    assert localpath.volumes_dir(tmp_path, "node-2").parent == localpath.node_dir(tmp_path, "node-2")
    assert 'mkdir -m 0777 -p "$VOL_DIR"' in data["setup"]
    assert 'rm -rf "$VOL_DIR"' in data["teardown"]


def test_helper_pods_run_a_catalog_image_as_root(tmp_path: Path) -> None:
    data = by_kind(localpath.manifests(tmp_path, ["node-1"]))["ConfigMap"]["data"]
    assert isinstance(data, dict)
    pod = yaml.safe_load(data["helperPod.yaml"])
    image = pod["spec"]["containers"][0]["image"]
    entry = images.catalog(tmp_path).get(image)
    assert entry is not None and (entry.user, entry.group) == (0, 0)


def test_the_storage_class_is_the_default_local_path_class(tmp_path: Path) -> None:
    storage_class = by_kind(localpath.manifests(tmp_path, ["node-1"]))["StorageClass"]
    assert storage_class["provisioner"] == localpath.PROVISIONER == "rancher.io/local-path"
    assert storage_class["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class["reclaimPolicy"] == "Delete"
    metadata = storage_class["metadata"]
    assert isinstance(metadata, dict)
    assert metadata["name"] == localpath.STORAGE_CLASS == "local-path"
    assert metadata["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}


def test_objects_are_created_in_their_collections(tmp_path: Path) -> None:
    paths = [localpath.api_path(obj) for obj in localpath.manifests(tmp_path, ["node-1"])]
    assert paths == [
        "/api/v1/namespaces",
        "/api/v1/namespaces/local-path-storage/serviceaccounts",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/local-path-storage/roles",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/local-path-storage/rolebindings",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/api/v1/namespaces/local-path-storage/configmaps",
    ]
