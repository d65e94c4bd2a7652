"""RBAC kinds the tests arrange, a ServiceAccount's token (TokenRequest) and a RestConfig that presents it,
and a ServiceAccount allowed everything for as long as a test needs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from kubernetes_asyncio.client import Configuration

from valkey_operator.core.client import Client
from valkey_operator.core.resource import Resource
from valkey_operator.core.restconfig import RestConfig

RBAC = "rbac.authorization.k8s.io"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES = Resource(RBAC, "v1", "roles", "Role")
ROLE_BINDINGS = Resource(RBAC, "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource(RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False)


async def service_account_token(kube: Client, namespace: str, account: str) -> str:
    """A token of an existing ServiceAccount from the TokenRequest API (the API server's default expiry)."""
    answer = await kube.rest.request(
        "POST",
        SERVICE_ACCOUNTS.path(namespace, account, "token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(answer["status"]["token"])


def presenting(admin: RestConfig, token: str) -> RestConfig:
    """The admin's server and CA, with token instead of the admin's client certificate."""
    config = Configuration(
        host=admin.host, api_key={"BearerToken": token}, api_key_prefix={"BearerToken": "Bearer"}
    )
    config.ssl_ca_cert = admin.ssl_ca_cert
    config.verify_ssl = admin.verify_ssl
    config.tls_server_name = admin.tls_server_name
    return config


@contextlib.asynccontextmanager
async def everything_allowed(kube: Client, account: str, namespace: str) -> AsyncIterator[None]:
    """A ClusterRole of every verb on every resource bound to the ServiceAccount, removed on exit (only
    where least privilege is not what the test is about)."""
    name = f"{namespace}-operator"
    rules = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    await kube.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
    try:
        binding = {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }
        await kube.create(CLUSTER_ROLE_BINDINGS, binding)
        try:
            yield
        finally:
            await kube.delete(CLUSTER_ROLE_BINDINGS, name)
    finally:
        await kube.delete(CLUSTER_ROLES, name)
