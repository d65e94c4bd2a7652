"""The chart's ValidatingAdmissionPolicy on the real API server, with the operator's own token: what
the cluster-wide RBAC grants (pods in kube-system, writes to any Secret or Service) the policy refuses,
and what the operator does to its own objects it still allows."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import pytest_asyncio
from chart_render import render
from rbac_support import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    presenting,
    service_account_token,
)

from valkey_operator.core.client import Client
from valkey_operator.core.resource import (
    CONFIG_MAPS,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
)
from valkey_operator.core.resource import (
    PERSISTENT_VOLUME_CLAIMS as CLAIMS,
)
from valkey_operator.core.rest import ApiError, Obj, RestClient
from valkey_operator.core.restconfig import from_kubeconfig
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ADMISSION = "admissionregistration.k8s.io"
KINDS = {
    **{
        resource.kind: resource
        for resource in (SERVICE_ACCOUNTS, CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS)
    },
    "ValidatingAdmissionPolicy": Resource(
        ADMISSION, "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", namespaced=False
    ),
    "ValidatingAdmissionPolicyBinding": Resource(
        ADMISSION,
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        namespaced=False,
    ),
}
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
MANAGED = {"app.kubernetes.io/managed-by": "valkey-operator"}
DRY_RUN = {"dryRun": "All", "fieldManager": "valkey-operator"}


def rendered(namespace: str, fullname: str) -> list[Obj]:
    """The ServiceAccount, RBAC and policy of a cluster-wide install (the default mode)."""
    templates = ("serviceaccount.yaml", "rbac.yaml", "admission-policy.yaml")
    return render("--set", f"fullnameOverride={fullname}", namespace=namespace, only=templates)


@attrs.define
class Install:
    objects: list[Obj]
    account: str


@pytest_asyncio.fixture
async def install(kube: Client, namespace: str) -> AsyncIterator[Install]:
    fullname = f"vo-{uuid.uuid4().hex[:8]}"
    objects = rendered(namespace, fullname)
    created: list[tuple[Resource, Obj]] = []
    try:
        for doc in objects:
            if doc["kind"] not in POLICY_KINDS:
                created.append((KINDS[doc["kind"]], await kube.create(KINDS[doc["kind"]], doc)))
        yield Install(objects, fullname)
    finally:
        for resource, obj in reversed(created):
            if not resource.namespaced:
                await kube.delete(resource, obj["metadata"]["name"])
        for doc in objects:
            if doc["kind"] in POLICY_KINDS:
                await kube.delete(KINDS[doc["kind"]], doc["metadata"]["name"])


def pod(namespace: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "valkey-0", "namespace": namespace, "labels": MANAGED},
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [{"name": "valkey", "image": "valkey/valkey:9.1.2"}],
            **spec,
        },
    }


async def refusal(attempt: Any) -> str:
    """The API server's message when `attempt` is refused, or "" when it is allowed."""
    try:
        await attempt()
    except ApiError as error:
        assert error.status in (403, 422), (error.status, error.message)
        return error.message
    return ""


async def test_the_policy_refuses_what_rbac_grants_the_operators_token(
    kube: Client, kubeconfig_path: Path, namespace: str, install: Install
) -> None:
    await kube.create(SECRETS, {"metadata": {"name": "someone-elses", "namespace": namespace}, "data": {}})
    claim = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "none",
        "resources": {"requests": {"storage": "1Gi"}},
    }
    await kube.create(CLAIMS, {"metadata": {"name": "someone-elses", "namespace": namespace}, "spec": claim})
    ours = {"namespace": namespace, "labels": MANAGED}
    await kube.create(CLAIMS, {"metadata": {"name": "data-valkey-0", **ours}, "spec": claim})
    await kube.create(
        SERVICES,
        {"metadata": {"name": "someone-elses", "namespace": namespace}, "spec": {"ports": [{"port": 80}]}},
    )
    token = await service_account_token(kube, namespace, install.account)
    async with RestClient(presenting(await from_kubeconfig(str(kubeconfig_path)), token)) as rest:
        operator = Client(rest, field_manager="valkey-operator")
        attempts = {
            "a pod in kube-system": lambda: rest.request(
                "POST", PODS.path("kube-system"), body=pod("kube-system"), query=DRY_RUN
            ),
            "a patch of an unlabelled Secret": lambda: rest.request(
                "PATCH",
                SECRETS.path(namespace, "someone-elses"),
                body={"metadata": {"labels": MANAGED}, "stringData": {"password": "mine"}},
                content_type="application/merge-patch+json",
                query=DRY_RUN,
            ),
            "a delete of an unlabelled claim": lambda: rest.request(
                "DELETE", CLAIMS.path(namespace, "someone-elses"), query={"dryRun": "All"}
            ),
            "a pod as another ServiceAccount": lambda: rest.request(
                "POST",
                PODS.path(namespace),
                body=pod(namespace, serviceAccountName=install.account),
                query=DRY_RUN,
            ),
        }
        # RBAC alone (cluster-wide mode) lets every one of them through.
        for what, attempt in attempts.items():
            assert await refusal(attempt) == "", what

        for doc in install.objects:
            if doc["kind"] in POLICY_KINDS:
                await kube.create(KINDS[doc["kind"]], doc)

        async def all_refused() -> dict[str, str] | NotYet:
            answers = {what: await refusal(attempt) for what, attempt in attempts.items()}
            return answers if all(answers.values()) else NotYet(answers)

        answers = await eventually(all_refused, "the policy in force", 30, interval=0.5)
        for what, message in answers.items():
            print(f"{what}: {message}")
        assert "system namespaces" in answers["a pod in kube-system"]
        assert "only objects it made" in answers["a patch of an unlabelled Secret"]
        assert "only objects it made" in answers["a delete of an unlabelled claim"]
        assert "default ServiceAccount" in answers["a pod as another ServiceAccount"]

        # RBAC grants deleting Services (per-pod Services once externalAccess is off); the policy
        # keeps it to the operator's own.
        gone = await refusal(lambda: operator.delete(SERVICES, "someone-elses", namespace, missing_ok=False))
        print(f"a delete of an unlabelled Service: {gone}")
        assert "only objects it made" in gone

        # What the operator does to its own objects stays allowed.
        await operator.create(CONFIG_MAPS, {"metadata": {"name": "c-config", **ours}, "data": {"a": "1"}})
        await operator.patch(CONFIG_MAPS, "c-config", {"data": {"a": "2"}}, namespace)
        await rest.request("DELETE", CLAIMS.path(namespace, "data-valkey-0"), query={"dryRun": "All"})
        await rest.request("POST", PODS.path(namespace), body=pod(namespace), query=DRY_RUN)
    # Nothing the policy refused happened.
    assert "password" not in ((await kube.get(SECRETS, "someone-elses", namespace)).get("data") or {})
    assert await kube.get(SERVICES, "someone-elses", namespace)
    assert await kube.get(CLAIMS, "someone-elses", namespace)
