"""A short seeded chaos run in CI: faults, spec changes and client load at once, zero violations.

The same code as `python -m valkey_testbed chaos --seed 5 --minutes 2`
(testbed/valkey_testbed/chaos), inside the session's control plane and this
test's namespace: the operator as a real process behind a cuttable proxy, a
TLS 3x1 cluster, the data checker, the valkey-py cluster client and
valkey-benchmark as the cluster's ACL user. It fails nodes, so it runs alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import own_bed
import pytest
from cluster_support import require_image

from valkey_testbed import images
from valkey_testbed.chaos.run import Options, chaos
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.kubelet import KubeletControl

kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES  # a test bed of this module's own

# Fails nodes: runs on a test bed of its own.
pytestmark = [pytest.mark.integration]

SEED = 5
MINUTES = 2.0


@pytest.mark.timeout(900)
async def test_a_seeded_chaos_run_violates_no_invariant(
    kube_control_plane: ControlPlane, kubelet: KubeletControl, namespace: str, tmp_path: Path
) -> None:
    require_image(images.tls_image())
    endpoints = kube_control_plane.endpoints()
    assert endpoints is not None
    options = Options(seed=SEED, minutes=MINUTES, log_dir=tmp_path)
    summary = await chaos(
        kube_control_plane.kubeconfig, endpoints.apiserver_port, kubelet, namespace, options
    )
    print(f"[chaos] {json.dumps(summary)}")
    assert summary["violations"] == [], json.dumps(summary["violations"], indent=2)
    assert sum(summary["faults"].values()) >= 3, summary["faults"]
    assert sum(summary["changes"].values()) >= 2, summary["changes"]
    assert summary["acknowledgedWrites"] > 1000, summary
    assert summary["lost"] == 0
    assert summary["convergenceSeconds"] is not None
    # The worst shard's longest gap is the largest of the per-shard gaps, whatever the faults were.
    gaps = summary["longestUnavailabilityPerShard"]
    assert summary["worstShardUnavailabilitySeconds"] == max(gaps.values(), default=0.0), summary
    assert summary["statusComparisons"] >= 2, summary  # the status was compared with the nodes at all
