"""Persistence end to end (SPEC 1.6): every node lost at once, and a node whose disk died.

Three 3x1 clusters, one per mode (rdb, aof everysec, aof always), are formed
side by side; each writes what its mode will be held to; then every test-bed
node fails at once and recovers: every server restarts from its claim at a
new IP. The operator meets the nodes again by node id, each cluster reforms
with the same node ids, and what survives is checked key by key through the
valkey-py cluster client against the mode's promise:
- rdb: everything before the last completed save (a BGSAVE on every node,
  then more writes it promises nothing about);
- aof everysec: everything acknowledged more than about a second before;
- aof always: every acknowledged write, even the last ones, acknowledged by
  the primary alone (WAIT 0) just before the failure.
Then a node fails with its disk lost: its claims come back unusable, and the
operator replaces them, the nodes rejoining as new replicas, no acknowledged
write lost.

Lines starting with `[persistence]` report the measured times (run with -s).
"""

from __future__ import annotations

import asyncio
import time

import attrs
import own_bed
import pytest
from cluster_support import Catalog, status_of, warnings
from inprocess_operator import Operator
from keys_support import read_back
from load_support import checker_for
from persistence_support import (
    MODES,
    bgsave_everywhere,
    claim_of,
    persistent_cluster,
    recorded_identities,
)
from repair_support import PREFILL, check_topology, fail_every_node, live_pods, primary_of, repaired

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import Obj
from valkey_operator.valkey.admin import AdminClient
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.wait import eventually

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES  # a test bed of this module's own

# Fails every node: runs on a test bed of its own.
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

NODE_FAILURE = "the test fails the node(s) the operator pod may run on, and the operator must see the outage"

EVERYSEC_MARGIN = 2.5
"""Seconds between the last acknowledged write and the failure for aof everysec: its promise is all
but about the last second."""


@attrs.define
class Durable:
    """One cluster of the blackout, and what its mode promises to keep."""

    mode: str
    name: str
    status: Obj
    admin: AdminClient
    identities: dict[str, str] = attrs.field(factory=dict)
    promised: dict[bytes, bytes] = attrs.field(factory=dict)
    acknowledged_at: float = 0.0


async def write_promise(durable: Durable) -> None:
    """Write PREFILL keys (WAIT 1) and what the mode is then held to."""
    async with checker_for(durable.status, durable.admin, replicas=1) as checker:
        written = await checker.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        if durable.mode == "rdb":
            await bgsave_everywhere(durable.admin, durable.status)
            durable.promised.update(checker.acknowledged)
            await checker.write(500)  # after the save: rdb promises nothing about these
        else:
            durable.promised.update(checker.acknowledged)
    durable.acknowledged_at = time.monotonic()


async def write_last(durable: Durable) -> None:
    """aof always: writes acknowledged by the primary alone, right before the failure."""
    async with checker_for(durable.status, durable.admin, replicas=0, prefix="always") as checker:
        written = await checker.write(1000)
        assert written.acknowledged == 1000, written
        durable.promised.update(checker.acknowledged)


@pytest.mark.inprocess_operator(NODE_FAILURE)
@pytest.mark.timeout(900)
async def test_every_node_lost_at_once_each_mode_comes_back_with_what_it_promises(
    operator: Operator, kube: Client, catalog: Catalog, namespace: str, kubelet: KubeletControl
) -> None:
    modes = sorted(MODES)
    formed = await asyncio.gather(
        *(persistent_cluster(kube, catalog, namespace, f"whole-{mode}", MODES[mode]) for mode in modes)
    )
    clusters = [
        Durable(mode, f"whole-{mode}", status, admin)
        for mode, (status, admin) in zip(modes, formed, strict=True)
    ]
    for durable in clusters:
        durable.identities = await recorded_identities(kube, namespace, durable.name)
    await asyncio.gather(*(write_promise(durable) for durable in clusters))
    (always,) = [durable for durable in clusters if durable.mode == "aof-always"]
    await write_last(always)
    (everysec,) = [durable for durable in clusters if durable.mode == "aof-everysec"]
    await asyncio.sleep(max(0.0, EVERYSEC_MARGIN - (time.monotonic() - everysec.acknowledged_at)))
    started = time.monotonic()
    recovered = await fail_every_node(kube, kubelet, namespace, [durable.name for durable in clusters])
    for durable in clusters:
        status = await repaired(kube, namespace, durable.name, pods=6, timeout=240)
        took = time.monotonic() - started
        after = await recorded_identities(kube, namespace, durable.name)
        assert after == durable.identities, f"{durable.name}: every node back with its id"
        before_ips = {node["ip"] for node in durable.status["nodes"]}
        assert not before_ips & {node["ip"] for node in status["nodes"]}, "the servers restarted at new IPs"
        await check_topology(durable.admin, kube, namespace, durable.name, status, [])
        missing = await read_back(status, durable.promised)
        assert not missing, f"{durable.mode}: {len(missing)} of {len(durable.promised)} promised keys lost"
        print(
            f"[persistence] {durable.name}: every node failed; recovered at {recovered:.1f}s, every slot "
            f"served by the same {len(after)} node ids at new IPs at {took:.1f}s; "
            f"{len(durable.promised)} promised keys read back through valkey-py"
        )


@pytest.mark.inprocess_operator(NODE_FAILURE)
@pytest.mark.timeout(600)
async def test_a_node_whose_disk_died_comes_back_as_new_replicas_on_new_claims_losing_no_write(
    operator: Operator, kube: Client, catalog: Catalog, namespace: str, kubelet: KubeletControl
) -> None:
    name = "disk-lost"
    status, admin = await persistent_cluster(kube, catalog, namespace, name, MODES["aof-everysec"])
    identities = await recorded_identities(kube, namespace, name)
    primary = primary_of(status, 0)
    host = (await kube.get(PODS, primary["pod"], namespace))["spec"]["nodeName"]
    on_host = {
        claim_of(pod) for pod in await live_pods(kube, namespace, name) if pod["spec"]["nodeName"] == host
    }
    async with checker_for(status, admin, replicas=1) as durable:
        written = await durable.write(PREFILL)
        assert written.acknowledged == PREFILL, written
        acknowledged = dict(durable.acknowledged)
    started = time.monotonic()
    await kubelet.fail_node(host, lose_disk=True)
    try:

        async def noticed() -> bool:
            return (await status_of(kube, namespace, name)).get("state") != "Active"

        await eventually(noticed, "the operator to see the cluster degraded", 60)
    finally:
        await kubelet.recover_node(host)
    status = await repaired(kube, namespace, name, pods=6, timeout=300)
    took = time.monotonic() - started
    after = await recorded_identities(kube, namespace, name)
    assert not on_host & set(after), f"the claims of {host} are replaced: {on_host} -> {sorted(after)}"
    kept = {claim: node_id for claim, node_id in identities.items() if claim not in on_host}
    assert kept.items() <= after.items(), "the other nodes keep their claims and ids"
    assert not {identities[claim] for claim in on_host} & set(after.values()), "the lost nodes are new"
    await check_topology(admin, kube, namespace, name, status, [identities[claim] for claim in on_host])
    missing = await read_back(status, acknowledged)
    assert not missing, f"{len(missing)} acknowledged keys lost, e.g. {missing[:5]}"
    events = await warnings(kube, namespace, "VolumeLost")
    assert events, "a VolumeLost Warning says the claims were replaced"
    print(
        f"[persistence] {name}: {host} lost its disk ({len(on_host)} claims); Active again at {took:.1f}s "
        f"with new replicas on new claims; {len(acknowledged)} acknowledged keys read back; "
        f"events: {[event.get('note') for event in events]}"
    )
