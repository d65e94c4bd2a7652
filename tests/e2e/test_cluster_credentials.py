"""Credentials, images and resources end to end (SPEC 1.9): real pods, real valkey-server, real valkey-cli.

One cluster carries every feature: a user whose passwords live in a Secret, a
user whose Secret the operator generates, an image pull secret, an image pinned
by digest, and resources without a CPU limit. Logins go through valkey-cli as a
user of the cluster would run it (never the operator's admin client), and a
password rotation must replace no pod: uids and restart counts are compared.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
from chart_operator import ChartOperator
from cluster_support import Catalog, cli, lives_of, owned_pods, settled, status_of, whole_passes

from controllers.shared import names as render_names
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES, VALKEY_ROLES
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

NAME = "creds"
PULL_SECRET = "registry-cred"
PASSWORDS = "reports-passwords"
MEMORY = "256Mi"
MEMORY_BYTES = 256 * 2**20
WATCHED_WITHIN = 15.0
"""A watched Secret's change reaches the nodes in about a second; without the watch it waits for the
next periodic pass, REQUEUE_STEADY (30 s) after the last one, which the test makes just happen."""


async def logs_in(ip: str, user: str, password: str) -> bool:
    """A PING after AUTH as that user: PONG, or a refused login (WRONGPASS)."""
    answer = await cli(ip, user, password, "PING")
    assert "PONG" in answer or "WRONGPASS" in answer, answer
    return "PONG" in answer


async def node_ips(kube: Client, namespace: str) -> list[str]:
    return sorted(str(pod["status"]["podIP"]) for pod in await owned_pods(kube, namespace, NAME))


def secret_body(namespace: str, name: str, values: dict[str, str], type_: str = "Opaque") -> Obj:
    data = {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}
    metadata = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": type_, "data": data}


async def put_passwords(kube: Client, namespace: str, values: dict[str, str]) -> None:
    """Replace the user's password Secret's data, as `kubectl apply` of the new Secret would."""
    await kube.replace(SECRETS, secret_body(namespace, PASSWORDS, values))


async def every_node(ips: list[str], user: str, works: dict[str, bool], what: str) -> float:
    """Seconds until each password logs in (True) or is refused (False) on every node."""
    started = time.monotonic()

    async def done() -> bool | NotYet:
        for ip in ips:
            for password, expected in works.items():
                if await logs_in(ip, user, password) != expected:
                    return NotYet(f"{ip}: {password} {'refused' if expected else 'accepted'}")
        return True

    await eventually(done, what, 90, interval=0.3)
    return time.monotonic() - started


async def admin_config(kube: Client, namespace: str, ip: str, name: str) -> str:
    secret = await kube.get(SECRETS, render_names.secret_name(NAME), namespace)
    password = base64.b64decode(secret["data"]["admin-password"]).decode()
    lines = (await cli(ip, "valkey-operator", password, "CONFIG", "GET", name)).split("\n")
    return lines[1]


async def create_everything(kube: Client, catalog: Catalog, namespace: str) -> tuple[str, str]:
    """The pinned image, a config with requests only, a role, the Secrets and the cluster; Active.
    Returns (the digest reference pods must run, the config's name)."""
    reference = images.newest_image()
    version = images.valkey_version(reference)
    digest = images.image_digest(reference)
    image = catalog("pinned")
    await catalog.create(
        VALKEY_IMAGES,
        {
            "metadata": {"name": image},
            "spec": {"repository": "valkey/valkey", "tag": version, "version": version, "digest": digest},
        },
    )
    config = catalog("cfg")
    spec = {
        "imageRef": image,
        "resources": {"cpu": "100m", "memory": MEMORY},
        "valkey": {"cluster-node-timeout": "5000"},
    }
    await catalog.create(VALKEY_CONFIGS, {"metadata": {"name": config}, "spec": spec})
    role = catalog("rw")
    categories = [{"name": "read"}, {"name": "write"}, {"name": "connection"}]
    await catalog.create(VALKEY_ROLES, {"metadata": {"name": role}, "spec": {"categories": categories}})
    registry = {"auths": {"registry.example": {"auth": base64.b64encode(b"robot:token").decode()}}}
    dockerconfig = {".dockerconfigjson": json.dumps(registry)}
    await kube.create(
        SECRETS, secret_body(namespace, PULL_SECRET, dockerconfig, "kubernetes.io/dockerconfigjson")
    )
    await kube.create(SECRETS, secret_body(namespace, PASSWORDS, {"current": "first-password"}))
    permissions = [{"roleRef": role, "keys": [{"pattern": "*"}]}]
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {
            "configRef": config,
            "shards": 1,
            "replicasPerShard": 1,
            "imagePullSecrets": [PULL_SECRET],
            "acl": [
                {"username": "reports", "passwordSecretName": PASSWORDS, "permissions": permissions},
                {"username": "jobs", "permissions": permissions},
            ],
        },
    }
    started = time.monotonic()
    await kube.create(VALKEY_CLUSTERS, body)
    await settled(kube, namespace, NAME, 300)
    print(f"{NAME}: 1x1 Active after {time.monotonic() - started:.1f}s")
    return f"valkey/valkey@{digest}", config


@pytest.mark.timeout(720)
async def test_passwords_from_secrets_generated_secrets_pull_secrets_digests_and_limits(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    pinned, config = await create_everything(kube, catalog, namespace)
    pods = await owned_pods(kube, namespace, NAME)
    assert len(pods) == 2
    ips = await node_ips(kube, namespace)

    # The pod spec: pinned by digest, the pull secret, requests and a memory limit but no CPU limit;
    # and it runs (Active above, and a login below).
    for pod in pods:
        [container] = pod["spec"]["containers"]
        assert container["image"] == pinned
        assert pod["spec"]["imagePullSecrets"] == [{"name": PULL_SECRET}]
        assert container["resources"] == {
            "requests": {"cpu": "100m", "memory": MEMORY},
            "limits": {"memory": MEMORY},
        }
    assert (await status_of(kube, namespace, NAME))["currentImage"] == pinned
    for ip in ips:  # maxmemory: 75% of the memory limit
        assert await admin_config(kube, namespace, ip, "maxmemory") == str(MEMORY_BYTES * 3 // 4)

    # The generated user Secret: owned by the cluster, and its password and URI log in.
    generated = await kube.get(SECRETS, f"{NAME}-jobs", namespace)
    owner = generated["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ValkeyCluster", NAME, True)
    data = {key: base64.b64decode(value).decode() for key, value in generated["data"].items()}
    assert data["username"] == "jobs"
    endpoint = (await status_of(kube, namespace, NAME))["endpoint"]
    assert data["uri"] == f"valkey://jobs:{data['password']}@{endpoint}"
    user, password = data["uri"].removeprefix("valkey://").split("@")[0].split(":")
    for ip in ips:  # the URI names the Service, which nothing dials on the test bed: its pods' IPs
        assert await logs_in(ip, user, password)
        assert not await logs_in(ip, "jobs", "not-the-password")
    assert "OK" in await cli(
        next(n["ip"] for n in (await status_of(kube, namespace, NAME))["nodes"] if n["role"] == "primary"),
        user,
        password,
        "SET",
        "k",
        "v",
    )

    # The user's password from a Secret, then a rotation: new added, then old removed.
    before = await lives_of(kube, namespace, NAME)
    await every_node(ips, "reports", {"first-password": True, "second-password": False}, "the first password")
    await whole_passes(operator, kube, namespace, NAME)  # the last periodic pass just happened
    await put_passwords(kube, namespace, {"current": "first-password", "next": "second-password"})
    took = await every_node(
        ips, "reports", {"first-password": True, "second-password": True}, "both passwords during rotation"
    )
    print(f"added password works on every node {took:.1f}s after the Secret changed")
    assert took < WATCHED_WITHIN, f"{took:.1f}s: the change waited for a periodic pass, not the watch"
    await whole_passes(operator, kube, namespace, NAME)
    await put_passwords(kube, namespace, {"next": "second-password"})
    took = await every_node(
        ips, "reports", {"first-password": False, "second-password": True}, "the old password refused"
    )
    print(f"removed password refused on every node {took:.1f}s after the Secret changed")
    assert took < WATCHED_WITHIN, f"{took:.1f}s: the change waited for a periodic pass, not the watch"
    # Generated Secret untouched by all this: never regenerated.
    again = await kube.get(SECRETS, f"{NAME}-jobs", namespace)
    assert again["data"] == generated["data"]

    # Deleting the generated Secret generates a new password; the old one is refused.
    await kube.delete(SECRETS, f"{NAME}-jobs", namespace)

    async def regenerated() -> dict[str, str] | NotYet:
        found = await kube.get_or_none(SECRETS, f"{NAME}-jobs", namespace)
        if found is None or found["metadata"]["uid"] == generated["metadata"]["uid"]:
            return NotYet("the generated Secret not created again yet")
        return {key: base64.b64decode(value).decode() for key, value in found["data"].items()}

    renewed = await eventually(regenerated, "a new generated Secret", 60, interval=0.3)
    assert renewed["password"] != password
    took = await every_node(ips, "jobs", {password: False, renewed["password"]: True}, "the new password")
    print(f"regenerated password works, the old one refused, {took:.1f}s after the new Secret")

    # A missing password Secret holds the cluster with a reason, then it resumes.
    await kube.delete(SECRETS, PASSWORDS, namespace)

    async def blocked() -> Obj | NotYet:
        status = await status_of(kube, namespace, NAME)
        degraded = find_condition(status.get("conditions"), "Degraded") or {}
        return degraded if degraded.get("reason") == "PasswordSecretInvalid" else NotYet(status)

    degraded = await eventually(blocked, "Degraded PasswordSecretInvalid", 60, interval=0.3)
    assert f"Secret {PASSWORDS} not found" in degraded["message"]
    await kube.create(SECRETS, secret_body(namespace, PASSWORDS, {"only": "third-password"}))
    await every_node(
        ips, "reports", {"second-password": False, "third-password": True}, "the recreated Secret"
    )
    await settled(kube, namespace, NAME, 60)
    assert await lives_of(kube, namespace, NAME) == before

    # Limits set in the config: a CPU limit appears, the memory limit and maxmemory follow it.
    await kube.patch(
        VALKEY_CONFIGS, config, {"spec": {"resources": {"limits": {"cpu": "1", "memory": "512Mi"}}}}
    )

    async def rolled() -> list[Obj] | NotYet:
        current = await owned_pods(kube, namespace, NAME)
        limits = [pod["spec"]["containers"][0]["resources"].get("limits") for pod in current]
        fresh = [pod for pod in current if pod["metadata"]["name"] not in before]
        if (
            len(current) == 2
            and len(fresh) == 2
            and all(limit == {"cpu": "1", "memory": "512Mi"} for limit in limits)
        ):
            return current
        return NotYet(limits)

    await eventually(rolled, "pods with the new limits", 300, interval=1.0)
    await settled(kube, namespace, NAME, 120)
    for ip in await node_ips(kube, namespace):
        assert await admin_config(kube, namespace, ip, "maxmemory") == str(512 * 2**20 * 3 // 4)
        assert await logs_in(ip, "reports", "third-password")
