"""Run a real Kubernetes control plane as local processes on 127.0.0.1.

etcd (data in /dev/shm, no fsync), kube-apiserver (real TLS, client-cert
auth, RBAC, default admission plugins including ServiceAccount and
PodSecurity), kube-controller-manager with the controllers a pod-running
cluster needs, and kube-scheduler. State lives in one directory: the PKI,
`kubeconfig`, logs, and `state.json` with what runs, so `down` can stop
exactly our processes, by pid, from any later process. With nodes, the
local-path-provisioner runs too (localpath.py: StorageClass `local-path`), and the API server
hands out nodePorts from a slice of the range no other bed on the machine holds
(serviceproxy/noderange.py), since every bed's nodes share the addresses 127.0.100.N.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import attrs
import yaml

from valkey_testbed import audit, localpath, processes
from valkey_testbed.build import Binaries, binaries
from valkey_testbed.certs import PKI, write_pki
from valkey_testbed.kubelet import launch as kubelet_launch
from valkey_testbed.kubelet.kubelet import node_names
from valkey_testbed.serviceproxy import noderange

# Services exist as objects, but nothing ever dials a ClusterIP (TESTBED.md).
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

# The controllers a pod-running cluster needs. Endpoint(slice) controllers are
# off: the API server rejects loopback pod IPs in endpoints anyway (the service
# proxy computes NodePort and LoadBalancer endpoints from pods: serviceproxy/endpoints.py).
CONTROLLERS = (
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "disruption-controller",
    "pod-garbage-collector-controller",
    "node-lifecycle-controller",
    # Storage (localpath.py): the real PV controller binds claims, protection finalizers keep a claim
    # and its volume while in use, the expander resizes claims whose StorageClass allows it.
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-expander-controller",
    # The chart's ClusterRoles that fold the five kinds into the built-in view, edit and admin roles.
    "clusterrole-aggregation-controller",
)
NODE_MONITOR_GRACE_PERIOD = "15s"


PORT_ATTEMPTS = 3
"""Starts tried when a component finds its port taken (the race between picking a port and binding it)."""
ADDRESS_IN_USE = "address already in use"


class ControlPlaneError(RuntimeError):
    """The control plane did not come up; the message points at the logs."""


@attrs.frozen
class Endpoints:
    etcd_client_port: int
    etcd_peer_port: int
    apiserver_port: int
    controller_manager_port: int
    scheduler_port: int

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"


@attrs.define
class ControlPlane:
    """One local control plane rooted at state_dir.

    `apiserver_args` are appended to kube-apiserver's command line, after our
    own flags (so they win), e.g. ("--watch-cache=false",) for a plane whose
    watches are served straight from etcd.

    `nodes` > 0 also runs the process kubelet with that many nodes
    (valkey_testbed.kubelet), passing it `kubelet_args`.

    `controller_manager_args` are appended to kube-controller-manager's command line in the same way
    (real nodes turn the EndpointSlice controller on: their pod addresses are not loopback).

    `bins` defaults to the selected Kubernetes release's binaries (kubeversion.selected());
    `state.json` records their directory, and `up` refuses to reuse a running plane of another.
    """

    state_dir: Path
    bins: Binaries = attrs.field(factory=binaries)
    apiserver_args: tuple[str, ...] = ()
    nodes: int = 0
    kubelet_args: tuple[str, ...] = ()
    controller_manager_args: tuple[str, ...] = ()
    authorization_mode: str = "RBAC"
    """kube-apiserver's --authorization-mode (a list flag: apiserver_args would add to it, not replace it)."""

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def pki(self) -> PKI:
        return PKI(self.state_dir / "pki")

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (audit.py: service accounts' requests, pod deletions)."""
        return self.logs / "audit.log"

    @property
    def _state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def etcd_data(self) -> Path:
        """etcd data in RAM: tests need speed, not durability."""
        digest = hashlib.sha256(str(self.state_dir.resolve()).encode()).hexdigest()[:12]
        return Path("/dev/shm") / f"valkey-operator-etcd-{digest}"

    # -- state -----------------------------------------------------------------

    def records(self) -> list[processes.ProcessRecord]:
        if not self._state_file.exists():
            return []
        state = json.loads(self._state_file.read_text())
        return [processes.ProcessRecord(**record) for record in state.get("processes", [])]

    def endpoints(self) -> Endpoints | None:
        if not self._state_file.exists():
            return None
        state = json.loads(self._state_file.read_text())
        return Endpoints(**state["endpoints"]) if "endpoints" in state else None

    def kubelet_record(self) -> processes.ProcessRecord | None:
        """The kubelet process, kept apart from `records()` (the control plane's own processes)."""
        if not self._state_file.exists():
            return None
        record = json.loads(self._state_file.read_text()).get("kubelet")
        return processes.ProcessRecord(**record) if record else None

    def _save(
        self,
        endpoints: Endpoints,
        records: list[processes.ProcessRecord],
        kubelet: processes.ProcessRecord | None = None,
    ) -> None:
        state = {
            "endpoints": attrs.asdict(endpoints),
            "processes": [attrs.asdict(record) for record in records],
            "binDir": str(self.bins.bin_dir),
        }
        kubelet = kubelet or self.kubelet_record()
        if kubelet is not None:
            state["kubelet"] = attrs.asdict(kubelet)
        self._state_file.write_text(json.dumps(state, indent=2))

    def node_port_range(self) -> str | None:
        """The nodePort range ("30173-30345") this bed's API server hands out, if it claimed a slice."""
        return noderange.held(self.state_dir)

    def recorded_bin_dir(self) -> Path | None:
        """The binaries directory (so the Kubernetes release) the running plane was started from."""
        if not self._state_file.exists():
            return None
        recorded = json.loads(self._state_file.read_text()).get("binDir")
        return Path(recorded) if recorded else None

    def running(self) -> bool:
        records = self.records()
        return bool(records) and all(record.alive() for record in records) and self.ready()

    # -- lifecycle -------------------------------------------------------------

    def up(self, timeout: float = 120.0) -> None:
        """Start everything and return once the API server is ready (reuses a running one)."""
        if self.running():
            recorded = self.recorded_bin_dir()
            if recorded is not None and recorded != self.bins.bin_dir:
                raise ControlPlaneError(
                    f"{self.state_dir} runs the control plane of {recorded}, not {self.bins.bin_dir}: "
                    "run `down` first"
                )
            self._ensure_provisioner()
            self._ensure_kubelet(timeout)
            return
        self.down()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        needed = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        for name in needed + ([localpath.BINARY] if self.nodes else []):
            if not self.bins.path(name).exists():
                raise ControlPlaneError(
                    f"{self.bins.path(name)} is missing: run `python -m valkey_testbed build`"
                )
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start(timeout)
                return
            except ControlPlaneError as exc:
                # free_port() only finds a port free at that moment: with test beds starting in
                # parallel, another process may bind it before ours does. Pick new ports then.
                if ADDRESS_IN_USE not in str(exc) or attempt == PORT_ATTEMPTS:
                    raise

    def _start(self, timeout: float) -> None:
        """Start every component on fresh ports; everything started is stopped on any failure."""
        pki = write_pki(self.state_dir / "pki", SERVICE_IP)
        endpoints = Endpoints(*(processes.free_port() for _ in range(5)))
        self._write_kubeconfig(endpoints, pki)
        records: list[processes.ProcessRecord] = []
        try:
            records.append(self._start_etcd(endpoints))
            self._save(endpoints, records)
            node_ports = noderange.claim(self.state_dir) if self.nodes else None
            records.append(self._start_apiserver(endpoints, pki, node_ports))
            if node_ports:
                noderange.hold(self.state_dir, records[-1])
            self._save(endpoints, records)
            self._poll(self.ready, records, timeout, "kube-apiserver /readyz")
            records.append(self._start_controller_manager(endpoints, pki))
            records.append(self._start_scheduler(endpoints))
            self._save(endpoints, records)
            self._wait_component_healthy(endpoints.controller_manager_port, records, timeout)
            self._wait_component_healthy(endpoints.scheduler_port, records, timeout)
            if self.nodes:
                records.append(self._start_provisioner(endpoints, node_names(self.nodes)))
                self._save(endpoints, records)
            self._ensure_kubelet(timeout)
        except BaseException:
            self.down()
            raise

    def attach(self, timeout: float = 60.0) -> None:
        """Use the control plane another process started in this state dir: wait until it serves,
        never start or stop anything (pytest-xdist workers share the controller's)."""
        deadline = time.monotonic() + timeout
        while not self.running():
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"no control plane runs in {self.state_dir}; see {self.logs}")
            time.sleep(0.5)

    def __enter__(self) -> ControlPlane:
        """`with ControlPlane(...) as plane:` brings it up and always takes it down."""
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def down(self) -> None:
        """Stop every process this state dir started, by pid, and drop etcd's data."""
        kubelet_launch.stop(self.state_dir, self.kubelet_record())
        # One at a time, newest first: an API server whose etcd is already gone
        # hangs in shutdown until SIGKILL instead of exiting at once.
        for record in reversed(self.records()):
            processes.stop([record])
        if self._state_file.exists():
            self._state_file.unlink()
        shutil.rmtree(self.etcd_data, ignore_errors=True)
        noderange.release(self.state_dir)

    def _ensure_provisioner(self) -> None:
        """Start the provisioner in a running plane that lacks it (one an older checkout started)."""
        endpoints = self.endpoints()
        records = self.records()
        if self.nodes and endpoints and not any(r.name == localpath.BINARY for r in records):
            self._save(endpoints, [*records, self._start_provisioner(endpoints, node_names(self.nodes))])

    def _ensure_kubelet(self, timeout: float) -> None:
        """Start the kubelet if nodes are wanted and it is not running; wait for its nodes."""
        if not self.nodes:
            return
        record = self.kubelet_record()
        if record is None or not record.alive():
            log_file = self.logs / "kubelet.log"
            record = kubelet_launch.start(self.state_dir, self.nodes, self.kubelet_args, log_file)
            endpoints = self.endpoints()
            assert endpoints is not None
            self._save(endpoints, self.records(), record)
        self._poll(
            lambda: kubelet_launch.nodes_ready(self.get, self.nodes),
            [*self.records(), record],
            timeout,
            f"{self.nodes} Ready nodes from the kubelet",
        )

    # -- readiness -------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        pki = self.pki
        context = ssl.create_default_context(cafile=str(pki.ca.cert))
        context.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
        return context

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET path on the API server as admin; returns (status, body)."""
        return self._request("GET", path, None, timeout)

    def create(self, obj: dict[str, object], path: str, timeout: float = 5.0) -> None:
        """POST obj to the collection at path as admin; one that already exists is left as it is."""
        status, body = self._request("POST", path, json.dumps(obj).encode(), timeout)
        if status not in (200, 201, 409):
            raise ControlPlaneError(f"creating {path}: HTTP {status}: {body}")

    def _request(self, method: str, path: str, data: bytes | None, timeout: float) -> tuple[int, str]:
        endpoints = self.endpoints()
        if endpoints is None:
            raise ControlPlaneError("control plane is not up")
        request = urllib.request.Request(endpoints.server + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, context=self._ssl_context(), timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def ready(self) -> bool:
        try:
            status, _ = self.get("/readyz", timeout=2.0)
        except (OSError, ControlPlaneError):
            return False
        return status == 200

    def _wait_component_healthy(
        self, port: int, records: list[processes.ProcessRecord], timeout: float
    ) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{port}/healthz", context=context, timeout=2.0
                ) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        self._poll(healthy, records, timeout, f"component on port {port} /healthz")

    def _poll(
        self,
        check: Callable[[], bool],
        records: list[processes.ProcessRecord],
        timeout: float,
        what: str,
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [record.name for record in records if not record.alive()]
            if dead:
                raise ControlPlaneError(
                    f"{', '.join(dead)} exited; see logs in {self.logs}{self._log_tails(dead)}"
                )
            if check():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting for {what}; see logs in {self.logs}")

    def _log_tails(self, names: list[str], lines: int = 15) -> str:
        """The last lines of each named component's log, for an error that outlives the state dir
        (a test's temporary bed is removed with its logs)."""
        tails = []
        for name in names:
            path = self.logs / f"{name}.log"
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                tails.append(f"\n--- last lines of {path.name}:\n" + "\n".join(tail))
        return "".join(tails)

    # -- components ------------------------------------------------------------

    def _write_kubeconfig(self, endpoints: Endpoints, pki: PKI) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "testbed",
                    "cluster": {"server": endpoints.server, "certificate-authority": str(pki.ca.cert)},
                }
            ],
            "users": [
                {
                    "name": "admin",
                    "user": {
                        "client-certificate": str(pki.admin.cert),
                        "client-key": str(pki.admin.key),
                    },
                }
            ],
            "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": "admin"}}],
            "current-context": "testbed",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _start_etcd(self, endpoints: Endpoints) -> processes.ProcessRecord:
        shutil.rmtree(self.etcd_data, ignore_errors=True)
        client = f"http://127.0.0.1:{endpoints.etcd_client_port}"
        peer = f"http://127.0.0.1:{endpoints.etcd_peer_port}"
        return processes.start(
            "etcd",
            [
                self.bins.etcd,
                "--name=testbed",
                f"--data-dir={self.etcd_data}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=testbed={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            self.logs / "etcd.log",
        )

    def _start_apiserver(
        self, endpoints: Endpoints, pki: PKI, node_ports: str | None = None
    ) -> processes.ProcessRecord:
        policy = self.state_dir / "audit-policy.yaml"
        audit.write_policy(policy)
        return processes.start(
            "kube-apiserver",
            [
                self.bins.kube_apiserver,
                f"--etcd-servers=http://127.0.0.1:{endpoints.etcd_client_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={endpoints.apiserver_port}",
                f"--cert-dir={self.state_dir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.apiserver.cert}",
                f"--tls-private-key-file={pki.apiserver.key}",
                f"--client-ca-file={pki.ca.cert}",
                # Aggregation-layer settings nothing uses, set so components stop warning about them.
                f"--requestheader-client-ca-file={pki.ca.cert}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki.service_account_pub}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                *([f"--service-node-port-range={node_ports}"] if node_ports else []),
                f"--authorization-mode={self.authorization_mode}",
                "--endpoint-reconciler-type=none",
                # Logs, exec and port-forward go to a node's InternalIP (127.0.100.N), never to a
                # lookup of its name (the default tries Hostname first: a DNS query off loopback).
                "--kubelet-preferred-address-types=InternalIP",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=0",
                *audit.apiserver_flags(policy, self.audit_log),
                *self.apiserver_args,
            ],
            self.logs / "kube-apiserver.log",
        )

    def _start_controller_manager(self, endpoints: Endpoints, pki: PKI) -> processes.ProcessRecord:
        return processes.start(
            "kube-controller-manager",
            [
                self.bins.kube_controller_manager,
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={endpoints.controller_manager_port}",
                f"--cert-dir={self.state_dir / 'controller-manager-certs'}",
                "--leader-elect=false",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca.cert}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--node-monitor-grace-period={NODE_MONITOR_GRACE_PERIOD}",
                "--node-monitor-period=2s",
                "--profiling=false",
                "--v=0",
                *self.controller_manager_args,
            ],
            self.logs / "kube-controller-manager.log",
        )

    def start_provisioner(self, nodes: list[str]) -> None:
        """Start the local-path-provisioner for nodes another runtime runs (real nodes), recorded as
        part of this plane, so `down` stops it."""
        endpoints = self.endpoints()
        assert endpoints is not None, "the control plane is not up"
        self._save(endpoints, [*self.records(), self._start_provisioner(endpoints, nodes)])

    def _start_provisioner(self, endpoints: Endpoints, nodes: list[str]) -> processes.ProcessRecord:
        """The local-path-provisioner, its RBAC, ConfigMap and the default StorageClass."""
        for obj in localpath.manifests(self.state_dir, nodes):
            self.create(obj, localpath.api_path(obj))
        path, body = localpath.token_request()
        status, reply = self._request("POST", path, json.dumps(body).encode(), 5.0)
        if status != 201:
            raise ControlPlaneError(f"token request for the local-path-provisioner: HTTP {status}: {reply}")
        kubeconfig = self.state_dir / "local-path-provisioner.kubeconfig"
        token = json.loads(reply)["status"]["token"]
        localpath.write_kubeconfig(kubeconfig, endpoints.server, self.pki.ca.cert, token)
        return localpath.start(self.bins, kubeconfig, self.logs / "local-path-provisioner.log")

    def _start_scheduler(self, endpoints: Endpoints) -> processes.ProcessRecord:
        return processes.start(
            "kube-scheduler",
            [
                self.bins.kube_scheduler,
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={endpoints.scheduler_port}",
                f"--cert-dir={self.state_dir / 'scheduler-certs'}",
                "--leader-elect=false",
                "--profiling=false",
                "--v=0",
            ],
            self.logs / "kube-scheduler.log",
        )
