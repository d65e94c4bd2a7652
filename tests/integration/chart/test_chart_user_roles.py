"""The chart's aggregated ClusterRoles on the real API server: the controller manager folds them into
the built-in view, edit and admin roles, so a tenant bound to `edit` in a namespace manages its
ValkeyClusters and ValkeyBackups there and never writes the platform team's cluster-scoped kinds."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from chart_render import render
from rbac_support import CLUSTER_ROLES, RBAC, ROLE_BINDINGS

from valkey_operator.core.client import Client
from valkey_operator.core.resource import Resource
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
GROUP = "valkey.gomomento.com"


def aggregated_roles(fullname: str) -> list[dict[str, Any]]:
    return render("--set", f"fullnameOverride={fullname}", only=("aggregated-roles.yaml",))


@pytest_asyncio.fixture
async def roles(kube: Client) -> AsyncIterator[list[str]]:
    fullname = f"vo-{uuid.uuid4().hex[:8]}"
    created = [await kube.create(CLUSTER_ROLES, role) for role in aggregated_roles(fullname)]
    try:
        yield [role["metadata"]["name"] for role in created]
    finally:
        for role in created:
            await kube.delete(CLUSTER_ROLES, role["metadata"]["name"])


async def allowed(kube: Client, user: str, verb: str, resource: str, namespace: str | None) -> bool:
    base, _, subresource = resource.partition("/")
    attributes = {"group": GROUP, "resource": base, "subresource": subresource, "verb": verb}
    if namespace:
        attributes["namespace"] = namespace
    review = await kube.create(
        ACCESS_REVIEWS,
        {
            "apiVersion": ACCESS_REVIEWS.api_version,
            "kind": ACCESS_REVIEWS.kind,
            "spec": {"user": user, "resourceAttributes": attributes},
        },
    )
    return bool(review["status"].get("allowed"))


async def bind(kube: Client, user: str, role: str, namespace: str) -> None:
    await kube.create(
        ROLE_BINDINGS,
        {
            "apiVersion": ROLE_BINDINGS.api_version,
            "kind": ROLE_BINDINGS.kind,
            "metadata": {"name": f"{user}-{role}", "namespace": namespace},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
        },
    )


async def test_edit_and_view_in_a_namespace_reach_the_tenants_kinds_only(
    kube: Client, namespace: str, roles: list[str]
) -> None:
    assert sorted(roles) == sorted(f"{roles[0].rsplit('-', 1)[0]}-{suffix}" for suffix in ("view", "edit"))
    await bind(kube, "tenant", "edit", namespace)
    await bind(kube, "reader", "view", namespace)

    async def grants(role: str, verb: str) -> bool:
        rules = (await kube.get(CLUSTER_ROLES, role)).get("rules") or []
        return any(
            GROUP in rule.get("apiGroups", [])
            and verb in rule["verbs"]
            and "valkeyclusters" in rule["resources"]
            for rule in rules
        )

    async def aggregated() -> bool | NotYet:
        """Each built-in role is folded on its own: wait for both the tenant's and the reader's."""
        done = {role: await grants(role, verb) for role, verb in (("edit", "create"), ("view", "list"))}
        return all(done.values()) or NotYet(done)

    await eventually(aggregated, "the chart's rules folded into the built-in edit role", 30, interval=0.5)
    for resource in ("valkeyclusters", "valkeybackups"):
        for verb in ("create", "patch", "delete", "list"):
            assert await allowed(kube, "tenant", verb, resource, namespace), (verb, resource)
        assert await allowed(kube, "reader", "list", resource, namespace), resource
        assert not await allowed(kube, "reader", "create", resource, namespace), resource
        assert not await allowed(kube, "tenant", "create", resource, "kube-system"), resource
    for resource in ("valkeyimages", "valkeyconfigs", "valkeyroles"):
        for verb in ("create", "patch", "delete"):
            assert not await allowed(kube, "tenant", verb, resource, None), (verb, resource)
    # The operator's status is its own to write.
    assert not await allowed(kube, "tenant", "patch", "valkeyclusters/status", namespace)
