"""--testbed-state-dir on a running bed with fewer nodes than the session asks for fails at once,
naming the count found (it waited 120 s for nodes the running kubelet never registers)."""

from __future__ import annotations

import time

import pytest

from valkey_testbed import plugin
from valkey_testbed.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_a_bed_with_fewer_nodes_than_asked_is_named_at_once(kube_control_plane: ControlPlane) -> None:
    started = time.monotonic()
    with pytest.raises(pytest.UsageError) as raised:
        plugin._start_plane(str(kube_control_plane.state_dir), plugin.NODES + 2)
    message = str(raised.value)
    assert f"holds a test bed with {plugin.NODES} node(s) (node-1, node-2, node-3)" in message, message
    assert f"asks for {plugin.NODES + 2}: pass --testbed-nodes {plugin.NODES}" in message, message
    assert time.monotonic() - started < 10
    assert kube_control_plane.running()  # untouched
