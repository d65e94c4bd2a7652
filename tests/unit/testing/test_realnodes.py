"""The real nodes' pure parts: addresses, configurations and image archives, without a node."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import tarfile
from pathlib import Path

from valkey_testbed.certs import PKI
from valkey_testbed.realnodes import bed, images, network, scenario
from valkey_testbed.realnodes.build import NodeBinaries
from valkey_testbed.realnodes.node import Node


def test_node_addresses_and_pod_ranges_are_in_the_bridge_range_and_apart() -> None:
    pods = ipaddress.ip_network(network.POD_CIDR)
    taken: set[ipaddress.IPv4Address] = {ipaddress.IPv4Address(network.GATEWAY)}
    for index in range(3):
        address = ipaddress.IPv4Address(network.node_address(index))
        first, last = map(ipaddress.IPv4Address, network.node_range(index))
        assert address in pods and first in pods and last in pods
        assert address not in taken
        taken.add(address)
        hands_out = {ipaddress.IPv4Address(n) for n in range(int(first), int(last) + 1)}
        assert not hands_out & taken, index
        taken |= hands_out


def test_a_pod_gets_no_default_route_no_masquerade_and_the_host_as_gateway(tmp_path: Path) -> None:
    node = Node(tmp_path, 1, NodeBinaries(tmp_path / "bins"), 10250, 10248)
    bridge = node._cni_config()["plugins"][0]  # type: ignore[index]
    assert bridge["bridge"] == network.BRIDGE
    assert bridge["isGateway"] is False and bridge["ipMasq"] is False
    assert "isDefaultGateway" not in bridge
    assert bridge["ipam"]["routes"] == [{"dst": network.SERVICE_CIDR, "gw": network.GATEWAY}]
    assert bridge["ipam"]["ranges"][0][0]["rangeStart"] == "10.244.2.2"


def test_the_kubelet_runs_on_cgroup_v1_in_its_own_cgroup_and_keeps_the_bed_s_images(tmp_path: Path) -> None:
    node = Node(tmp_path, 0, NodeBinaries(tmp_path / "bins"), 10250, 10248)
    config = node._kubelet_config(PKI(tmp_path / "pki"), tmp_path / "c", tmp_path / "k")
    assert config["failCgroupV1"] is False
    assert config["cgroupRoot"] == "/node-1"
    assert config["address"] == network.node_address(0)
    assert config["clusterDNS"] == [network.GATEWAY]
    assert config["imageGCHighThresholdPercent"] == 100  # nothing pulls an image back here
    containerd = node._containerd_config()
    assert "restrict_oom_score_adj = true" in containerd
    assert "netns_mounts_under_state_dir = true" in containerd
    assert f'sandbox = "{images.PAUSE}"' in containerd


def test_coredns_answers_cluster_names_and_forwards_nothing(tmp_path: Path) -> None:
    corefile = bed._corefile(tmp_path / "kubeconfig", 8181)
    assert f"bind {network.GATEWAY}" in corefile
    assert "kubernetes cluster.local" in corefile
    assert "forward" not in corefile


def test_references_are_named_as_containerd_s_cri_names_them() -> None:
    assert images.normalized("valkey/valkey:9.1.2") == "docker.io/valkey/valkey:9.1.2"
    assert images.normalized("valkey-operator:0.1.0") == "docker.io/library/valkey-operator:0.1.0"
    assert images.normalized("docker.io/testbed/pause:1") == "docker.io/testbed/pause:1"
    assert images.normalized("registry.k8s.io/pause:3.10") == "registry.k8s.io/pause:3.10"
    assert images.normalized("localhost/x:1") == "localhost/x:1"


def test_an_image_archive_names_its_image_and_its_digests_hold(tmp_path: Path) -> None:
    layer = images._layer_of({"/usr/local/bin/tool": (b"#!/bin/sh\n", 0o755)}, tmp_path / "layer.tar")
    target = tmp_path / "image.oci.tar"
    images.write_archive(target, "valkey/valkey:9.1.2", [layer], {"Cmd": ["tool"]})
    with tarfile.open(target) as tar:

        def blob(digest: str) -> bytes:
            handle = tar.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}")
            assert handle is not None
            data = handle.read()
            assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
            return data

        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        descriptor = index["manifests"][0]
        assert descriptor["annotations"]["io.containerd.image.name"] == "docker.io/valkey/valkey:9.1.2"
        manifest = json.loads(blob(descriptor["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        (layer_descriptor,) = manifest["layers"]
        blob(layer_descriptor["digest"])
        assert config["rootfs"]["diff_ids"] == [layer_descriptor["digest"]]  # uncompressed: digest is diff ID
        assert config["config"]["Cmd"] == ["tool"]
        with tarfile.open(layer) as layer_tar:
            member = layer_tar.getmember("usr/local/bin/tool")
            assert member.mode == 0o755
            assert {"usr", "usr/local", "usr/local/bin"} <= set(layer_tar.getnames())


def test_the_kubernetes_service_endpoint_is_the_forwarder_on_the_gateway() -> None:
    slice_ = bed._kubernetes_endpoints(6443)
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "kubernetes"  # type: ignore[index]
    assert slice_["endpoints"] == [{"addresses": [network.GATEWAY], "conditions": {"ready": True}}]
    assert slice_["ports"] == [{"name": "https", "port": 6443, "protocol": "TCP"}]


SCENARIO_OUTPUT = """\
---------------------------- Captured stdout call -----------------------------
[real nodes] helm install (--wait): 7.1s
scenario on real nodes:
  helm install (--wait)                       7.1s
  primary OOM-killed: to Active 6/6           6.9s  killed at 1.0s; replica promoted at 3.4s
  backup to the object store                  1.8s  9677 keys
PASSED tests/e2e/test_real_nodes.py::test_the_charts_operator
scenario on process kubelet:
  helm install (--wait)         6.8s
  backup to the object store    1.8s  8526 keys
  restore: create to Active     7.2s  Verified
"""


def test_the_scenario_tables_are_read_from_pytests_output() -> None:
    tables = scenario.parse_tables(SCENARIO_OUTPUT)
    assert list(tables) == ["real nodes", "process kubelet"]
    assert tables["real nodes"]["primary OOM-killed: to Active 6/6"] == (
        6.9,
        "killed at 1.0s; replica promoted at 3.4s",
    )
    assert tables["real nodes"]["helm install (--wait)"] == (7.1, "")
    assert "PASSED tests/e2e/test_real_nodes.py::test_the_charts_operator" not in tables["real nodes"]
    assert list(tables["process kubelet"]) == [
        "helm install (--wait)",
        "backup to the object store",
        "restore: create to Active",
    ]


def test_the_side_by_side_table_keeps_real_nodes_order_and_marks_steps_one_side_skipped() -> None:
    lines = scenario.side_by_side(scenario.parse_tables(SCENARIO_OUTPUT)).splitlines()
    assert lines[0].split() == ["step", "real", "process", "on", "real", "nodes"]
    assert [line.split("  ")[0].strip() for line in lines[1:]] == [
        "helm install (--wait)",
        "primary OOM-killed: to Active 6/6",
        "backup to the object store",
        "restore: create to Active",
    ]
    assert re.search(r"  7\.1s\s+6\.8s\s*$", lines[1]), lines[1]
    assert re.search(r"  6\.9s\s+-  killed at 1\.0s; replica promoted at 3\.4s$", lines[2]), lines[2]
    assert re.search(r"^restore: create to Active\s+-\s+7\.2s\s*$", lines[4]), lines[4]
