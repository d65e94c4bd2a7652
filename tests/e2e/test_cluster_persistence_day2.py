"""Day-2 operations on persistent clusters end to end (SPEC 1.6): rolls, scaling, Retain, size
changes and a mode change, each on its data claims.

Real pods on real claims (the test bed's local-path-provisioner and PV
controller), real valkey-server binaries, the operator's reconcilers in this
process. What each test holds the operator to:
- a planned replacement (a roll, a mode change) starts every node on a fresh
  claim and deletes the retired pods' claims once the pods are gone, so no
  claim is left without a pod; every claim records its server's node id;
- a scale-out and back keeps every key and deletes the leaving shard's claims;
- reclaimPolicy Retain keeps the claims after the cluster is deleted, and a
  cluster of the same name comes back on them with the same node ids and keys;
- a size the storage class cannot grow to, or a smaller one through the base
  chain, is reported in status and leaves the claims and the serving as they are.
Acknowledged means WAIT 1 returned on the writing connection (load_support.py).
Lines starting with `[persistence]` report the measured times (run with -s).
"""

from __future__ import annotations

import time
from collections.abc import Collection

import pytest
from chart_operator import ChartOperator
from cluster_support import (
    Catalog,
    admin_client,
    create_cluster,
    node_reports,
    owned_pods,
    settled,
    status_of,
    superuser_client,
    warnings,
)
from keys_support import read_back
from load_support import Load, checker_for
from persistence_support import (
    SIZE,
    claims_follow_pods,
    claims_of,
    persistent_cluster,
    persistent_config,
    recorded_id,
    recorded_identities,
)
from repair_support import PREFILL, check_topology, checkers, live_pods, primary_of

from controllers.shared.names import MODE_ANNOTATION, SHARD_LABEL
from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS
from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import PERSISTENT_VOLUME_CLAIMS
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient
from valkey_testbed import images
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

OLD = "9.1.0"
AOF = {"mode": "aof", "appendfsync": "everysec"}
ROLLED = 600.0
RESIZE_REFUSED = "does not allow volume expansion"
"""The operator's words for a bigger size on claims whose StorageClass cannot expand them."""


async def replaced(
    kube: Client, namespace: str, name: str, before: Collection[str], pods: int, timeout: float = ROLLED
) -> Obj:
    """Active again, from a pass that saw it, with `pods` live pods none of which is in `before` (uids)."""

    async def done() -> Obj | NotYet:
        cluster = await kube.get(VALKEY_CLUSTERS, name, namespace)
        status: Obj = cluster.get("status") or {}
        running = {pod["metadata"]["uid"] for pod in await live_pods(kube, namespace, name)}
        if (
            status.get("state") == "Active"
            and status.get("observedGeneration") == cluster["metadata"]["generation"]
            and len(running) == pods
            and not running & set(before)
            and len(status.get("nodes") or []) == pods
        ):
            return status
        return NotYet({"state": status.get("state"), "message": status.get("message"), "live": len(running)})

    return await eventually(done, f"{name}: every pod replaced, Active", timeout, interval=0.5)


async def pod_uids(kube: Client, namespace: str, name: str) -> set[str]:
    return {pod["metadata"]["uid"] for pod in await owned_pods(kube, namespace, name)}


def requested(claim: Obj) -> str:
    return str(claim["spec"]["resources"]["requests"]["storage"])


async def check_claims_after_replacement(
    kube: Client, namespace: str, name: str, status: Obj, before: dict[str, Obj], pods: int
) -> dict[str, Obj]:
    """Every live pod on a claim created for the replacement, the old claims gone (none left without
    a pod), and each claim recording the node id its server reports."""
    claims, _ = await claims_follow_pods(kube, namespace, name, pods)
    old_uids = {claim["metadata"]["uid"] for claim in before.values()}
    reused = sorted(c for c, claim in claims.items() if claim["metadata"]["uid"] in old_uids)
    assert not reused, f"pods of the new template run on retired claims: {reused}"
    identities = await recorded_identities(kube, namespace, name, pods)
    assert set(identities.values()) == {node["nodeId"] for node in status["nodes"]}, (identities, status)
    old_ids = {recorded_id(claim) for claim in before.values()}
    assert not old_ids & set(identities.values()), "a fresh claim came up with a retired node's id"
    return claims


@pytest.mark.timeout(1200)
async def test_a_rolling_update_moves_every_node_onto_a_new_claim_and_deletes_the_old_claims(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    newest = images.valkey_version(images.newest_image())
    old_image = await catalog.image("old", OLD)
    new_image = await catalog.image("new", newest)
    config = await persistent_config(catalog, AOF, image=old_image)
    status, admin = await persistent_cluster(kube, catalog, namespace, "roll", AOF, config=config)
    await recorded_identities(kube, namespace, "roll")
    before, _ = await claims_follow_pods(kube, namespace, "roll", 6)
    before_pods = await pod_uids(kube, namespace, "roll")
    async with checkers(status, admin) as (durable, probe):
        async with Load(durable, probe, duration=ROLLED) as load:
            started = time.monotonic()
            await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": new_image}})
            status = await replaced(kube, namespace, "roll", before_pods, 6)
            took = time.monotonic() - started
            report = await load.finish()
        verified = await durable.verify()
    assert verified.ok, verified
    assert verified.checked == PREFILL + report.durable.acknowledged, verified
    assert report.durable.acknowledged > 0, report
    assert status.get("currentImage") == f"valkey/valkey:{newest}", status
    assert {node.get("version") for node in status["nodes"]} == {newest}, status["nodes"]
    claims = await check_claims_after_replacement(kube, namespace, "roll", status, before, 6)
    await check_topology(admin, kube, namespace, "roll", status, [])
    print(
        f"[persistence] roll: 3x1 {OLD} -> {newest} on new claims in {took:.1f}s; old claims "
        f"{sorted(before)} gone, now {sorted(claims)}; {report}"
    )


@pytest.mark.timeout(1200)
async def test_three_to_four_shards_and_back_keeps_every_key_and_deletes_the_leaving_shards_claims(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    status, admin = await persistent_cluster(kube, catalog, namespace, "scale", AOF)
    await recorded_identities(kube, namespace, "scale")
    before, _ = await claims_follow_pods(kube, namespace, "scale", 6)
    async with checker_for(status, admin, replicas=1) as durable:
        written = await durable.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        started = time.monotonic()
        await kube.patch(VALKEY_CLUSTERS, "scale", {"spec": {"shards": 4}}, namespace)
        status = await settled(kube, namespace, "scale", ROLLED)
        out = time.monotonic() - started
        verified = await durable.verify()
        assert verified.ok, verified
        grown, _ = await claims_follow_pods(kube, namespace, "scale", 8)
        await recorded_identities(kube, namespace, "scale", 8)
        leaving = {c for c, claim in grown.items() if claim["metadata"]["labels"].get(SHARD_LABEL) == "3"}
        assert len(leaving) == 2 and set(grown) == set(before) | leaving, (sorted(grown), sorted(before))
        assert primary_of(status, 3).get("slots"), "the new shard serves slots"
        written = await durable.write(1000)  # some of these land on shard 3
        assert written.acknowledged == 1000, written
        started = time.monotonic()
        await kube.patch(VALKEY_CLUSTERS, "scale", {"spec": {"shards": 3}}, namespace)
        status = await settled(kube, namespace, "scale", ROLLED)
        back = time.monotonic() - started
        verified = await durable.verify()
        assert verified.ok, verified
        assert verified.checked == PREFILL + 1000, verified
    claims, pods = await claims_follow_pods(kube, namespace, "scale", 6)
    assert not set(claims) & leaving, f"the leaving shard's claims are still there: {sorted(claims)}"
    # Scaling replaced no pod of the staying shards: they run on the claims they started on.
    assert set(claims) == set(before), (sorted(claims), sorted(before))
    await recorded_identities(kube, namespace, "scale")
    await check_topology(admin, kube, namespace, "scale", status, [])
    missing = await read_back(status, durable.acknowledged)
    assert not missing, f"{len(missing)} keys lost, e.g. {missing[:5]}"
    print(
        f"[persistence] scale: 3 -> 4 shards Active in {out:.1f}s, 4 -> 3 in {back:.1f}s; "
        f"{verified.checked} keys read back; shard 3's claims {sorted(leaving)} deleted, {len(pods)} pods "
        f"on {len(claims)} claims"
    )


@pytest.mark.timeout(900)
async def test_retained_claims_bring_a_recreated_cluster_back_with_its_node_ids_and_keys(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    retained = {**AOF, "reclaimPolicy": "Retain"}
    config = await persistent_config(catalog, retained)
    status, admin = await persistent_cluster(kube, catalog, namespace, "kept", retained, config=config)
    identities = await recorded_identities(kube, namespace, "kept")
    claims = await claims_of(kube, namespace, "kept")
    owned = sorted(c for c, claim in claims.items() if claim["metadata"].get("ownerReferences"))
    assert len(claims) == 6 and not owned, f"retained claims must have no owner: {owned}"
    async with checker_for(status, admin, replicas=1) as durable:
        written = await durable.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        keys = dict(durable.acknowledged)
    started = time.monotonic()
    await kube.delete(VALKEY_CLUSTERS, "kept", namespace)

    async def cluster_gone() -> bool | NotYet:
        cluster = await kube.get_or_none(VALKEY_CLUSTERS, "kept", namespace)
        pods = await owned_pods(kube, namespace, "kept")
        return (cluster is None and not pods) or NotYet(f"cluster {cluster is not None}, {len(pods)} pods")

    await eventually(cluster_gone, "the cluster and its pods gone", 180)
    gone = time.monotonic() - started
    left = await claims_of(kube, namespace, "kept")
    assert set(left) == set(identities), f"the retained claims went with the cluster: {sorted(left)}"
    assert {c: recorded_id(claim) for c, claim in left.items()} == identities
    assert not any(claim["metadata"].get("deletionTimestamp") for claim in left.values()), left
    assert all(claim["status"].get("phase") == "Bound" for claim in left.values()), left

    started = time.monotonic()
    await create_cluster(kube, namespace, "kept", config, shards=3, replicas=1)
    status = await settled(kube, namespace, "kept", 300)
    took = time.monotonic() - started
    back = await recorded_identities(kube, namespace, "kept")
    assert back == identities, f"every node back on its claim with its id: {identities} -> {back}"
    assert {node["nodeId"] for node in status["nodes"]} == set(identities.values()), status["nodes"]
    now = await claims_of(kube, namespace, "kept")
    assert {c: claim["metadata"]["uid"] for c, claim in now.items()} == {
        c: claim["metadata"]["uid"] for c, claim in left.items()
    }, "the new cluster made claims of its own"
    admin = await admin_client(kube, namespace, "kept")  # the recreated cluster's credentials
    await check_topology(admin, kube, namespace, "kept", status, [])
    missing = await read_back(status, keys)
    assert not missing, f"{len(missing)} of {len(keys)} keys lost, e.g. {missing[:5]}"
    print(
        f"[persistence] retain: cluster and pods gone in {gone:.1f}s, 6 claims kept; recreated Active "
        f"in {took:.1f}s with the same 6 node ids and {len(keys)} keys read back"
    )

    # Cleaning up retained claims is the user's job: delete the cluster, then the claims.
    await kube.delete(VALKEY_CLUSTERS, "kept", namespace)
    await eventually(cluster_gone, "the recreated cluster and its pods gone", 180)
    for claim in now:
        await kube.delete(PERSISTENT_VOLUME_CLAIMS, claim, namespace)

    async def claims_gone() -> bool | NotYet:
        found = await claims_of(kube, namespace, "kept")
        return not found or NotYet(sorted(found))

    await eventually(claims_gone, "the retained claims deleted", 120)


def degraded(status: Obj) -> Obj:
    return find_condition(status.get("conditions"), "Degraded") or {}


def ready(status: Obj) -> Obj:
    return find_condition(status.get("conditions"), "Ready") or {}


async def still_serving(admin: AdminClient, status: Obj, key: str) -> None:
    """The primary takes a write and every node says cluster_state ok."""
    primary = primary_of(status, 0)
    async with superuser_client(admin.ca_pem).connect(primary["ip"]) as node:
        assert await node.text("SET", key, "v") == "OK"
    for node in status["nodes"]:
        report = await node_reports(admin, node["ip"])
        assert report["cluster"]["cluster_state"] == "ok", (node, report["cluster"])


@pytest.mark.timeout(900)
async def test_a_size_the_class_cannot_grow_to_and_a_chain_shrink_are_reported_and_leave_the_claims(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    reference = images.newest_image()
    image = await catalog.image("img", images.valkey_version(reference))
    base = await persistent_config(catalog, {"mode": "rdb"}, name="base", image=image)
    child = {"baseRef": base, "valkey": {"cluster-node-timeout": "5000"}}
    await catalog.create(VALKEY_CONFIGS, {"metadata": {"name": catalog("child")}, "spec": child})
    status, admin = await persistent_cluster(
        kube, catalog, namespace, "sized", {"mode": "rdb"}, config=catalog("child"), shards=1, replicas=1
    )
    before, _ = await claims_follow_pods(kube, namespace, "sized", 2)
    uids = {c: claim["metadata"]["uid"] for c, claim in before.items()}
    assert {requested(claim) for claim in before.values()} == {SIZE}, before
    pods = await pod_uids(kube, namespace, "sized")

    # Growth: local-path does not allow volume expansion, so nothing is patched; status says why and
    # the cluster stays Active (a GitOps tool must not see it progressing forever).
    started = time.monotonic()
    await kube.patch(VALKEY_CONFIGS, base, {"spec": {"persistence": {"size": "128Mi"}}})

    async def refused() -> Obj | NotYet:
        status = await status_of(kube, namespace, "sized")
        reason = degraded(status).get("reason")
        return status if reason == "ClaimGrowthRefused" else NotYet((reason, degraded(status).get("message")))

    status = await eventually(refused, "the refused growth reported in status", 120)
    reported = time.monotonic() - started
    assert degraded(status).get("status") == "True", status["conditions"]
    assert RESIZE_REFUSED in degraded(status)["message"], degraded(status)
    assert status.get("state") == "Active", f"a class that cannot grow keeps the cluster Active: {status}"
    assert ready(status).get("status") == "True", f"a refused growth must not affect clients: {status}"
    assert await warnings(kube, namespace, "ClaimGrowthRefused"), "no ClaimGrowthRefused Warning Event"
    await still_serving(admin, status, "after-growth")
    now = await claims_of(kube, namespace, "sized")
    assert {c: requested(claim) for c, claim in now.items()} == dict.fromkeys(before, SIZE), now
    growth_message = degraded(status)["message"]

    # Shrink through the chain: the child's base becomes one with a smaller size.
    smaller = await persistent_config(catalog, {"mode": "rdb", "size": "32Mi"}, name="small", image=image)
    started = time.monotonic()
    await kube.patch(VALKEY_CONFIGS, catalog("child"), {"spec": {"baseRef": smaller}})

    async def shrink_refused() -> Obj | NotYet:
        status = await status_of(kube, namespace, "sized")
        reason = degraded(status).get("reason")
        return status if reason == "ClaimShrinkRefused" else NotYet((reason, degraded(status).get("message")))

    status = await eventually(shrink_refused, "the chain shrink reported in status", 120)
    shrink_reported = time.monotonic() - started
    assert "32Mi" in degraded(status)["message"], degraded(status)
    assert ready(status).get("status") == "True", status
    assert await warnings(kube, namespace, "ClaimShrinkRefused"), "no ClaimShrinkRefused Warning Event"
    await still_serving(admin, status, "after-shrink")
    now = await claims_of(kube, namespace, "sized")
    assert {c: claim["metadata"]["uid"] for c, claim in now.items()} == uids, "claims replaced"
    assert {c: requested(claim) for c, claim in now.items()} == dict.fromkeys(before, SIZE), now
    assert not any(claim["metadata"].get("deletionTimestamp") for claim in now.values()), now
    assert await pod_uids(kube, namespace, "sized") == pods, "a size change must not replace pods"
    print(
        f"[persistence] size: growth to 128Mi refused, in status after {reported:.1f}s ({growth_message!r}); "
        f"chain shrink to 32Mi reported after {shrink_reported:.1f}s ({degraded(status)['message']!r}); "
        f"claims kept at {SIZE}, pods kept"
    )


@pytest.mark.timeout(1200)
async def test_a_persistence_mode_change_rolls_the_cluster_onto_new_claims_and_loses_no_write(
    operator: ChartOperator, kube: Client, catalog: Catalog, namespace: str
) -> None:
    config = await persistent_config(catalog, AOF)
    status, admin = await persistent_cluster(kube, catalog, namespace, "mode", AOF, config=config)
    await recorded_identities(kube, namespace, "mode")
    before, _ = await claims_follow_pods(kube, namespace, "mode", 6)
    assert {claim["metadata"]["annotations"][MODE_ANNOTATION] for claim in before.values()} == {"aof"}
    before_pods = await pod_uids(kube, namespace, "mode")
    async with checkers(status, admin) as (durable, probe):
        async with Load(durable, probe, duration=ROLLED) as load:
            started = time.monotonic()
            patch = {"spec": {"persistence": {"mode": "rdb", "appendfsync": None}}}
            await kube.patch(VALKEY_CONFIGS, config, patch)
            status = await replaced(kube, namespace, "mode", before_pods, 6)
            took = time.monotonic() - started
            report = await load.finish()
        verified = await durable.verify()
    assert verified.ok, verified
    assert verified.checked == PREFILL + report.durable.acknowledged, verified
    assert report.durable.acknowledged > 0, report
    claims = await check_claims_after_replacement(kube, namespace, "mode", status, before, 6)
    modes = {
        c: (claim["metadata"].get("annotations") or {}).get(MODE_ANNOTATION) for c, claim in claims.items()
    }
    assert set(modes.values()) == {"rdb"}, modes
    for node in status["nodes"]:
        async with admin.connect(node["ip"]) as connection:
            persistence = await connection.info("persistence")
        assert persistence["aof_enabled"] == "0", (node["pod"], persistence)
    await check_topology(admin, kube, namespace, "mode", status, [])
    print(f"[persistence] mode aof -> rdb: every pod on a new rdb claim in {took:.1f}s; {report}")
