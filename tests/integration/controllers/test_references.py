"""Image, config and role reconcilers on the real API server: protection and resolution."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
import pytest_asyncio
from cluster_scoped import ClusterScoped
from inprocess_operator import Operator
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config

from valkey_operator.api.resources import (
    CONFIG_PROTECTION_FINALIZER,
    IMAGE_PROTECTION_FINALIZER,
    ROLE_PROTECTION_FINALIZER,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
    VALKEY_ROLES,
)
from valkey_operator.core.client import Client, retry_on_conflict
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import NAMESPACES, Resource
from valkey_operator.core.rest import Obj, RestClient
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.crds import install_crds
from valkey_testbed.wait import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.usefixtures("valkey_crds")]


ONE_WORKER = {"image": 1, "config": 1, "role": 1}
"""One worker per controller: its queue is then processed strictly in order (see `drained`)."""


@pytest_asyncio.fixture
async def operator(kube_api: k8s.ApiClient, namespace: str) -> AsyncIterator[Operator]:
    running = Operator(kube_api, namespace, workers=ONE_WORKER)
    await running.start()
    yield running
    await running.stop()


class Names(ClusterScoped):
    """Cluster-scoped objects named uniquely per test, all cleaned up afterwards."""

    async def image(self, name: str, version: str = "9.1.2") -> Obj:
        body = {
            "metadata": {"name": self(name)},
            "spec": {"repository": "valkey/valkey", "tag": version, "version": version},
        }
        return await self.create(VALKEY_IMAGES, body)

    async def config(self, name: str, **spec: Any) -> Obj:
        for ref in ("imageRef", "baseRef"):
            if ref in spec:
                spec[ref] = self(spec[ref])
        return await self.create(VALKEY_CONFIGS, {"metadata": {"name": self(name)}, "spec": spec})

    async def role(self, name: str) -> Obj:
        spec = {"categories": [{"name": "read", "access": "allow"}, {"name": "dangerous", "access": "deny"}]}
        return await self.create(VALKEY_ROLES, {"metadata": {"name": self(name)}, "spec": spec})


@pytest_asyncio.fixture
async def names(kube: Client, namespace: str) -> AsyncIterator[Names]:
    created = Names(kube, namespace[-6:])
    yield created
    await created.cleanup()


def cluster(name: str, namespace: str, config: str, roles: tuple[str, ...] = ()) -> Obj:
    acl = [
        {
            "username": f"user{i}",
            "passwordHashes": ["a" * 64],
            "permissions": [{"roleRef": role, "keys": [{"pattern": "*", "access": "readwrite"}]}],
        }
        for i, role in enumerate(roles)
    ]
    spec: Obj = {"configRef": config, "shards": 1, "replicasPerShard": 0}
    if acl:
        spec["acl"] = acl
    return {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def finalizers(kube: Client, resource: Resource, name: str) -> list[str] | None:
    """The object's finalizers, or None once it is gone."""
    current = await kube.get_or_none(resource, name)
    return None if current is None else current["metadata"].get("finalizers", [])


async def has(kube: Client, resource: Resource, name: str, finalizer: str) -> bool:
    return finalizer in (await finalizers(kube, resource, name) or [])


async def gone(kube: Client, resource: Resource, name: str) -> bool:
    return await kube.get_or_none(resource, name) is None


async def resolved(kube: Client, name: str) -> dict[str, Any] | None:
    config = await kube.get(VALKEY_CONFIGS, name)
    return find_condition(config.get("status", {}).get("conditions"), "Resolved")


async def resolution_is(kube: Client, name: str, reason: str) -> bool:
    condition = await resolved(kube, name)
    return condition is not None and condition["reason"] == reason


_MARKERS = itertools.count()


async def drained(kube: Client, names: Names, resource: Resource) -> None:
    """The positive signal to wait for before asserting what the reconciler of `resource` did NOT do.

    Each controller runs one worker (ONE_WORKER) over a FIFO queue, so a fresh object reconciled
    after an event on the same watch means every request queued by that event was processed first;
    a request being processed just then is queued once more behind it, so this is done twice, the
    second marker created only after the first was reconciled.
    """
    for _ in range(2):
        await _marker_reconciled(kube, names, resource, names(f"marker{next(_MARKERS)}"))


async def _marker_reconciled(kube: Client, names: Names, resource: Resource, marker: str) -> None:
    """A fresh object of resource, reconciled by a pass queued by an event on resource's own watch."""
    if resource is VALKEY_IMAGES:  # protected once a config names it: that config first
        await names.create(VALKEY_CONFIGS, {"metadata": {"name": marker}, "spec": {"imageRef": marker}})
        await eventually(lambda: resolution_is(kube, marker, "ImageNotFound"), f"{marker} config")
        body = {"repository": "valkey/valkey", "tag": "9.1.2", "version": "9.1.2"}
        await names.create(VALKEY_IMAGES, {"metadata": {"name": marker}, "spec": body})
        await eventually(lambda: has(kube, VALKEY_IMAGES, marker, IMAGE_PROTECTION_FINALIZER), marker)
    elif resource is VALKEY_CONFIGS:  # its status says why it does not resolve
        await names.create(VALKEY_CONFIGS, {"metadata": {"name": marker}, "spec": {"imageRef": marker}})
        await eventually(lambda: resolution_is(kube, marker, "ImageNotFound"), marker)
    else:  # a role's status carries its summary
        spec = {"categories": [{"name": "read", "access": "allow"}]}
        await names.create(VALKEY_ROLES, {"metadata": {"name": marker}, "spec": spec})

        async def summarised() -> bool:
            return (await kube.get(VALKEY_ROLES, marker)).get("status", {}).get("summary") == "+@read"

        await eventually(summarised, marker)


async def test_referenced_image_is_protected_until_its_last_config_goes(
    operator: Operator, kube: Client, names: Names
) -> None:
    await names.image("img")
    await names.config("a", imageRef="img")
    await names.config("b", imageRef="img")
    await eventually(lambda: has(kube, VALKEY_IMAGES, names("img"), IMAGE_PROTECTION_FINALIZER), "protection")

    await kube.delete(VALKEY_IMAGES, names("img"))
    marked = await kube.get(VALKEY_IMAGES, names("img"))
    assert "deletionTimestamp" in marked["metadata"]
    await kube.delete(VALKEY_CONFIGS, names("a"))
    await drained(kube, names, VALKEY_IMAGES)
    assert await has(kube, VALKEY_IMAGES, names("img"), IMAGE_PROTECTION_FINALIZER), "still referenced by b"

    await kube.delete(VALKEY_CONFIGS, names("b"))
    deleted = time.monotonic()
    await eventually(lambda: gone(kube, VALKEY_IMAGES, names("img")), "release", 10, interval=0.05)
    assert time.monotonic() - deleted < 5


async def test_unreferenced_image_deletes_at_once(operator: Operator, kube: Client, names: Names) -> None:
    await names.image("lonely")
    await drained(kube, names, VALKEY_IMAGES)
    assert await finalizers(kube, VALKEY_IMAGES, names("lonely")) == []
    await kube.delete(VALKEY_IMAGES, names("lonely"))
    assert await gone(kube, VALKEY_IMAGES, names("lonely"))


async def test_moving_image_ref_releases_the_old_image(
    operator: Operator, kube: Client, names: Names
) -> None:
    await names.image("old")
    await names.image("new")
    await names.config("cfg", imageRef="old")
    await eventually(
        lambda: has(kube, VALKEY_IMAGES, names("old"), IMAGE_PROTECTION_FINALIZER), "old protected"
    )
    await kube.patch(VALKEY_CONFIGS, names("cfg"), {"spec": {"imageRef": names("new")}})
    await eventually(
        lambda: has(kube, VALKEY_IMAGES, names("new"), IMAGE_PROTECTION_FINALIZER), "new protected"
    )
    await eventually(
        lambda: _not(has(kube, VALKEY_IMAGES, names("old"), IMAGE_PROTECTION_FINALIZER)), "old released"
    )


async def _not(value: Awaitable[bool]) -> bool:
    return not await value


async def test_chain_resolution_and_every_failure_reason(
    operator: Operator, kube: Client, names: Names
) -> None:
    await names.config("leaf", baseRef="base", valkey={"maxmemory-policy": "allkeys-lru"})

    def reason_is(name: str, reason: str) -> Awaitable[bool]:
        return resolution_is(kube, names(name), reason)

    await eventually(lambda: reason_is("leaf", "BaseNotFound"), "BaseNotFound")
    await names.config("base", imageRef="img", valkey={"maxmemory-policy": "noeviction", "timeout": "5"})
    await eventually(lambda: reason_is("leaf", "ImageNotFound"), "ImageNotFound")
    await names.image("img")
    await eventually(lambda: reason_is("leaf", "Resolved"), "Resolved")
    leaf = await kube.get(VALKEY_CONFIGS, names("leaf"))
    assert leaf["status"]["resolvedImage"] == {
        "name": names("img"),
        "repository": "valkey/valkey",
        "tag": "9.1.2",
        "version": "9.1.2",
    }
    assert leaf["status"]["observedGeneration"] == leaf["metadata"]["generation"]
    first_hash = leaf["status"]["settingsHash"]
    # A change in the base changes the derived config's effective settings.
    await kube.patch(VALKEY_CONFIGS, names("base"), {"spec": {"valkey": {"timeout": "6"}}})

    async def hash_changed() -> bool:
        current = await kube.get(VALKEY_CONFIGS, names("leaf"))
        return bool(current["status"].get("settingsHash") not in (None, first_hash))

    await eventually(hash_changed, "the derived config's hash to follow its base")

    await names.config("loop1", baseRef="loop2")
    await names.config("loop2", baseRef="loop1", imageRef="img")
    await eventually(lambda: reason_is("loop1", "BaseCycle"), "BaseCycle")

    await names.config("d0", imageRef="img")
    for depth in range(1, 9):
        await names.config(f"d{depth}", baseRef=f"d{depth - 1}")
    await eventually(lambda: reason_is("d7", "Resolved"), "8 deep resolves")
    await eventually(lambda: reason_is("d8", "TooDeep"), "9 deep is too deep")
    condition = await resolved(kube, names("d8"))
    assert condition is not None and condition["status"] == "False"


async def test_persistence_resolves_through_the_chain_into_status(
    operator: Operator, kube: Client, names: Names
) -> None:
    """Field by field over the base, defaults filled in; a size that shrinks through the chain
    (baseRef moved to a smaller base: admission cannot see it) shows in status; rdb with no size
    anywhere in the chain does not resolve."""
    await names.image("img")
    await names.config("big", imageRef="img", persistence={"mode": "rdb", "size": "10Gi"})
    await names.config("small", imageRef="img", persistence={"mode": "rdb", "size": "5Gi"})
    await names.config("leaf", baseRef="big", persistence={"mode": "aof", "appendfsync": "always"})

    async def shows(name: str, wanted: Obj | None) -> bool:
        """The status of the current generation says wanted (None: no persistence, a cache)."""
        config = await kube.get(VALKEY_CONFIGS, names(name))
        status = config.get("status", {})
        current = status.get("observedGeneration") == config["metadata"]["generation"]
        return current and "conditions" in status and status.get("persistence") == wanted

    aof = {"mode": "aof", "size": "10Gi", "appendfsync": "always", "reclaimPolicy": "Delete"}
    await eventually(lambda: shows("leaf", aof), "leaf: aof over its base's size")
    await kube.patch(VALKEY_CONFIGS, names("leaf"), {"spec": {"baseRef": names("small")}})
    await eventually(lambda: shows("leaf", {**aof, "size": "5Gi"}), "the smaller base's size")

    await names.config("sizeless", imageRef="img")
    await names.config("rdb", baseRef="sizeless", persistence={"mode": "rdb"})
    await eventually(lambda: resolution_is(kube, names("rdb"), "PersistenceInvalid"), "PersistenceInvalid")
    condition = await resolved(kube, names("rdb"))
    assert condition is not None and "persistence.size" in condition["message"], condition
    await kube.patch(VALKEY_CONFIGS, names("sizeless"), {"spec": {"persistence": {"size": "1Gi"}}})
    rdb = {"mode": "rdb", "size": "1Gi", "reclaimPolicy": "Delete"}
    await eventually(lambda: shows("rdb", rdb), "resolved once the base has a size")
    await eventually(lambda: shows("sizeless", None), "a base with only a size is a cache")


async def test_configs_and_roles_are_protected_while_referenced(
    operator: Operator, kube: Client, names: Names, namespace: str
) -> None:
    await names.image("img")
    await names.config("base", imageRef="img")
    await names.config("child", baseRef="base")
    await names.config("used", imageRef="img")
    await names.role("reader")
    await eventually(
        lambda: has(kube, VALKEY_CONFIGS, names("base"), CONFIG_PROTECTION_FINALIZER), "base protected"
    )
    await drained(kube, names, VALKEY_CONFIGS)
    assert not await has(kube, VALKEY_CONFIGS, names("child"), CONFIG_PROTECTION_FINALIZER)

    await kube.create(VALKEY_CLUSTERS, cluster("c1", namespace, names("used"), roles=(names("reader"),)))
    await eventually(
        lambda: has(kube, VALKEY_CONFIGS, names("used"), CONFIG_PROTECTION_FINALIZER), "used protected"
    )
    await eventually(
        lambda: has(kube, VALKEY_ROLES, names("reader"), ROLE_PROTECTION_FINALIZER), "role protected"
    )
    role = await kube.get(VALKEY_ROLES, names("reader"))
    assert role["status"]["summary"] == "+@read -@dangerous"

    await kube.delete(VALKEY_ROLES, names("reader"))
    await kube.delete(VALKEY_CONFIGS, names("used"))
    await drained(kube, names, VALKEY_ROLES)
    await drained(kube, names, VALKEY_CONFIGS)
    assert await has(kube, VALKEY_ROLES, names("reader"), ROLE_PROTECTION_FINALIZER), "c1 uses it"
    assert await has(kube, VALKEY_CONFIGS, names("used"), CONFIG_PROTECTION_FINALIZER), "c1 uses it"
    await kube.delete(VALKEY_CLUSTERS, "c1", namespace)
    await eventually(lambda: gone(kube, VALKEY_ROLES, names("reader")), "role released")
    await eventually(lambda: gone(kube, VALKEY_CONFIGS, names("used")), "config released")

    await kube.delete(VALKEY_CONFIGS, names("child"))
    await eventually(
        lambda: _not(has(kube, VALKEY_CONFIGS, names("base"), CONFIG_PROTECTION_FINALIZER)), "base released"
    )


async def test_deleted_base_cycles_go_while_a_used_chain_stays(
    operator: Operator, kube: Client, names: Names, namespace: str
) -> None:
    """A config being deleted holds no base of its own: a deleted baseRef cycle (or a config that is
    its own base) goes, instead of each member's finalizer waiting for the other forever (found by
    the fuzzer); a chain a cluster still resolves through stays, deleted or not."""
    await names.image("img")
    await names.config("own", baseRef="own", imageRef="img")
    await names.config("ping", baseRef="pong", imageRef="img")
    await names.config("pong", baseRef="ping")
    await names.config("base", imageRef="img")
    await names.config("child", baseRef="base")
    await kube.create(VALKEY_CLUSTERS, cluster("c1", namespace, names("child")))
    for name in ("ping", "pong", "base", "child"):
        await eventually(
            lambda name=name: has(kube, VALKEY_CONFIGS, names(name), CONFIG_PROTECTION_FINALIZER), name
        )

    for name in ("own", "ping", "pong", "child"):
        await kube.delete(VALKEY_CONFIGS, names(name))
    for name in ("own", "ping", "pong"):
        await eventually(lambda name=name: gone(kube, VALKEY_CONFIGS, names(name)), f"{name} gone", 15)
    await drained(kube, names, VALKEY_CONFIGS)
    assert await has(kube, VALKEY_CONFIGS, names("child"), CONFIG_PROTECTION_FINALIZER), "c1 uses it"
    assert await has(kube, VALKEY_CONFIGS, names("base"), CONFIG_PROTECTION_FINALIZER), "c1 uses it"
    assert await has(kube, VALKEY_IMAGES, names("img"), IMAGE_PROTECTION_FINALIZER), "base names it"

    await kube.delete(VALKEY_CLUSTERS, "c1", namespace)
    await eventually(lambda: gone(kube, VALKEY_CONFIGS, names("child")), "child released")
    await eventually(
        lambda: _not(has(kube, VALKEY_CONFIGS, names("base"), CONFIG_PROTECTION_FINALIZER)), "base released"
    )


@pytest_asyncio.fixture
async def lone_api(lone_plane: ControlPlane) -> AsyncIterator[k8s.ApiClient]:
    """A control plane of its own with the CRDs: no other test's operator on the shared plane can
    act on its cluster-scoped images while this test's operator is stopped."""
    configuration = k8s.Configuration()
    await config.load_kube_config(config_file=str(lone_plane.kubeconfig), client_configuration=configuration)
    async with k8s.ApiClient(configuration) as api:
        await install_crds(Client(RestClient(api), field_manager="tests"))
        yield api


async def test_restart_mid_way_converges(lone_api: k8s.ApiClient) -> None:
    kube = Client(RestClient(lone_api), field_manager="tests")
    created = await kube.create(NAMESPACES, {"metadata": {"generateName": "restart-"}})
    namespace = created["metadata"]["name"]  # a repeat (--count) finds the last one still terminating
    names = Names(kube, "lone")
    first = Operator(lone_api, namespace)
    await first.start()
    await names.image("img")
    await names.config("cfg", imageRef="img")
    await eventually(lambda: has(kube, VALKEY_IMAGES, names("img"), IMAGE_PROTECTION_FINALIZER), "protection")
    await first.stop()
    # While no operator runs: the image is deleted (marked) and its config removed.
    await kube.delete(VALKEY_IMAGES, names("img"))
    await kube.delete(VALKEY_CONFIGS, names("cfg"))
    held = await kube.get(VALKEY_IMAGES, names("img"))  # no operator runs on this plane to release it
    assert (
        "deletionTimestamp" in held["metadata"]
        and IMAGE_PROTECTION_FINALIZER in held["metadata"]["finalizers"]
    )
    second = Operator(lone_api, namespace)
    await second.start()
    try:
        await eventually(lambda: gone(kube, VALKEY_IMAGES, names("img")), "release after restart")
    finally:
        await second.stop()


async def test_concurrent_writers_keep_each_others_finalizers(
    operator: Operator, kube: Client, names: Names
) -> None:
    await names.image("busy")
    other = "example.com/someone-else"

    async def other_writer() -> None:
        for i in range(20):
            await kube.patch(VALKEY_IMAGES, names("busy"), {"metadata": {"labels": {"tick": str(i)}}})

        async def add_ours() -> Obj:
            current = await kube.get(VALKEY_IMAGES, names("busy"))
            return await kube.patch(
                VALKEY_IMAGES,
                names("busy"),
                {
                    "metadata": {
                        "finalizers": [*current["metadata"].get("finalizers", []), other],
                        "resourceVersion": current["metadata"]["resourceVersion"],
                    }
                },
            )

        await retry_on_conflict(add_ours)  # the operator writes the same list concurrently

    writer = asyncio.create_task(other_writer())
    for index in range(5):
        await names.config(f"user{index}", imageRef="busy")
    await writer
    await eventually(
        lambda: has(kube, VALKEY_IMAGES, names("busy"), IMAGE_PROTECTION_FINALIZER), "protection"
    )
    assert other in (await finalizers(kube, VALKEY_IMAGES, names("busy")) or [])
    await kube.patch(VALKEY_IMAGES, names("busy"), {"metadata": {"finalizers": [IMAGE_PROTECTION_FINALIZER]}})


async def test_namespace_scoped_operator_still_protects_for_other_namespaces(
    kube_api: k8s.ApiClient, kube: Client, names: Names, namespace: str
) -> None:
    scoped = Operator(kube_api, namespace="somewhere-else")
    await scoped.start()
    try:
        await names.image("img")
        await names.config("cfg", imageRef="img")
        await kube.create(VALKEY_CLUSTERS, cluster("c", namespace, names("cfg")))
        await eventually(
            lambda: has(kube, VALKEY_CONFIGS, names("cfg"), CONFIG_PROTECTION_FINALIZER), "protected"
        )
        await kube.delete(VALKEY_CLUSTERS, "c", namespace)
        await eventually(
            lambda: _not(has(kube, VALKEY_CONFIGS, names("cfg"), CONFIG_PROTECTION_FINALIZER)), "released"
        )
    finally:
        await scoped.stop()
