"""Changing a running cluster end to end: runtime settings, pod annotations, ACL drift and role edits.

Real pods, real valkey-server, the operator's reconcilers in this process.
What the nodes run is read with valkey-cli (the client users have), never
through the operator's own admin client, and no pod may be replaced: uids and
restart counts are compared before and after.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Mapping

import pytest
from chart_operator import ChartOperator
from cluster_support import Catalog, cli, create_cluster, lives_of, owned_pods, settled, status_of, warnings
from tunable_samples import SAMPLES

from controllers.shared import names as render_names
from valkey_operator.api import tunables
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_ROLES
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import PODS, SECRETS
from valkey_operator.core.rest import Obj
from valkey_testbed import images
from valkey_testbed.wait import NotYet, eventually

STEADY_PROBE_MAX = 60
"""A hand edit inside Valkey raises no Kubernetes event: it is corrected by the next probe of a quiet
cluster, at most this long after the last change (--steady-probe-max-seconds; 300 s by default)."""

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("valkey_crds"),
    # A shorter back-off cap, so the ACL drift wait stays short.
    pytest.mark.operator_values(f"extraArgs={{--steady-probe-max-seconds={STEADY_PROBE_MAX}}}"),
]

NODE_TIMEOUT_MS = "5000"
UNSAFE_ON_A_LIVE_TEST_CLUSTER = {"cluster-node-timeout", "maxmemory", "maxclients", "hz", "timeout"}
"""Sampled with values of our own: the test bed's 2 cores need a node timeout >= 5 s, data
must fit, and the test's own connections must not be cut as idle."""
LIVE_SAMPLES = {
    **{name: values[0] for name, values in SAMPLES.items() if name not in UNSAFE_ON_A_LIVE_TEST_CLUSTER},
    "cluster-node-timeout": "6000",
    "maxmemory": "200mb",
    "maxclients": "5000",
    "hz": "20",
    "timeout": "3600",
}
REFUSED = ("maxclients", "1000000")
"""Admission accepts it, the node refuses it: more clients than the pod's open-files limit allows."""


# --- valkey-cli, as a user of the cluster would run it -----------------------------------------------


async def admin_password(kube: Client, namespace: str, cluster: str) -> str:
    secret = await kube.get(SECRETS, render_names.secret_name(cluster), namespace)
    return base64.b64decode(secret["data"]["admin-password"]).decode()


async def config_get(ip: str, password: str) -> dict[str, str]:
    lines = (await cli(ip, "valkey-operator", password, "CONFIG", "GET", *tunables.RUNTIME_NAMES)).split("\n")
    return dict(zip(lines[0::2], lines[1::2], strict=False))


async def node_ips(kube: Client, namespace: str, cluster: str) -> list[str]:
    return [str(pod["status"]["podIP"]) for pod in await owned_pods(kube, namespace, cluster)]


def expected(settings: Mapping[str, str]) -> dict[str, str]:
    return {name: tunables.canonical(name, value) or value for name, value in settings.items()}


async def every_node_runs(ips: list[str], password: str, wanted: Mapping[str, str], what: str) -> float:
    """Seconds until CONFIG GET on every node shows wanted."""
    started = time.monotonic()

    async def done() -> bool | NotYet:
        for ip in ips:
            found = await config_get(ip, password)
            wrong = {name: found.get(name) for name, value in wanted.items() if found.get(name) != value}
            if wrong:
                return NotYet(f"{ip}: {wrong}")
        return True

    await eventually(done, what, 60, interval=0.2)
    return time.monotonic() - started


def _sha256(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


async def _config(catalog: Catalog, name: str, spec: Obj) -> str:
    await catalog.create(VALKEY_CONFIGS, {"metadata": {"name": catalog(name)}, "spec": spec})
    return catalog(name)


async def _image(catalog: Catalog) -> str:
    version = images.valkey_version(images.newest_image())
    return await catalog.image("img", version)


# --- runtime settings ------------------------------------------------------------------------------


@pytest.mark.timeout(420)
async def test_every_runtime_setting_reaches_every_node_without_replacing_a_pod(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    image = await _image(catalog)
    base = await _config(
        catalog, "base", {"imageRef": image, "valkey": {"cluster-node-timeout": NODE_TIMEOUT_MS}}
    )
    child = await _config(catalog, "child", {"baseRef": base})
    await create_cluster(kube, namespace, "rt", child, shards=3, replicas=1)
    await settled(kube, namespace, "rt", 300)
    password = await admin_password(kube, namespace, "rt")
    ips = await node_ips(kube, namespace, "rt")
    pods = await lives_of(kube, namespace, "rt")
    at_start = await config_get(ips[0], password)

    # Every runtime tunable at once, through the cluster's own config: Updating until every node
    # runs it, then Active with the new configHash, which is never claimed before.
    await kube.patch(VALKEY_CONFIGS, child, {"spec": {"valkey": LIVE_SAMPLES}})
    applied = await every_node_runs(ips, password, expected(LIVE_SAMPLES), "every sample on every node")
    print(f"{len(LIVE_SAMPLES)} runtime settings on {len(ips)} nodes {applied:.1f}s after the edit")
    await settled_with_config(kube, namespace, "rt", child)

    # Removing the keys from the cluster's config while the base config gains one: every node
    # runs the base's value, and every other directive what it ran at start.
    await kube.patch(VALKEY_CONFIGS, child, {"spec": {"valkey": None}})
    base_spec = {"cluster-node-timeout": NODE_TIMEOUT_MS, "slowlog-max-len": "4096"}
    await kube.patch(VALKEY_CONFIGS, base, {"spec": {"valkey": base_spec}})
    restored = {**{name: at_start[name] for name in LIVE_SAMPLES}, "slowlog-max-len": "4096"}
    applied = await every_node_runs(ips, password, restored, "the start values and the base's setting")
    print(f"keys removed and a base config's setting on every node {applied:.1f}s after the edits")
    await kube.patch(
        VALKEY_CONFIGS, base, {"spec": {"valkey": {"slowlog-max-len": None}}}
    )  # merge patch: null removes
    restored["slowlog-max-len"] = at_start["slowlog-max-len"]
    await every_node_runs(ips, password, restored, "the start values again")
    await settled_with_config(kube, namespace, "rt", child)
    assert await lives_of(kube, namespace, "rt") == pods

    # A value the node refuses: Degraded naming it and Valkey's words, the other setting applied.
    await kube.patch(
        VALKEY_CONFIGS, child, {"spec": {"valkey": {REFUSED[0]: REFUSED[1], "slowlog-max-len": "512"}}}
    )
    await every_node_runs(
        ips, password, {"slowlog-max-len": "512"}, "the accepted setting beside a refused one"
    )

    async def degraded() -> Obj | NotYet:
        status = await status_of(kube, namespace, "rt")
        condition = find_condition(status.get("conditions"), "Degraded") or {}
        return status if condition.get("reason") == "ConfigRejected" else NotYet(status)

    status = await eventually(degraded, "Degraded with ConfigRejected", 60)
    message = find_condition(status["conditions"], "Degraded")["message"]
    assert f"maxclients '{REFUSED[1]}'" in message and "not able to handle" in message, message
    assert status["state"] == "Updating"
    # The Event is written after the status in the same pass: wait for it as for the status.
    await eventually(
        lambda: warnings(kube, namespace, "ConfigRejected"), "a Warning Event for the refused value", 30
    )
    assert (await config_get(ips[0], password))["maxclients"] == at_start["maxclients"]
    await kube.patch(
        VALKEY_CONFIGS, child, {"spec": {"valkey": {"maxclients": "4000", "slowlog-max-len": "512"}}}
    )
    await every_node_runs(ips, password, {"maxclients": "4000"}, "the corrected value")
    await settled_with_config(kube, namespace, "rt", child)
    assert await lives_of(kube, namespace, "rt") == pods


async def settled_with_config(kube: Client, namespace: str, name: str, config: str) -> Obj:
    """Active, with the configHash of the config's current settingsHash."""

    async def done() -> Obj | NotYet:
        wanted = ((await kube.get(VALKEY_CONFIGS, config)).get("status") or {}).get("settingsHash")
        status = await status_of(kube, namespace, name)
        if status.get("configHash") == wanted and status.get("state") == "Active":
            return status
        return NotYet(status)

    return await eventually(done, f"{name} Active with the configHash of {config}", 90, interval=0.2)


async def cluster_with_app_user(
    kube: Client,
    catalog: Catalog,
    namespace: str,
    name: str,
    *,
    categories: list[str],
    key_pattern: str,
    replicas: int,
    **spec: object,
) -> str:
    """A 1-shard cluster of the newest Valkey with user `app` (password app-password) through one
    role of these categories, Active; returns the role's name."""
    image = await _image(catalog)
    config = await _config(
        catalog, "cfg", {"imageRef": image, "valkey": {"cluster-node-timeout": NODE_TIMEOUT_MS}}
    )
    role = catalog("app")
    categories_spec = [{"name": category} for category in categories]
    await catalog.create(VALKEY_ROLES, {"metadata": {"name": role}, "spec": {"categories": categories_spec}})
    user = {
        "username": "app",
        "passwordHashes": [_sha256("app-password")],
        "permissions": [{"roleRef": role, "keys": [{"pattern": key_pattern}]}],
    }
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"configRef": config, "shards": 1, "replicasPerShard": replicas, "acl": [user], **spec},
    }
    await kube.create(VALKEY_CLUSTERS, body)
    await settled(kube, namespace, name, 300)
    return role


# --- pod annotations and ACLs ------------------------------------------------------------------------


@pytest.mark.timeout(420)
async def test_annotations_acl_drift_and_role_edits_apply_to_live_pods(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    annotations = {"example.com/team": "cache", "example.com/gone": "soon"}
    role = await cluster_with_app_user(
        kube,
        catalog,
        namespace,
        "live",
        categories=["read", "string"],
        key_pattern="app:*",
        replicas=1,
        podAnnotations=annotations,
    )
    password = await admin_password(kube, namespace, "live")
    ips = await node_ips(kube, namespace, "live")
    pods = await lives_of(kube, namespace, "live")
    for pod in pods:
        await kube.patch(PODS, pod, {"metadata": {"annotations": {"other.io/owner": "someone"}}}, namespace)

    # podAnnotations: new and changed keys patched in place, removed keys and others' keys kept.
    edited = {"example.com/team": "store", "example.com/new": "1"}
    started = time.monotonic()
    await kube.patch(VALKEY_CLUSTERS, "live", {"spec": {"podAnnotations": edited}}, namespace)

    async def patched() -> bool | NotYet:
        found = [
            pod["metadata"].get("annotations") or {} for pod in await owned_pods(kube, namespace, "live")
        ]
        good = all(edited.items() <= annotations.items() for annotations in found)
        return True if good else NotYet(found)

    await eventually(patched, "the new annotations on every pod", 60, interval=0.2)
    print(f"podAnnotations on every pod {time.monotonic() - started:.1f}s after the edit")
    for pod in await owned_pods(kube, namespace, "live"):
        annotations = pod["metadata"]["annotations"]
        assert annotations["other.io/owner"] == "someone" and annotations["example.com/gone"] == "soon"

    # ACL drift by hand on one node: an extra command for the app user, and a user nobody asked
    # for. Both are reverted; the internal users are untouched.
    target = ips[0]
    internal_before = await acl_users(target, password, ("valkey-operator", "valkey-replication", "default"))
    assert "OK" in await cli(target, "valkey-operator", password, "ACL", "SETUSER", "app", "+flushall")
    assert "OK" in await cli(
        target, "valkey-operator", password, "ACL", "SETUSER", "intruder", "on", ">pw", "+@all", "~*"
    )

    async def reverted() -> bool | NotYet:
        listed = await cli(target, "valkey-operator", password, "ACL", "LIST")
        app_line = next((line for line in listed.splitlines() if line.startswith("user app ")), "")
        if "intruder" in listed or "flushall" in app_line:
            return NotYet(listed)
        return True

    started = time.monotonic()
    await eventually(reverted, "the hand-made ACL changes reverted", STEADY_PROBE_MAX + 30, interval=0.5)
    print(f"ACL drift reverted {time.monotonic() - started:.1f}s after the hand edit")
    assert (
        await acl_users(target, password, ("valkey-operator", "valkey-replication", "default"))
        == internal_before
    )

    # A role edit (allow one more category, drop another) changes what the app user may run on
    # every node, with no pod replaced.
    primary = next(
        node["ip"]
        for node in (await status_of(kube, namespace, "live"))["nodes"]
        if node["role"] == "primary"
    )
    assert "OK" in await cli(primary, "app", "app-password", "SET", "app:k", "v")
    for ip in ips:
        assert "NOPERM" in await cli(ip, "app", "app-password", "HSET", "app:h", "f", "v")
        assert "NOPERM" not in await cli(ip, "app", "app-password", "GET", "app:k")
    await kube.patch(
        VALKEY_ROLES,
        role,
        {"spec": {"categories": [{"name": "read"}, {"name": "hash"}, {"name": "string", "access": "deny"}]}},
    )
    started = time.monotonic()

    async def role_applied() -> bool | NotYet:
        for ip in ips:
            hset = await cli(ip, "app", "app-password", "HSET", "app:h", "f", "v")
            set_ = await cli(ip, "app", "app-password", "SET", "app:k", "v")
            if "NOPERM" in hset or "NOPERM" not in set_:
                return NotYet(f"{ip}: HSET {hset.strip()!r}, SET {set_.strip()!r}")
        return True

    await eventually(role_applied, "the role edit on every node", 90, interval=0.2)
    print(f"role edit applied on every node {time.monotonic() - started:.1f}s after the edit")
    await settled(kube, namespace, "live", 60)
    assert await lives_of(kube, namespace, "live") == pods


async def acl_users(ip: str, password: str, usernames: tuple[str, ...]) -> dict[str, str]:
    """ACL LIST lines of these users, by username."""
    listed = await cli(ip, "valkey-operator", password, "ACL", "LIST")
    lines = (line.split(" ", 2) for line in listed.splitlines())
    return {fields[1]: " ".join(fields) for fields in lines if len(fields) > 1 and fields[1] in usernames}


# --- a role naming a command Valkey does not know ----------------------------------------------------


@pytest.mark.timeout(420)
async def test_a_role_with_an_unknown_command_is_reported_and_new_pods_still_start(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    role = await cluster_with_app_user(
        kube, catalog, namespace, "unk", categories=["read", "write"], key_pattern="*", replicas=0
    )
    (ip,) = await node_ips(kube, namespace, "unk")
    assert "OK" in await cli(ip, "app", "app-password", "SET", "k", "v")

    spec = {"categories": [{"name": "read"}, {"name": "write"}], "commands": [{"name": "nosuchcommand"}]}
    await kube.patch(VALKEY_ROLES, role, {"spec": spec})

    async def reported() -> Obj | NotYet:
        status = await status_of(kube, namespace, "unk")
        condition = find_condition(status.get("conditions"), "Degraded") or {}
        return status if condition.get("reason") == "UnknownCommand" else NotYet(status)

    status = await eventually(reported, "Degraded with UnknownCommand", 60)
    message = find_condition(status["conditions"], "Degraded")["message"]
    assert f"ValkeyRole {role}" in message and "nosuchcommand" in message, message

    async def warned() -> list[Obj] | NotYet:
        return await warnings(kube, namespace, "UnknownCommand") or NotYet("no Warning Event yet")

    # The operator writes a pass's status before its Events: the Event may come a moment later.
    await eventually(warned, "a Warning Event for the unknown command", 10, interval=0.2)
    assert "OK" in await cli(ip, "app", "app-password", "SET", "k", "v2")  # the user keeps working
    secret = await kube.get(SECRETS, render_names.secret_name("unk"), namespace)
    assert "nosuchcommand" not in base64.b64decode(secret["data"]["users.acl"]).decode()

    # A pod created afterwards loads the startup ACL file, starts and joins.
    await kube.patch(VALKEY_CLUSTERS, "unk", {"spec": {"shards": 2}}, namespace)

    async def joined() -> Obj | NotYet:
        status = await status_of(kube, namespace, "unk")
        primaries = [
            node for node in status.get("nodes") or [] if node.get("role") == "primary" and node.get("slots")
        ]
        return status if len(primaries) == 2 else NotYet(status)

    status = await eventually(joined, "the new shard's pod serving slots", 240)
    new_ip = next(node["ip"] for node in status["nodes"] if node["ip"] != ip)
    assert "OK" in await cli(new_ip, "app", "app-password", "-c", "SET", "k2", "v")
