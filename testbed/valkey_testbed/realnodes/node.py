"""One real node: its containerd and its kubelet, each with its own directories, ports and cgroup.

Several nodes share this machine, so nothing of one may touch another's:
containerd gets its own root, state, sockets and runc root (NRI off: its
socket path is fixed); the kubelet its own root directory, ports, serving
certificate and `cgroupRoot` (/<node name> in every v1 hierarchy, made
here, since the kubelet insists it exists). The kubelet authenticates to the
API server as `system:node:<name>` (the Node authorizer and NodeRestriction
apply, as on any cluster) and serves the API server over TLS on the node's
address on the bridge.

`fail` is a node failure: the kubelet and containerd are killed and so is
every process in the node's cgroups (its containers and their shims), as
when a machine loses power; its disk (root directories, volumes) stays, and
`start` brings it back.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import attrs
import yaml

from valkey_testbed import processes
from valkey_testbed.certs import PKI
from valkey_testbed.kubelet.kubelet import node_name, zone_of
from valkey_testbed.realnodes import credentials, network
from valkey_testbed.realnodes.build import NodeBinaries

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd")
PAUSE_IMAGE = "docker.io/testbed/pause:1"
CLUSTER_DOMAIN = "cluster.local"


@attrs.frozen
class Node:
    """Node `index` of a real-nodes bed rooted at state_dir."""

    state_dir: Path
    index: int
    bins: NodeBinaries
    kubelet_port: int
    healthz_port: int

    @property
    def name(self) -> str:
        return node_name(self.index)

    @property
    def zone(self) -> str:
        return zone_of(self.index)

    @property
    def address(self) -> str:
        return network.node_address(self.index)

    @property
    def directory(self) -> Path:
        return self.state_dir / "nodes" / self.name

    @property
    def socket(self) -> Path:
        return self.directory / "containerd" / "state" / "containerd.sock"

    @property
    def cgroup(self) -> str:
        """The node's cgroup (the same path in every v1 hierarchy): its pods, containers and shims."""
        return f"/{self.name}"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    # -- configuration ------------------------------------------------------------------------

    def write_config(self, pki: PKI, kubeconfig_server: str) -> None:
        """containerd's config, the CNI network, the kubelet's config, credentials and cgroups."""
        for sub in ("containerd/root", "containerd/state", "cni", "kubelet", "ipam"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        (self.directory / "containerd" / "config.toml").write_text(self._containerd_config())
        (self.directory / "cni" / "10-testbed.conflist").write_text(json.dumps(self._cni_config(), indent=2))
        client = credentials.node_client(pki, self.directory / "pki", self.name)
        serving = credentials.node_serving(pki, self.directory / "pki", self.name, self.address)
        credentials.write_kubeconfig(
            self.directory / "kubeconfig", kubeconfig_server, pki.ca.cert, client.cert, client.key
        )
        # The kubelet copies the host's resolv.conf search list into every pod; the host's own list
        # means nothing inside the bed, so it is given none.
        (self.directory / "resolv.conf").write_text("")
        config = self._kubelet_config(pki, serving.cert, serving.key)
        (self.directory / "kubelet.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        for controller in CGROUP_CONTROLLERS:
            (CGROUP_ROOT / controller / self.name).mkdir(exist_ok=True)
        # A new v1 cpuset has no CPUs and no memory nodes, and takes no task until given some.
        for key in ("cpuset.cpus", "cpuset.mems"):
            (CGROUP_ROOT / "cpuset" / self.name / key).write_text((CGROUP_ROOT / "cpuset" / key).read_text())

    def _containerd_config(self) -> str:
        root, state = self.directory / "containerd" / "root", self.directory / "containerd" / "state"
        return f"""\
version = 3
root = "{root}"
state = "{state}"

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{self.socket}.ttrpc"

[plugins]
  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{PAUSE_IMAGE}"

  [plugins.'io.containerd.cri.v1.runtime']
    # Pods' network namespaces are files under this node's state, not the host's /var/run/netns.
    netns_mounts_under_state_dir = true
    # Root here lacks CAP_SYS_RESOURCE: no process may lower its oom_score_adj, so the kubelet's
    # negative scores (-998 for the sandbox, -997 for Guaranteed pods) are clamped to ours (0).
    restrict_oom_score_adj = true

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "{self.bins.path("runc")}"
          Root = "{state}/runc"
          SystemdCgroup = false

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{self.bins.cni_dir}"]
      conf_dir = "{self.directory / "cni"}"

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
"""

    def _cni_config(self) -> dict[str, object]:
        first, last = network.node_range(self.index)
        return {
            "cniVersion": "1.0.0",
            "name": "testbed",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": network.BRIDGE,
                    # The gateway address is the host's, set on the bridge by network.up; pods get no
                    # default route: only the pod range (on link) and the Service range (via the host).
                    "isGateway": False,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(self.directory / "ipam"),
                        "ranges": [
                            [{"subnet": network.POD_CIDR, "rangeStart": first, "rangeEnd": last,
                              "gateway": network.GATEWAY}]
                        ],
                        "routes": [{"dst": network.SERVICE_CIDR, "gw": network.GATEWAY}],
                    },
                }
            ],
        }  # fmt: skip

    def _kubelet_config(self, pki: PKI, cert: Path, key: Path) -> dict[str, object]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This machine has cgroup v1 (hybrid): the kubelet refuses it since 1.35 unless told.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup,
            "address": self.address,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.healthz_port,
            "tlsCertFile": str(cert),
            "tlsPrivateKeyFile": str(key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(pki.ca.cert)},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDomain": CLUSTER_DOMAIN,
            "clusterDNS": [network.GATEWAY],
            "resolvConf": str(self.directory / "resolv.conf"),
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "failSwapOn": False,
            "serializeImagePulls": False,
            # Images come from the bed's store, never from a registry: nothing may collect them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            # The machine's disk is shared with everything else on it: evict only when truly short.
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "2%",
                "imagefs.available": "2%",
            },
            "nodeStatusReportFrequency": "10s",
            "syncFrequency": "10s",
            "fileCheckFrequency": "0s",
            "staticPodPath": "",
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
            "localStorageCapacityIsolation": True,
            "containerLogMaxSize": "10Mi",
            "shutdownGracePeriod": "0s",
        }

    # -- processes ----------------------------------------------------------------------------

    def start_containerd(self) -> processes.ProcessRecord:
        env = dict(os.environ)
        env["PATH"] = f"{self.bins.bin_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        config = self.directory / "containerd" / "config.toml"
        record = processes.start(
            f"containerd-{self.name}",
            [self.bins.path("containerd"), "--config", config, "--log-level", "warn"],
            self.logs / f"containerd-{self.name}.log",
            env=env,
        )
        # containerd places its shims in the cgroup it runs in: the node's, so `fail` finds them.
        _join_cgroup(record, self.cgroup)
        return record

    def start_kubelet(self) -> processes.ProcessRecord:
        record = processes.start(
            f"kubelet-{self.name}",
            [
                self.bins.path("kubelet"),
                f"--config={self.directory / 'kubelet.yaml'}",
                f"--kubeconfig={self.directory / 'kubeconfig'}",
                f"--root-dir={self.directory / 'kubelet'}",
                f"--cert-dir={self.directory / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.address}",
                f"--node-labels=topology.kubernetes.io/zone={self.zone},topology.kubernetes.io/region=testbed",
                "--v=1",
            ],
            self.logs / f"kubelet-{self.name}.log",
        )
        _join_cgroup(record, self.cgroup)
        return record

    def ctr(self, *args: str) -> list[str]:
        """argv of `ctr` against this node's containerd, in the CRI's namespace."""
        return [str(self.bins.path("ctr")), "--address", str(self.socket), "--namespace", "k8s.io", *args]

    def cgroup_pids(self) -> list[int]:
        """Every process in the node's cgroup tree (kubelet, containerd, shims, containers)."""
        found: set[int] = set()
        for directory, _, files in os.walk(CGROUP_ROOT / "pids" / self.name):
            if "cgroup.procs" in files:
                text = (Path(directory) / "cgroup.procs").read_text()
                found.update(int(pid) for pid in text.split())
        return sorted(found)

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL everything in the node's cgroups until none is left (a node losing power)."""
        deadline = time.monotonic() + timeout
        while pids := self.cgroup_pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: processes {pids} survive SIGKILL")
            time.sleep(0.05)

    def cgroups(self) -> list[Path]:
        """The node's cgroup directories that exist, in every hierarchy."""
        return [CGROUP_ROOT / controller / self.name for controller in CGROUP_CONTROLLERS
                if (CGROUP_ROOT / controller / self.name).exists()]  # fmt: skip

    def remove_cgroups(self) -> None:
        """Remove the node's (empty) cgroups, deepest first."""
        for controller in CGROUP_CONTROLLERS:
            top = CGROUP_ROOT / controller / self.name
            for directory, _, _ in sorted(os.walk(top), key=lambda entry: len(entry[0]), reverse=True):
                with contextlib.suppress(OSError):
                    os.rmdir(directory)


def _join_cgroup(record: processes.ProcessRecord, path: str) -> None:
    """Move the process into path in every v1 hierarchy (its children, started later, follow); stop
    it if that fails, so no process of a node runs outside the node's cgroup."""
    try:
        for controller in CGROUP_CONTROLLERS:
            (CGROUP_ROOT / controller / path.lstrip("/") / "cgroup.procs").write_text(str(record.pid))
    except OSError:
        processes.stop([record])
        raise
