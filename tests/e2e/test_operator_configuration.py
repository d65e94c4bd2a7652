"""The operator's configuration on the real process (SPEC 1.5): a bad value stops it with one line,
--node-networks decides which nodes it dials, the ConfigMap and --cluster-domain reach the cluster.

Each test starts `python -m valkey_operator` (tests/e2e/operator_process.py)
scoped to the test's namespace, which also serves as the operator's own
namespace (--operator-namespace or $POD_NAMESPACE), where it reads the
`valkey-operator-config` ConfigMap.
"""

from __future__ import annotations

import time

import pytest
from cluster_support import (
    Catalog,
    admin_client,
    create_cluster,
    image_config,
    owned_pods,
    settled,
    status_of,
)
from operator_process import OperatorProcesses

from valkey_operator.core.client import Client
from valkey_operator.core.conditions import find_condition
from valkey_operator.core.resource import CONFIG_MAPS
from valkey_operator.core.rest import Obj
from valkey_operator.operator_config import CONFIG_MAP_NAME
from valkey_operator.valkey.admin import VALKEY_PORT
from valkey_testbed import images
from valkey_testbed.wait import eventually

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("valkey_crds")]

NAME = "netcheck"
EXIT_TIMEOUT = 60.0
"""Seconds for an operator with a bad value to exit (it stops before any informer starts)."""


async def create_operator_config(kube: Client, namespace: str, data: dict[str, str]) -> None:
    body = {"metadata": {"name": CONFIG_MAP_NAME, "namespace": namespace}, "data": data}
    await kube.create(CONFIG_MAPS, body)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("found_by", ["flag", "env"])
async def test_a_bad_config_map_stops_the_operator_with_one_line(
    found_by: str, kube: Client, namespace: str, operators: OperatorProcesses
) -> None:
    await create_operator_config(kube, namespace, {"defaultZoneSpread": "sometimes"})
    if found_by == "flag":
        process = operators.start("bad-config", flags=[f"--operator-namespace={namespace}"])
    else:
        process = operators.start("bad-config", env={"POD_NAMESPACE": namespace})
    code = await process.exit_code(EXIT_TIMEOUT)
    assert code == 2, f"exit status {code}; output:\n{process.tail()}"
    assert process.log().splitlines() == [
        f"valkey-operator: invalid ConfigMap {namespace}/{CONFIG_MAP_NAME} key defaultZoneSpread "
        '"sometimes": allowed bestEffort or required'
    ]


@pytest.mark.timeout(120)
async def test_an_unknown_config_map_key_stops_the_operator(
    kube: Client, namespace: str, operators: OperatorProcesses
) -> None:
    await create_operator_config(kube, namespace, {"defaultZoneSpreed": "required"})
    process = operators.start("typo", flags=[f"--operator-namespace={namespace}"])
    assert await process.exit_code(EXIT_TIMEOUT) == 2, process.tail()
    assert process.log().splitlines() == [
        f'valkey-operator: invalid key in ConfigMap {namespace}/{CONFIG_MAP_NAME} "defaultZoneSpreed": '
        "allowed the text keys defaultZoneSpread, maxConcurrentRollouts, secretSyncSeconds, "
        "tlsExpiryWarningDays"
    ]


@pytest.mark.timeout(120)
async def test_a_bad_flag_stops_the_operator_with_one_line(operators: OperatorProcesses) -> None:
    process = operators.start("bad-flag", flags=["--metrics-bind-address=x:y"])
    assert await process.exit_code(EXIT_TIMEOUT) == 2, process.tail()
    assert process.log().splitlines() == [
        'valkey-operator: invalid --metrics-bind-address "x:y": allowed host:port, :port, [IPv6]:port or '
        "[IPv4]:port with port 0..65535 (0 picks a free port), or 0 to disable"
    ]


async def unreachable_condition(kube: Client, namespace: str, pods: list[str], timeout: float) -> Obj:
    """Wait until Degraded says NodesUnreachable for every one of pods; the status then."""
    status: Obj = {}

    async def reported() -> bool:
        nonlocal status
        status = await status_of(kube, namespace, NAME)
        degraded = find_condition(status.get("conditions"), "Degraded")
        return (
            degraded is not None
            and degraded.get("status") == "True"
            and degraded.get("reason") == "NodesUnreachable"
            and all(pod in degraded.get("message", "") for pod in pods)
        )

    try:
        await eventually(reported, "Degraded NodesUnreachable", timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last status: {status}") from None
    return status


@pytest.mark.timeout(600)
async def test_node_networks_decide_which_nodes_the_operator_dials(
    kube: Client, catalog: Catalog, namespace: str, operators: OperatorProcesses
) -> None:
    """Outside --node-networks a node is never dialled, so it is unreachable; inside, the cluster forms.

    The same run checks that the ConfigMap's defaultZoneSpread reaches the pods and --cluster-domain
    the status endpoint.
    """
    config = await image_config(catalog, images.newest_image())
    await create_operator_config(
        kube, namespace, {"defaultZoneSpread": "required", "maxConcurrentRollouts": "2"}
    )
    flags = [f"--operator-namespace={namespace}", "--cluster-domain=corp.example"]
    outside = operators.start("outside", flags=flags, node_networks="10.0.0.0/8")
    begun = time.monotonic()
    await create_cluster(kube, namespace, NAME, config, shards=1, replicas=0)

    async def one_pod_ready() -> bool:
        pods = await owned_pods(kube, namespace, NAME)
        conditions = [(pod.get("status") or {}).get("conditions") for pod in pods]
        return len(pods) == 1 and (find_condition(conditions[0], "Ready") or {}).get("status") == "True"

    await eventually(one_pod_ready, "the cluster's pod Ready", 120)
    (pod,) = await owned_pods(kube, namespace, NAME)
    pod_name, pod_ip = pod["metadata"]["name"], pod["status"]["podIP"]
    status = await unreachable_condition(kube, namespace, [pod_name], 120)
    unreachable_after = time.monotonic() - begun
    assert status["state"] == "Creating", status
    assert status["endpoint"] == f"{NAME}-client.{namespace}.svc.corp.example:{VALKEY_PORT}", status
    assert not any(node.get("nodeId") for node in status.get("nodes", [])), status
    spreads = pod["spec"]["topologySpreadConstraints"]
    zone_spread = [c for c in spreads if c["topologyKey"] == "topology.kubernetes.io/zone"]
    assert "DoNotSchedule" in {c["whenUnsatisfiable"] for c in zone_spread}, spreads

    # The node never heard from the operator: the only AUTH it ever served is this test's own
    # connection, and no INFO or CLUSTER command ran (INFO counts itself only after replying).
    admin = await admin_client(kube, namespace, NAME)
    async with admin.connect(pod_ip) as node:
        stats = await node.info("commandstats")
    assert stats.get("cmdstat_auth", "").startswith("calls=1,"), stats
    assert not [name for name in stats if name.startswith(("cmdstat_info", "cmdstat_cluster"))], stats
    assert await outside.stop() == 0, outside.tail()

    inside = operators.start("inside", flags=flags)
    restarted = time.monotonic()
    status = await settled(kube, namespace, NAME, 240)
    active_after = time.monotonic() - restarted
    assert status["endpoint"] == f"{NAME}-client.{namespace}.svc.corp.example:{VALKEY_PORT}", status
    (node_status,) = status["nodes"]
    assert node_status["pod"] == pod_name and node_status["nodeId"], status
    (pod_now,) = await owned_pods(kube, namespace, NAME)
    assert pod_now["metadata"]["uid"] == pod["metadata"]["uid"]
    assert await inside.stop() == 0, inside.tail()
    print(
        f"\nunreachable reported {unreachable_after:.1f}s after create; "
        f"Active {active_after:.1f}s after the restart with 127.0.0.0/8"
    )
