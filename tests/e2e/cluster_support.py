"""What the ValkeyCluster end-to-end tests share: per-test images and configs, waiting, asking nodes,
and the positive signals to wait for before asserting that the operator did not do something."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Collection
from typing import Any

import pytest
from cluster_scoped import ClusterScoped
from operator_protocol import RunningOperator

from controllers.shared import names as render_names
from valkey_operator.api.resources import (
    ADMIN_USER,
    PAUSED_ANNOTATION,
    VALKEY_CLUSTERS,
    VALKEY_CONFIGS,
    VALKEY_IMAGES,
)
from valkey_operator.core.client import Client
from valkey_operator.core.informer import FuncHandler, SharedInformer
from valkey_operator.core.resource import EVENTS, PODS, SECRETS
from valkey_operator.core.rest import Obj
from valkey_operator.core.store import DeletedFinalStateUnknown
from valkey_operator.valkey.admin import AdminClient, Credentials
from valkey_testbed import certs, images
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.superuser import SUPERUSER, SUPERUSER_PASSWORD, ensure_role, with_superuser
from valkey_testbed.wait import NotYet, eventually

NODE_TIMEOUT_MS = "5000"  # >= 5000 ms on the test bed's 2 shared cores
CLUSTER_CONTROLLER = "valkeycluster"
NUDGE_ANNOTATION = "test.valkey.gomomento.com/nudge"
"""Touched by tests to make the operator look at a cluster now (it means nothing to the operator)."""


def superuser_client(ca_pem: str | None = None) -> AdminClient:
    """A client of the cluster's nodes as SUPERUSER (on clusters create_cluster made)."""
    return AdminClient(
        credentials=Credentials(username=SUPERUSER, password=SUPERUSER_PASSWORD),
        ca_pem=ca_pem,
        allowed_networks=LOOPBACK_NETWORKS,
    )


class Catalog(ClusterScoped):
    """Cluster-scoped images and configs named per test, removed afterwards."""

    async def image(self, name: str, tag: str, version: str | None = None) -> str:
        body = {"metadata": {"name": self(name)}, "spec": {"repository": "valkey/valkey", "tag": tag}}
        body["spec"]["version"] = version or tag
        await self.create(VALKEY_IMAGES, body)
        return self(name)

    async def config(self, name: str, image_ref: str) -> str:
        spec = {"imageRef": image_ref, "valkey": {"cluster-node-timeout": NODE_TIMEOUT_MS}}
        await self.create(VALKEY_CONFIGS, {"metadata": {"name": self(name)}, "spec": spec})
        return self(name)


async def image_config(catalog: Catalog, reference: str) -> str:
    """A per-test ValkeyImage of an installed catalog image (see require_image) and a ValkeyConfig of it."""
    require_image(reference)
    return await catalog.config("cfg", await catalog.image("img", images.valkey_version(reference)))


def require_image(reference: str, *, optional: bool = False) -> None:
    """Fail unless reference is an installed image of the test bed's catalog.

    A reference the catalog does not know always fails (a typo must never pass as a skip). Only a
    test that declares its image optional is skipped when the image is known but not installed,
    and the skip names the image.
    """
    known = images.catalog()
    if reference not in known:
        pytest.fail(f"{reference} is not an image of the test bed's catalog: {sorted(known)}")
    if images.resolve_image(reference) is None:
        missing = f"{reference} is not installed (python -m valkey_testbed build)"
        if optional:
            pytest.skip(f"optional image {missing}")
        pytest.fail(missing)


async def create_cluster(
    kube: Client,
    namespace: str,
    name: str,
    config: str,
    shards: int,
    replicas: int,
    placement: Obj | None = None,
    **extra: Obj,
) -> Obj:
    """A ValkeyCluster; extra spec fields (tls, restore, backup, ...) as given; SUPERUSER is added
    to spec.acl (after any users given)."""
    await ensure_role(kube)
    spec = with_superuser({"configRef": config, "shards": shards, "replicasPerShard": replicas, **extra})
    if placement is not None:
        spec["placement"] = placement
    body = {
        "apiVersion": VALKEY_CLUSTERS.api_version,
        "kind": VALKEY_CLUSTERS.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return await kube.create(VALKEY_CLUSTERS, body)


async def status_of(kube: Client, namespace: str, name: str) -> Obj:
    cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
    status: Obj = cluster.get("status") or {}
    return status


async def wait_for_state(kube: Client, namespace: str, name: str, state: str, timeout: float) -> Obj:
    async def reached() -> Obj | NotYet:
        status = await status_of(kube, namespace, name)
        return status if status.get("state") == state else NotYet(status)

    return await eventually(reached, f"{name} {state}", timeout)


async def owned_pods(kube: Client, namespace: str, name: str) -> list[Obj]:
    return await kube.list(PODS, namespace, label_selector=f"{render_names.CLUSTER_LABEL}={name}")


async def lives_of(kube: Client, namespace: str, name: str) -> dict[str, tuple[str, int]]:
    """uid and restart count of each of the cluster's pods: unchanged means no pod was replaced or
    restarted."""
    return {
        pod["metadata"]["name"]: (
            pod["metadata"]["uid"],
            sum(c.get("restartCount", 0) for c in pod["status"].get("containerStatuses") or []),
        )
        for pod in await owned_pods(kube, namespace, name)
    }


async def whole_passes(
    operator: RunningOperator, kube: Client, namespace: str, name: str, count: int = 2
) -> None:
    """The positive signal to wait for before asserting that the operator did NOT do something.

    Returns once the cluster controller finished `count` passes that began after this call: the
    cluster is touched (an annotation) until they happened, and a pass in flight now is not
    counted (passes of one cluster never overlap). Only meaningful while the operator watches just
    this test's namespace, with one cluster in it.
    """
    target = await operator.reconciles(CLUSTER_CONTROLLER) + count + 1

    async def done() -> bool | NotYet:
        seen = await operator.reconciles(CLUSTER_CONTROLLER)
        if seen >= target:
            return True
        nudge = {"metadata": {"annotations": {NUDGE_ANNOTATION: str(time.monotonic())}}}
        await kube.patch(VALKEY_CLUSTERS, name, nudge, namespace)
        return NotYet(f"{seen} passes of {CLUSTER_CONTROLLER}, waiting for {target}")

    await eventually(done, f"{count} whole passes over {name}", 60, interval=0.5)


class PodsCreated:
    """Every pod of one cluster the API server ever showed, from a watch begun before the cluster
    exists: what was created, not what is left (failed pods get pruned). `phases` maps each pod's
    uid to the phase it was last seen in, "Deleted" once it is gone."""

    def __init__(self, kube: Client, namespace: str, cluster: str) -> None:
        self.phases: dict[str, str] = {}
        self.informer = SharedInformer(
            kube.rest, PODS, namespace=namespace, label_selector=f"{render_names.CLUSTER_LABEL}={cluster}"
        )
        self.informer.add_event_handler(
            FuncHandler(on_add=self._seen, on_update=lambda _old, new: self._seen(new), on_delete=self._gone)
        )

    def _seen(self, pod: Obj) -> None:
        self.phases[pod["metadata"]["uid"]] = (pod.get("status") or {}).get("phase") or "Pending"

    def _gone(self, pod: Obj | DeletedFinalStateUnknown) -> None:
        last = pod.obj if isinstance(pod, DeletedFinalStateUnknown) else pod
        self.phases[last["metadata"]["uid"]] = "Deleted"

    @property
    def created(self) -> int:
        return len(self.phases)

    def live(self) -> list[str]:
        """Uids of pods not (yet) ended: neither Failed, Succeeded nor deleted."""
        return [uid for uid, phase in self.phases.items() if phase not in ("Failed", "Succeeded", "Deleted")]

    async def __aenter__(self) -> PodsCreated:
        self.informer.start()
        async with asyncio.timeout(30):
            await self.informer.wait_for_sync()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.informer.stop()


async def admin_client(kube: Client, namespace: str, name: str) -> AdminClient:
    secret = await kube.get(SECRETS, render_names.secret_name(name), namespace)
    password = base64.b64decode(secret["data"]["admin-password"]).decode()
    return AdminClient(
        credentials=Credentials(username=ADMIN_USER, password=password), allowed_networks=LOOPBACK_NETWORKS
    )


async def node_reports(admin: AdminClient, ip: str) -> dict[str, Any]:
    async with admin.connect(ip) as node:
        return {
            "info": await node.info("replication"),
            "cluster": await node.cluster_info(),
            "nodes": await node.cluster_nodes(),
        }


async def settled(kube: Client, namespace: str, name: str, timeout: float) -> Obj:
    """Wait until the status describes the current spec and says Active."""

    async def done() -> Obj | NotYet:
        cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
        status: Obj = cluster.get("status") or {}
        current = (
            status.get("observedGeneration") == cluster["metadata"]["generation"]
            and status.get("state") == "Active"
            and status.get("shards") == cluster["spec"]["shards"]
        )
        return status if current else NotYet(status)

    return await eventually(done, f"{name} Active after the change", timeout)


async def formed_cluster(
    kube: Client,
    catalog: Catalog,
    namespace: str,
    name: str,
    *,
    shards: int,
    replicas: int,
    timeout: float = 360.0,
    placement: Obj | None = None,
) -> tuple[Obj, AdminClient]:
    """A ValkeyCluster of the newest Valkey (shards x replicas) created and Active: its status and an
    admin client for its nodes."""
    config = await image_config(catalog, images.newest_image())
    started = time.monotonic()
    await create_cluster(kube, namespace, name, config, shards=shards, replicas=replicas, placement=placement)
    status = await settled(kube, namespace, name, timeout)
    print(f"{name}: {shards}x{replicas} Active after {time.monotonic() - started:.1f}s")
    return status, await admin_client(kube, namespace, name)


async def warnings(kube: Client, namespace: str, reason: str) -> list[Obj]:
    """Warning Events of that reason in the namespace."""
    events = await kube.list(EVENTS, namespace)
    return [event for event in events if event.get("reason") == reason and event.get("type") == "Warning"]


async def put_tls_secret(kube: Client, namespace: str, leaf: tuple[bytes, bytes], ca: bytes) -> None:
    """Create or replace the Secret `tls` in namespace: leaf (certificate, key) and its CA bundle."""
    body = certs.tls_secret("tls", namespace, leaf[0], leaf[1], ca)
    if await kube.get_or_none(SECRETS, "tls", namespace) is None:
        await kube.create(SECRETS, body)
    else:
        await kube.patch(SECRETS, "tls", {"data": body["data"]}, namespace)


async def pause(kube: Client, namespace: str, name: str) -> None:
    paused = {"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}}
    await kube.patch(VALKEY_CLUSTERS, name, paused, namespace)


async def resume(kube: Client, namespace: str, name: str) -> None:
    """Unpause; Valkey's own changes raise no Kubernetes event, so the nudge makes a pass run now."""
    resumed = {"metadata": {"annotations": {PAUSED_ANNOTATION: None, NUDGE_ANNOTATION: str(time.time())}}}
    await kube.patch(VALKEY_CLUSTERS, name, resumed, namespace)


async def fail_over_by_hand(admin: AdminClient, replica_ips: Collection[str]) -> None:
    """A coordinated CLUSTER FAILOVER on each replica until each is a primary (pause the cluster first,
    or the operator may move primaries meanwhile). Valkey drops a manual failover that does not
    complete within cluster-manual-failover-timeout (5 s) instead of retrying it: on a loaded machine
    ask again, a bounded number of times."""

    async def waiting() -> list[str]:
        left = []
        for ip in replica_ips:
            async with admin.connect(ip) as node:
                if (await node.info("replication")).get("role") != "master":
                    left.append(ip)
        return left

    async def none_left() -> bool:
        return not await waiting()

    for _ in range(6):
        left = await waiting()
        if not left:
            return
        for ip in left:
            async with admin.connect(ip) as node:
                await node.cluster_failover()
        with contextlib.suppress(AssertionError):
            await eventually(none_left, "the coordinated failovers", 8)
    assert not await waiting(), "the coordinated failovers did not complete"


async def coordinated_failovers(
    operator: RunningOperator, namespace: str, cluster: str, mode: str = "coordinated"
) -> int:
    """The operator's count of failovers it sent for the cluster (coordinated, or takeover)."""
    labels = {"namespace": namespace, "cluster": cluster, "mode": mode}
    return int(await operator.sample("valkey_operator_failovers_total", labels) or 0)


async def primaries_by_pod(admin: AdminClient, status: Obj) -> set[str]:
    """The pods whose server says it is a primary serving slots (its own `myself` line of CLUSTER
    NODES: no other node's gossip, which may lag, and not the operator's status)."""
    serving = set()
    for node in status["nodes"]:
        async with admin.connect(node["ip"]) as connection:
            table = await connection.cluster_nodes()
        (myself,) = [line.split() for line in table.splitlines() if "myself" in line.split()[2]]
        if "master" in myself[2].split(",") and len(myself) > 8:
            serving.add(node["pod"])
    return serving


def crowding(hosts: dict[str, str], status: Obj) -> tuple[str, list[str]]:
    """The Kubernetes node holding copies of the most shards, and one copy per shard there (hosts:
    pod -> node): making those the primaries crowds that node past its share."""
    shards_on: dict[str, dict[int, str]] = {}
    for node in status["nodes"]:
        shards_on.setdefault(hosts[node["pod"]], {}).setdefault(node["shard"], node["pod"])
    host = max(shards_on, key=lambda name: (len(shards_on[name]), name))
    return host, sorted(shards_on[host].values())


async def cli(ip: str, user: str, password: str, *args: str) -> str:
    """valkey-cli of the newest image, run as a user of the cluster runs it; its output and errors."""
    entry = images.resolve_image(images.newest_image())
    assert entry is not None
    process = await asyncio.create_subprocess_exec(
        str(entry.executable("valkey-cli")),
        *("-h", ip, "-p", "6379", "--user", user, "--pass", password, "--no-auth-warning", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 15)
    return (out + err).decode()
