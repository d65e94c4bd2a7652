"""scenario_support's steps on the test bed's process kubelet: the same steps test_real_nodes.py
runs on real kubelets, so that docs/testing.md can set each step's outcome and timing side by side.

The module has a bed of its own (own_bed), since it fails a node. The process kubelet enforces no
memory limit (its containers run in no memory cgroup), so the OOM step is not run here: that is
one of the differences docs/testing.md lists. The chart gets the test bed's values (loopback pod
addresses, an object store on 127.0.0.1), which real nodes do not need.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import own_bed
import pytest
import scenario_support
from chart_support import TEST_BED_VALUES

from valkey_operator.core.client import Client
from valkey_testbed.kubelet import KubeletControl

pytestmark = [pytest.mark.integration]

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES


@pytest.mark.timeout(1200)
async def test_the_charts_operator_through_a_roll_a_node_failure_and_a_restore(
    kubeconfig_path: Path, kubelet: KubeletControl, kube: Client, namespace: str
) -> None:
    nodes = scenario_support.Nodes(
        kind="process kubelet",
        kubeconfig=kubeconfig_path,
        networks=(ipaddress.IPv4Network("127.0.0.0/8"),),
        chart_values=TEST_BED_VALUES,
        store_host="127.0.0.1",
        memory_limits=False,
        fail_node=kubelet.fail_node,
        recover_node=kubelet.recover_node,
    )
    await scenario_support.run(nodes, kube, namespace)
