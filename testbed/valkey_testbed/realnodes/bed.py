"""A test bed whose nodes are real: the control plane, then real kubelets on containerd.

`RealNodesBed.up` brings up, in order: the bridge network with its blackholes
(network.py); the control plane (the Node authorizer and NodeRestriction on,
the EndpointSlice controller on, the API server also answering on the bridge
through `forward`); kube-proxy (iptables mode, NodePorts on the bridge only)
and CoreDNS (on the gateway address, the nodes' cluster DNS), both on the
host as the nodes' host-network daemons would be; then each node's
containerd, its images, and its kubelet; then the local-path provisioner.
`down` undoes all of it, by pid and by mount, and leaves the host's network as
it found it.

One real-nodes bed runs on a machine at a time (the bridge, the ranges and
kube-proxy's rules are the host's): `up` takes a lock file naming its state dir.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from valkey_testbed import processes
from valkey_testbed.controlplane import CONTROLLERS, ControlPlane
from valkey_testbed.kubelet.launch import nodes_ready
from valkey_testbed.kubelet.runc import mount_points_under
from valkey_testbed.realnodes import build, images, network
from valkey_testbed.realnodes.node import Node

Progress = Callable[[str], None]

LOCK = Path("/run/valkey-testbed-realnodes.lock")
STATE_FILE = "realnodes.json"
CONTROLLERS_WITH_ENDPOINTS = (*CONTROLLERS, "endpointslice-controller")


class RealNodesError(RuntimeError):
    """The real nodes did not come up; the message points at the logs."""


@attrs.define
class RealNodesBed:
    state_dir: Path
    nodes: int = 3
    bins: build.NodeBinaries = attrs.field(factory=build.node_binaries)
    plane: ControlPlane = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        pki = self.state_dir / "pki"
        self.plane = ControlPlane(
            self.state_dir,
            authorization_mode="Node,RBAC",
            apiserver_args=(
                "--enable-admission-plugins=NodeRestriction",
                f"--kubelet-client-certificate={pki / 'admin.crt'}",
                f"--kubelet-client-key={pki / 'admin.key'}",
                f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            ),
            controller_manager_args=(f"--controllers={','.join(CONTROLLERS_WITH_ENDPOINTS)}",),
        )

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def _state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    def node(self, index: int) -> Node:
        ports = self._ports()
        return Node(self.state_dir, index, self.bins, ports[f"kubelet-{index}"], ports[f"healthz-{index}"])

    def all_nodes(self) -> list[Node]:
        return [self.node(index) for index in range(self.nodes)]

    # -- state --------------------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self._state_file.read_text()) if self._state_file.exists() else {}
        return found

    def _ports(self) -> dict[str, int]:
        ports: dict[str, int] | None = self._state().get("ports")
        if ports is None:
            ports = {}
            for index in range(self.nodes):
                ports[f"kubelet-{index}"] = processes.free_port()
                ports[f"healthz-{index}"] = processes.free_port()
            self._write(ports=ports)
        return ports

    def _write(self, **fields: object) -> None:
        state = self._state()
        state.update(fields)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._state_file.write_text(json.dumps(state, indent=2))

    def records(self) -> dict[str, processes.ProcessRecord]:
        found: dict[str, dict[str, Any]] = self._state().get("processes") or {}
        return {name: processes.ProcessRecord(**record) for name, record in found.items()}

    def _record(self, record: processes.ProcessRecord) -> None:
        records = {name: attrs.asdict(value) for name, value in self.records().items()}
        records[record.name] = attrs.asdict(record)
        self._write(processes=records)

    # -- lifecycle ----------------------------------------------------------------------------

    def up(self, progress: Progress = print, timeout: float = 180.0) -> None:
        self._take_lock()
        self._write(nodes=self.nodes)
        try:
            self.bins = build.build(progress)
            archives = images.archives(self.bins, progress)
            network.up(self.nodes)
            self.plane.up(timeout)
            self._start_host_daemons(progress)
            for node in self.all_nodes():
                self._start_node(node, archives, progress)
            deadline = time.monotonic() + timeout
            names = [node.name for node in self.all_nodes()]
            while not nodes_ready(self.plane.get, len(names)):
                self._check_alive()
                if time.monotonic() > deadline:
                    raise RealNodesError(f"nodes {names} not Ready in {timeout:.0f}s; see {self.logs}")
                time.sleep(0.5)
            self._await_dns(deadline)
            self.plane.start_provisioner(names)
            progress(f"real nodes ready: {', '.join(names)} (kubeconfig {self.kubeconfig})")
        except BaseException:
            self.down()
            raise

    def _await_dns(self, deadline: float) -> None:
        """CoreDNS answers once its kubernetes plugin has read Services and EndpointSlices."""
        url = f"http://127.0.0.1:{self._state()['coredns_ready']}/ready"
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return
            self._check_alive()
            if time.monotonic() > deadline:
                raise RealNodesError(f"CoreDNS not ready; see {self.logs / 'coredns.log'}")
            time.sleep(0.2)

    def _take_lock(self) -> None:
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            holder = Path(LOCK.read_text().strip())
            if holder != self.state_dir.resolve() and (holder / STATE_FILE).exists():
                raise RealNodesError(f"another real-nodes bed runs from {holder}: `down` it first")
        LOCK.write_text(str(self.state_dir.resolve()))

    def _start_host_daemons(self, progress: Progress) -> None:
        endpoints = self.plane.endpoints()
        assert endpoints is not None
        port = endpoints.apiserver_port
        forward = [
            sys.executable,
            "-m",
            "valkey_testbed.realnodes.forward",
            network.GATEWAY,
            str(port),
            str(port),
        ]
        self._record(processes.start("apiserver-forward", forward, self.logs / "apiserver-forward.log"))
        self.plane.create(
            _kubernetes_endpoints(port), "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
        )
        proxy_ports = [processes.free_port(), processes.free_port()]
        self._record(
            processes.start(
                "kube-proxy",
                [
                    self.bins.path("kube-proxy"),
                    f"--kubeconfig={self.kubeconfig}",
                    "--proxy-mode=iptables",
                    f"--cluster-cidr={network.POD_CIDR}",
                    f"--hostname-override={self.node(0).name}",
                    f"--nodeport-addresses={network.POD_CIDR}",
                    "--iptables-localhost-nodeports=false",
                    # The machine's conntrack settings are not ours to change.
                    "--conntrack-max-per-core=0",
                    "--conntrack-tcp-timeout-established=0",
                    "--conntrack-tcp-timeout-close-wait=0",
                    f"--healthz-bind-address=127.0.0.1:{proxy_ports[0]}",
                    f"--metrics-bind-address=127.0.0.1:{proxy_ports[1]}",
                    "--v=1",
                ],
                self.logs / "kube-proxy.log",
            )
        )
        corefile = self.state_dir / "Corefile"
        ready_port = processes.free_port()
        corefile.write_text(_corefile(self.kubeconfig, ready_port))
        self._record(
            processes.start(
                "coredns", [self.bins.path("coredns"), "-conf", corefile], self.logs / "coredns.log"
            )
        )
        self._write(coredns_ready=ready_port)
        progress(f"kube-proxy and CoreDNS ({network.GATEWAY}:53) started")

    def _start_node(self, node: Node, archives: list[images.Archive], progress: Progress) -> None:
        started = time.monotonic()
        node.write_config(self.plane.pki, self.plane.endpoints().server)  # type: ignore[union-attr]
        self._record(node.start_containerd())
        self._await_containerd(node)
        for archive in archives:
            images.import_into(node.ctr, archive)
        self._record(node.start_kubelet())
        seconds = time.monotonic() - started
        progress(f"{node.name}: containerd, {len(archives)} images and the kubelet in {seconds:.1f}s")

    def _check_alive(self) -> None:
        dead = [name for name, record in self.records().items() if not record.alive()]
        if dead:
            raise RealNodesError(f"{', '.join(dead)} exited; see {self.logs}")

    def fail_node(self, index: int) -> None:
        """A node failure: its kubelet, containerd, shims and containers killed at once."""
        self.node(index).kill_all()

    def recover_node(self, index: int) -> None:
        """Bring a failed node back: containerd first, then the kubelet (pods restart as after a reboot)."""
        node = self.node(index)
        self._record(node.start_containerd())
        self._await_containerd(node)
        self._record(node.start_kubelet())

    def _await_containerd(self, node: Node, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not _socket_answers(node):
            if not self.records()[f"containerd-{node.name}"].alive():
                raise RealNodesError(f"{node.name}: containerd exited; see {self.logs}")
            if time.monotonic() > deadline:
                raise RealNodesError(
                    f"{node.name}: containerd does not answer after {timeout:.0f}s; see {self.logs}"
                )
            time.sleep(0.1)

    def down(self) -> list[str]:
        """Stop and remove everything of the bed; what is still on the host after that (nothing, when
        all went well) is returned for the caller to report."""
        records = self.records()
        count = int(self._state().get("nodes", self.nodes))
        nodes = [self.node(index) for index in range(count)] if self._state_file.exists() else []
        for node in nodes:
            with contextlib.suppress(TimeoutError):
                node.kill_all()
        processes.stop(list(records.values()))
        if "kube-proxy" in records and self.bins.path("kube-proxy").exists():
            subprocess.run([self.bins.path("kube-proxy"), "--cleanup"], capture_output=True, check=False)
        self.plane.down()
        # Deepest first: kubelet tmpfs volumes, container overlays, pods' netns files.
        for point in sorted(mount_points_under(self.state_dir / "nodes"), reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        shutil.rmtree(self.state_dir / "nodes", ignore_errors=True)
        network.down()
        for node in nodes:
            node.remove_cgroups()
        self._state_file.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if Path(LOCK.read_text().strip()) == self.state_dir.resolve():
                LOCK.unlink()
        return _leftovers(self.state_dir, records, nodes)


def _leftovers(state_dir: Path, records: dict[str, processes.ProcessRecord], nodes: list[Node]) -> list[str]:
    """What of a bed is still on the host: its processes, mounts, the nodes' cgroups, the network,
    a lock naming its state dir."""
    found = [f"process {name} ({record.pid})" for name, record in records.items() if record.alive()]
    found += [f"mount {point}" for point in mount_points_under(state_dir)]
    found += [f"cgroup {path}" for node in nodes for path in node.cgroups()]
    found += network.leftovers()
    with contextlib.suppress(FileNotFoundError):
        if Path(LOCK.read_text().strip()) == state_dir.resolve():
            found.append(f"lock {LOCK}")
    return found


def _socket_answers(node: Node) -> bool:
    done = subprocess.run(node.ctr("version"), capture_output=True, check=False)
    return done.returncode == 0


def _kubernetes_endpoints(port: int) -> dict[str, object]:
    """The `kubernetes` Service's endpoint (the API server's own reconciler is off in every bed)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {
                "kubernetes.io/service-name": "kubernetes",
                "endpointslice.kubernetes.io/managed-by": "testbed.valkey.io",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [network.GATEWAY], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }


def _corefile(kubeconfig: Path, ready_port: int) -> str:
    """Cluster names only: no `forward`, so a name outside the cluster is never asked of anyone."""
    return f"""\
.:53 {{
    bind {network.GATEWAY}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} testbed
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
    loop
}}
"""
