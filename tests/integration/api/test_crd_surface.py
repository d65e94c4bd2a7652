"""What users see of the five kinds through kubectl and the API: printer columns, status subresource, explain.

Runs the test bed's real kubectl against the real API server. Cluster-scoped
objects carry the test's namespace in their names and are deleted afterwards.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from valkey_operator.api.resources import (
    API_VERSION,
    GROUP,
    VALKEY_BACKUPS,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
    VERSION,
    VERSION_FLOOR_TEXT,
)
from valkey_operator.core.client import Client
from valkey_operator.core.resource import CUSTOM_RESOURCE_DEFINITIONS, Resource
from valkey_operator.core.rest import ApiError, Obj
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.wait import NotYet, eventually

# Writes and reads the status of cluster-scoped objects by hand, so no operator of another module
# may reconcile them meanwhile: the module runs on a control plane of its own (lone_plane).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def kubeconfig_path(lone_plane: ControlPlane) -> Path:
    """The test bed's fixtures (kube_api, kube, namespace, kubectl) on this module's own plane."""
    return lone_plane.kubeconfig


ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs" / "reference"
NOW = "2026-01-01T00:00:00Z"


def image(name: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyImage",
        "metadata": {"name": name},
        "spec": {"repository": "valkey/valkey", "tag": "9.0.1", "version": "9.0.1"},
    }


def config(name: str, **spec: Any) -> Obj:
    return {"apiVersion": API_VERSION, "kind": "ValkeyConfig", "metadata": {"name": name}, "spec": spec}


def role(name: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyRole",
        "metadata": {"name": name},
        "spec": {"categories": [{"name": "read"}, {"name": "dangerous", "access": "deny"}]},
    }


def cluster(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"configRef": "standard", "shards": 4, "replicasPerShard": 2},
    }


def condition(type_: str, status: str, reason: str, message: str = "") -> Obj:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": NOW}


def table(output: str) -> list[dict[str, str]]:
    """Rows of `kubectl get` output, cut at the header's column starts (cells may contain spaces)."""
    header, *rows = output.rstrip("\n").split("\n")
    starts = [match.start() for match in re.finditer(r"\S+", header)]
    names = header.split()
    ends = [*starts[1:], None]
    return [
        {name: row[start:end].strip() for name, start, end in zip(names, starts, ends, strict=True)}
        for row in rows
    ]


async def get_table(kubectl: Any, *args: str) -> tuple[list[str], list[dict[str, str]]]:
    code, out, err = await kubectl("get", *args)
    assert code == 0, err
    return out.split("\n", 1)[0].split(), table(out)


# ---- printer columns ---------------------------------------------------------------------------------
async def test_image_printer_columns(api: Client, kubectl: Any, created: Any, namespace: str) -> None:
    name = f"valkey-9-0-{namespace}"
    await created.create(VALKEY_IMAGES, image(name))
    header, rows = await get_table(kubectl, "vkimg", name)  # the short name
    assert header == ["NAME", "REPOSITORY", "TAG", "VERSION", "AGE"]
    assert len(rows) == 1
    row = rows[0]
    assert (row["NAME"], row["REPOSITORY"], row["TAG"], row["VERSION"]) == (
        name,
        "valkey/valkey",
        "9.0.1",
        "9.0.1",
    )
    assert re.fullmatch(r"\d+s", row["AGE"]), row


async def test_config_printer_columns(api: Client, kubectl: Any, created: Any, namespace: str) -> None:
    base, child = f"base-{namespace}", f"child-{namespace}"
    await created.create(VALKEY_CONFIGS, config(base, imageRef=f"valkey-9-0-{namespace}"))
    await created.create(VALKEY_CONFIGS, config(child, baseRef=base))
    await api.patch_status(
        VALKEY_CONFIGS,
        child,
        {
            "status": {
                "resolvedImage": {
                    "name": f"valkey-9-0-{namespace}",
                    "repository": "valkey/valkey",
                    "tag": "9.0.1",
                    "version": "9.0.1",
                },
                "conditions": [condition("Resolved", "True", "Resolved")],
            }
        },
    )
    header, rows = await get_table(kubectl, "valkeyconfigs", base, child)
    assert header == ["NAME", "IMAGE", "BASE", "RESOLVED", "AGE"]
    by_name = {row["NAME"]: row for row in rows}
    assert (by_name[child]["IMAGE"], by_name[child]["BASE"], by_name[child]["RESOLVED"]) == (
        f"valkey-9-0-{namespace}",
        base,
        "True",
    )
    # No status yet (no operator here) and no base: the columns are empty, not made up.
    assert (by_name[base]["IMAGE"], by_name[base]["BASE"], by_name[base]["RESOLVED"]) == ("", "", "")
    await api.patch_status(
        VALKEY_CONFIGS,
        base,
        {"status": {"conditions": [condition("Resolved", "False", "ImageNotFound", "no such image")]}},
    )
    _, rows = await get_table(kubectl, "vkcfg", base)
    assert rows[0]["RESOLVED"] == "False"


async def test_role_printer_columns(api: Client, kubectl: Any, created: Any, namespace: str) -> None:
    name = f"reader-{namespace}"
    await created.create(VALKEY_ROLES, role(name))
    await api.patch_status(
        VALKEY_ROLES, name, {"status": {"summary": "+@read -@dangerous", "observedGeneration": 1}}
    )
    header, rows = await get_table(kubectl, "vkrole", name)
    assert header == ["NAME", "CATEGORIES", "AGE"]
    assert (rows[0]["NAME"], rows[0]["CATEGORIES"]) == (name, "+@read -@dangerous")


async def test_cluster_printer_columns_short_name_and_category(
    api: Client, kubectl: Any, namespace: str
) -> None:
    await api.create(VALKEY_CLUSTERS, cluster("cache", namespace))
    status = {
        "state": "Active",
        "ready": "12/12",
        "endpoint": "e:6379",
        "currentImage": "v:1",
        "message": "ok",
    }
    await api.patch_status(VALKEY_CLUSTERS, "cache", {"status": status}, namespace)
    for kind in ("valkeyclusters", "valkeycluster", "vkc"):
        header, rows = await get_table(kubectl, kind, "-n", namespace)
        assert header == ["NAME", "STATE", "READY", "SHARDS", "REPLICAS", "CONFIG", "AGE"]
        assert len(rows) == 1
        row = rows[0]
        assert (row["NAME"], row["STATE"], row["READY"], row["SHARDS"], row["REPLICAS"], row["CONFIG"]) == (
            "cache",
            "Active",
            "12/12",
            "4",
            "2",
            "standard",
        )
    header, rows = await get_table(kubectl, "vkc", "-n", namespace, "-o", "wide")
    assert header[-3:] == ["ENDPOINT", "IMAGE", "MESSAGE"]
    assert (rows[0]["ENDPOINT"], rows[0]["IMAGE"], rows[0]["MESSAGE"]) == ("e:6379", "v:1", "ok")
    code, out, err = await kubectl("get", "valkey", "-n", namespace, "-o", "name")
    assert code == 0, err
    assert f"valkeycluster.{GROUP}/cache" in out.split()


def backup(name: str, namespace: str, cluster_name: str = "cache") -> Obj:
    destination = {"endpoint": "http://127.0.0.1:9000", "bucket": "backups", "credentialsSecretName": "s3"}
    return {
        "apiVersion": API_VERSION,
        "kind": "ValkeyBackup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterName": cluster_name, "destination": destination},
    }


async def test_backup_printer_columns_short_name_and_category(
    api: Client, kubectl: Any, namespace: str
) -> None:
    await api.create(VALKEY_BACKUPS, backup("nightly", namespace))
    await api.create(VALKEY_BACKUPS, backup("fresh", namespace, cluster_name="other"))
    status = {"phase": "Completed", "size": "1.2 GiB", "totalBytes": 1288490189}
    await api.patch_status(VALKEY_BACKUPS, "nightly", {"status": status}, namespace)
    for kind in ("valkeybackups", "valkeybackup", "vkbackup"):
        header, rows = await get_table(kubectl, kind, "-n", namespace)
        assert header == ["NAME", "CLUSTER", "PHASE", "SIZE", "AGE"]
        by_name = {row["NAME"]: row for row in rows}
        assert (by_name["nightly"]["CLUSTER"], by_name["nightly"]["PHASE"], by_name["nightly"]["SIZE"]) == (
            "cache",
            "Completed",
            "1.2 GiB",
        )
        # No status yet (no backup controller here): the columns are empty, not made up.
        assert (by_name["fresh"]["CLUSTER"], by_name["fresh"]["PHASE"], by_name["fresh"]["SIZE"]) == (
            "other",
            "",
            "",
        )
    code, out, err = await kubectl("get", "valkey", "-n", namespace, "-o", "name")
    assert code == 0, err
    assert f"valkeybackup.{GROUP}/nightly" in out.split()


# ---- status subresource -------------------------------------------------------------------------------
async def test_every_kind_has_a_status_subresource(api: Client) -> None:
    for resource in (VALKEY_IMAGES, VALKEY_CONFIGS, VALKEY_ROLES, VALKEY_CLUSTERS, VALKEY_BACKUPS):
        crd = await api.get(CUSTOM_RESOURCE_DEFINITIONS, f"{resource.plural}.{GROUP}")
        (version,) = crd["spec"]["versions"]
        assert version["name"] == VERSION and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}, resource


async def assert_status_semantics(
    api: Client, resource: Resource, name: str, namespace: str | None, status: Obj, spec_change: Obj
) -> None:
    """/status writes status (not spec, not generation); the main resource writes spec (not status)."""
    before = await api.get(resource, name, namespace)
    written = await api.patch_status(resource, name, {"status": status, "spec": spec_change}, namespace)
    assert written.get("status", {}) == status
    assert written["spec"] == before["spec"], "spec changed through /status"
    assert written["metadata"]["generation"] == before["metadata"]["generation"]
    assert (await api.get(resource, name, namespace)).get("status", {}) == status

    ignored = {key: (value + 1 if isinstance(value, int) else "changed") for key, value in status.items()}
    updated = await api.patch(
        resource, name, {"status": ignored or {"bogus": "x"}, "spec": spec_change}, namespace
    )
    assert updated.get("status", {}) == status, "status changed through the main resource"
    assert updated["metadata"]["generation"] == before["metadata"]["generation"] + 1
    for key, value in spec_change.items():
        assert updated["spec"][key] == value


async def test_status_subresource_semantics(api: Client, created: Any, namespace: str) -> None:
    image_name = f"img-{namespace}"
    await created.create(VALKEY_IMAGES, image(image_name))
    await assert_status_semantics(api, VALKEY_IMAGES, image_name, None, {}, {"tag": "9.0.1-alpine"})

    config_name = f"cfg-{namespace}"
    await created.create(VALKEY_CONFIGS, config(config_name, imageRef=image_name))
    await assert_status_semantics(
        api,
        VALKEY_CONFIGS,
        config_name,
        None,
        {"observedGeneration": 1, "settingsHash": "abc123"},
        {"baseRef": "other"},
    )

    role_name = f"role-{namespace}"
    await created.create(VALKEY_ROLES, role(role_name))
    await assert_status_semantics(
        api,
        VALKEY_ROLES,
        role_name,
        None,
        {"summary": "+@read", "observedGeneration": 1},
        {"categories": [{"name": "write", "access": "allow"}]},
    )

    await api.create(VALKEY_CLUSTERS, cluster("cache", namespace))
    await assert_status_semantics(
        api,
        VALKEY_CLUSTERS,
        "cache",
        namespace,
        {"message": "creating pods", "readyNodes": 0, "observedGeneration": 1},
        {"shards": 5},
    )


async def test_image_status_defines_no_fields(api: Client, created: Any, namespace: str) -> None:
    name = f"img-{namespace}"
    await created.create(VALKEY_IMAGES, image(name))
    written = await api.patch_status(VALKEY_IMAGES, name, {"status": {"anything": "at all"}})
    assert written.get("status", {}) == {}, "unknown status fields are pruned"
    assert (await api.get(VALKEY_IMAGES, name)).get("status", {}) == {}


async def test_status_is_validated_too(api: Client, namespace: str) -> None:
    await api.create(VALKEY_CLUSTERS, cluster("cache", namespace))
    with pytest.raises(ApiError) as error:
        await api.patch_status(VALKEY_CLUSTERS, "cache", {"status": {"state": "Exploded"}}, namespace)
    assert error.value.status == 422
    assert 'status.state: Unsupported value: "Exploded"' in error.value.message
    status = {
        "state": "Active",
        "message": "all slots covered",
        "endpoint": f"cache.{namespace}.svc.cluster.local:6379",
        "observedGeneration": 1,
        "shards": 4,
        "readyShards": 4,
        "readyNodes": 12,
        "currentImage": "valkey/valkey:9.0.1",
        "configHash": "0123abcd",
        "nodes": [
            {
                "pod": "cache-0-abcde",
                "shard": 0,
                "role": "primary",
                "nodeId": "f" * 40,
                "ip": "10.0.0.1",
                "version": "9.0.1",
                "slots": "0-4095",
            }
        ],
        "conditions": [condition("Ready", "True", "AllSlotsCovered")],
    }
    written = await api.patch_status(VALKEY_CLUSTERS, "cache", {"status": status}, namespace)
    assert written["status"] == status


# ---- kubectl explain ------------------------------------------------------------------------------------
async def explain(kubectl: Any, path: str, expected: str) -> str:
    """kubectl explain, retried while the API server publishes the CRD's OpenAPI (a second or two)."""

    async def explained() -> str | NotYet:
        code, out, err = await kubectl("explain", path)
        return out if code == 0 and expected in " ".join(out.split()) else NotYet(f"exit {code}: {out}{err}")

    found: str = await eventually(
        explained, f"`kubectl explain {path}` to say {expected!r}", 30, interval=0.5
    )
    return found


async def test_kubectl_explain_teaches_the_api(api: Client, kubectl: Any) -> None:
    out = await explain(kubectl, "valkeycluster.spec.acl", "Valkey ACL users, unique by username")
    assert "FIELD: acl <[]Object>" in out
    for field_name in ("username", "passwordHashes", "permissions"):
        assert re.search(rf"^\s+{field_name}\s+<", out, re.MULTILINE), out
    await explain(kubectl, "valkeyimage.spec.version", f"at least {VERSION_FLOOR_TEXT}")
    out = await explain(kubectl, "valkeyimage.spec", "names a container image")
    for field_name in ("repository", "tag", "version"):
        assert re.search(rf"^\s+{field_name}\s+<string> -required-", out, re.MULTILINE), out
    out = await explain(kubectl, "valkeyconfig.spec.valkey", "matched case-insensitively")
    out = await explain(kubectl, "valkeyrole.spec.categories.name", "ACL category without the '@'")
    out = await explain(kubectl, "valkeycluster.spec.tls", "Cannot be added or removed after creation")
    assert "secretRef" in out
    out = await explain(kubectl, "valkeybackup.spec", "Immutable after creation")
    for field_name in ("clusterName", "destination"):
        assert re.search(rf"^\s+{field_name}\s+<\w+> -required-", out, re.MULTILINE), out
    out = await explain(
        kubectl, "valkeybackup.status.shards", "PerShard backups snapshot the shards one after"
    )
    for field_name in ("index", "slots", "sourcePod", "sourceRole", "objectKey", "bytes", "keys", "sha256"):
        assert re.search(rf"^\s+{field_name}\s+<", out, re.MULTILINE), out
    await explain(kubectl, "valkeycluster.spec.restore", "created at the backup's shard count")
    await explain(kubectl, "valkeycluster.spec.backup.keep", "How many completed scheduled backups to keep")


# ---- the reference docs' examples are valid objects -----------------------------------------------------
@pytest.mark.parametrize(
    "page", ["valkeyimage.md", "valkeyconfig.md", "valkeyrole.md", "valkeycluster.md", "valkeybackup.md"]
)
async def test_reference_examples_are_accepted(api: Client, kubectl: Any, namespace: str, page: str) -> None:
    text = (DOCS / page).read_text()
    examples = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    assert examples, f"{page} has no yaml example"
    for example in examples:
        code, out, err = await kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=example)
        assert code == 0, f"{page}: {err}\n{example}"
        assert "(server dry run)" in out
