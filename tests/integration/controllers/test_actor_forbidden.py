"""The actor tells an RBAC refusal from other 403s, on the real API server's words (stalled.py).

An operator whose ServiceAccount may not create an owned object gets a 403 from the authorizer on
every pass: only a human granting the permission changes that, so the cluster is Stalled=True
(kstatus Failed). A 403 from admission (here a ValidatingAdmissionPolicy whose reason is
Forbidden, as a policy engine's would be) reads otherwise and is not.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rbac_support import SERVICE_ACCOUNTS, presenting, service_account_token

from controllers.cluster.actor import Actor
from controllers.cluster.decision.actions import CreateObject, Failure
from controllers.cluster.decision.context import Context
from controllers.cluster.decision.desired import Desired, OwnedObject
from controllers.cluster.decision.plan import finish, plan
from controllers.cluster.decision.refusals import classified
from controllers.cluster.render.context import RenderContext
from controllers.shared.config_resolve import ResolvedConfig, ResolvedImage
from controllers.shared.observation import Observation
from valkey_operator.api.cluster import ValkeyCluster
from valkey_operator.core.client import Client
from valkey_operator.core.resource import CONFIG_MAPS, Resource
from valkey_operator.core.rest import RestClient
from valkey_operator.core.restconfig import load_config
from valkey_testbed.wait import NotYet, eventually

pytestmark = pytest.mark.integration

ACCOUNT = "no-rights"
ADMISSION = "admissionregistration.k8s.io"
POLICIES = Resource(
    ADMISSION, "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", namespaced=False
)
BINDINGS = Resource(
    ADMISSION, "v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", namespaced=False
)
DESIRED = Desired(
    shards=1, replicas_per_shard=0, template_hash="h", image="valkey/valkey:9.1.2", config_hash="c"
)


def context(namespace: str) -> RenderContext:
    cluster = ValkeyCluster.from_dict(
        {"metadata": {"name": "act", "namespace": namespace, "uid": "u-1"}, "spec": {"configRef": "cfg"}}
    )
    config = ResolvedConfig(("cfg",), ResolvedImage("img", "valkey/valkey", "9.1.2", "9.1.2"), {}, {}, {})
    return RenderContext(cluster=cluster, config=config)


def config_map(name: str, namespace: str) -> CreateObject:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    return CreateObject(OwnedObject(CONFIG_MAPS, body))


async def test_an_rbac_403_stalls_the_cluster_and_an_admission_403_does_not(
    kube: Client, namespace: str, kubeconfig_path: Path
) -> None:
    await kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": ACCOUNT, "namespace": namespace}})
    token = await service_account_token(kube, namespace, ACCOUNT)
    account = presenting(await load_config(str(kubeconfig_path)), token)
    ctx = context(namespace)
    async with RestClient(account) as rest:
        outcome = await Actor(Client(rest, "tests"), ctx, [], None).run([config_map("denied", namespace)])
    (refused,) = (classified(failure) for failure in outcome.failures)  # as decide classifies it
    print(f"[forbidden] rbac: {refused.message}")
    assert refused.forbidden and "cannot create resource" in refused.message, refused

    async with refusing_policy(kube, namespace):
        over = await admission_refusal(kube, ctx, namespace)
    print(f"[forbidden] admission: {over.message}")
    assert "403" in over.message and not over.forbidden, over

    first = plan(Observation(pods=()), DESIRED, Context())
    stalled = finish(first, [refused]).status.condition("Stalled")
    assert (stalled.status, stalled.reason) == (True, "Forbidden"), stalled
    assert finish(first, [over]).status.condition("Stalled").status is False


@contextlib.asynccontextmanager
async def refusing_policy(kube: Client, namespace: str) -> AsyncIterator[None]:
    """A ValidatingAdmissionPolicy (CEL, in the API server) that refuses ConfigMaps named over-*
    in namespace with reason Forbidden (HTTP 403); removed on exit (it is cluster-scoped)."""
    name = f"refuse-{namespace}"[:63]
    rule = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
    policy = {
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [rule]},
            "validations": [
                {
                    "expression": "!object.metadata.name.startsWith('over-')",
                    "message": "no over-* ConfigMaps here",
                    "reason": "Forbidden",
                }
            ],
        },
    }
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    binding = {
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": selector},
        },
    }
    await kube.create(POLICIES, policy)
    try:
        await kube.create(BINDINGS, binding)
        try:
            yield
        finally:
            await kube.delete(BINDINGS, name)
    finally:
        await kube.delete(POLICIES, name)


async def admission_refusal(kube: Client, ctx: RenderContext, namespace: str) -> Failure:
    """The actor's failure once the policy is in force (it reaches admission a moment later)."""
    attempts = iter(range(1000))

    async def refused() -> Failure | NotYet:
        name = f"over-{next(attempts)}"
        outcome = await Actor(kube, ctx, [], None).run([config_map(name, namespace)])
        return classified(outcome.failures[0]) if outcome.failures else NotYet(f"{name} created")

    return await eventually(refused, "the policy's 403", 60, interval=0.5)
