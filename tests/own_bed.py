"""A test bed of the module's own: a control plane and a kubelet with the session bed's nodes.

For the modules that change what every test on the shared bed would meet (fail or taint its nodes,
replace a CRD, run a cluster-wide operator). On the shared bed they had to stop every other module
(testbed_exclusive); on their own they run beside the rest, for the price of a second bed's start
(about 15 s) and its memory. A module binds the three fixtures to the names of the test bed
plugin's fixtures, which they then override for that module only:

    import own_bed

    kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES

Everything built on them (kube_api, kube, namespace, the chart and operator fixtures) then talks
to the module's bed. Images come from the machine's shared image store, so nothing is loaded twice.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.sessionbed import KUBELET_ARGS


@contextlib.contextmanager
def bed(nodes: int) -> Iterator[ControlPlane]:
    """A control plane (with a kubelet of `nodes` nodes, if any) from the session build's binaries,
    up for the block, then stopped and removed."""
    state_dir = Path(tempfile.mkdtemp(prefix="valkey-operator-own-bed-"))
    plane = ControlPlane(state_dir, nodes=nodes, kubelet_args=KUBELET_ARGS)
    try:
        plane.up()
        yield plane
    finally:
        plane.down()
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def kube_control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """The module's own bed, stopped after its last test."""
    with bed(request.config.getoption("--testbed-nodes")) as plane:
        yield plane


@pytest.fixture(scope="module")
def kubeconfig_path(kube_control_plane: ControlPlane) -> Path:
    return kube_control_plane.kubeconfig


@pytest.fixture(scope="module")
def kubelet(kube_control_plane: ControlPlane) -> KubeletControl:
    return KubeletControl(kube_control_plane.state_dir)


FIXTURES = (kube_control_plane, kubeconfig_path, kubelet)
"""What a module binds to the plugin's fixture names:
`kube_control_plane, kubeconfig_path, kubelet = own_bed.FIXTURES`."""
