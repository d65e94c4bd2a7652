"""Manager processes on the real API server: leader election, metrics, probes, SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client as k8s
from lease_support import HANDOVER, REQUEST_SLACK, TIMINGS, LeaseWatch

from valkey_operator.core.client import Client
from valkey_operator.core.resource import CONFIG_MAPS, DEPLOYMENTS, LEASES
from valkey_operator.core.rest import RestClient
from valkey_testbed.processes import free_port
from valkey_testbed.wait import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[3]


class OperatorProcess:
    """A manager running in its own process, with its metrics and probe ports."""

    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.metrics_port = free_port()
        self.probe_port = free_port()
        self.log_path = log_path
        argv = [
            *argv,
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
        ]
        self.process = subprocess.Popen(
            [sys.executable, "-m", *argv], cwd=ROOT, stdout=log_path.open("wb"), stderr=subprocess.STDOUT
        )

    def get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except OSError:
            return 0, ""

    def metric(self, line_prefix: str) -> float:
        status, body = self.get(self.metrics_port, "/metrics")
        if status != 200:
            return -1.0
        values = [float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith(line_prefix)]
        return sum(values)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[OperatorProcess]]:
    started: list[OperatorProcess] = []
    yield started
    for process in started:
        process.stop()


def off_loop(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    """A blocking check (HTTP to the operator process) for eventually(), run in a worker thread."""
    return lambda: asyncio.to_thread(check)


def example(kubeconfig: Path, namespace: str) -> list[str]:
    return [
        "examples.configmap_checksum.operator",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        f"--leader-election-namespace={namespace}",
    ]


LEADER = 'leader_election_master_status{name="configmap-checksum"}'
LEASE = "configmap-checksum"
RECONCILES = 'controller_runtime_reconcile_total{controller="configmap-checksum"'
ADDS = 'workqueue_adds_total{controller="configmap-checksum"'
DEPTH = 'workqueue_depth{controller="configmap-checksum"'


async def test_only_the_leader_reconciles_and_a_standby_takes_over(
    kube_api: k8s.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    processes: list[OperatorProcess],
    tmp_path: Path,
) -> None:
    api = Client(RestClient(kube_api), field_manager="test")
    await api.create(CONFIG_MAPS, {"metadata": {"name": "cfg", "namespace": namespace}, "data": {"v": "1"}})
    for index in range(2):
        processes.append(OperatorProcess(example(kubeconfig_path, namespace), tmp_path / f"op{index}.log"))
    first, second = processes
    await eventually(off_loop(lambda: first.metric(LEADER) + second.metric(LEADER) == 1), "one leader", 60)
    leader, standby = (first, second) if first.metric(LEADER) == 1 else (second, first)
    assert standby.metric(LEADER) == 0

    adds_before = standby.metric(ADDS)
    await api.create(DEPLOYMENTS, _deployment(namespace))
    await eventually(off_loop(lambda: leader.metric(RECONCILES) > 0), "the leader to reconcile", 30)
    # The standby's informer queued the same key (its handlers run while it stands by): a worker
    # would have taken it at once. It still waits there, and nothing was reconciled.
    await eventually(
        off_loop(lambda: standby.metric(ADDS) > adds_before), "the key in the standby's queue", 30
    )
    assert standby.metric(DEPTH) >= 1, "the standby's queue was drained: a worker runs"
    assert standby.metric(RECONCILES) == 0, "the standby must not reconcile"
    # Both processes are ready (caches warm), only one acts.
    assert standby.get(standby.probe_port, "/readyz")[0] == 200

    lease = LeaseWatch(api, LEASE, namespace)
    leader.process.send_signal(signal.SIGKILL)
    leader.process.wait()
    killed_at = time.time()
    killed = await lease.read()
    assert killed is not None
    taken = await eventually(lease.held_by_other_than(killed.holder), "the standby to take over", 40)
    # The killed leader's last renewal, as the polls saw it (one still in flight at the kill included).
    handover = taken.acquired - lease.last[killed.holder].renewed
    print(
        f"standby leads {handover:.2f}s after the last renewal, "
        f"{taken.acquired - killed_at:.2f}s after the kill"
    )
    assert TIMINGS.lease_duration <= handover <= HANDOVER + REQUEST_SLACK, handover
    await eventually(off_loop(lambda: standby.metric(LEADER) == 1), "the standby to report leading", 10)
    await api.patch(CONFIG_MAPS, "cfg", {"data": {"v": "2"}}, namespace)
    await eventually(off_loop(lambda: standby.metric(RECONCILES) > 0), "the new leader to reconcile", 30)


async def test_metrics_endpoint_serves_controller_runtime_names(
    kube_api: k8s.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    processes: list[OperatorProcess],
    tmp_path: Path,
) -> None:
    api = Client(RestClient(kube_api), field_manager="test")
    processes.append(OperatorProcess(example(kubeconfig_path, namespace), tmp_path / "op.log"))
    (operator,) = processes
    await eventually(off_loop(lambda: operator.metric(LEADER) == 1), "leadership", 60)
    await api.create(DEPLOYMENTS, _deployment(namespace))
    await eventually(off_loop(lambda: operator.metric(RECONCILES) > 0), "a reconcile", 30)
    _, body = operator.get(operator.metrics_port, "/metrics")
    for name in (
        'controller_runtime_reconcile_total{controller="configmap-checksum",result="success"}',
        'controller_runtime_reconcile_time_seconds_count{controller="configmap-checksum"}',
        'controller_runtime_max_concurrent_reconciles{controller="configmap-checksum"}',
        'workqueue_adds_total{controller="configmap-checksum",name="configmap-checksum"}',
        'workqueue_queue_duration_seconds_count{controller="configmap-checksum",name="configmap-checksum"}',
        'workqueue_work_duration_seconds_count{controller="configmap-checksum",name="configmap-checksum"}',
        LEADER,
    ):
        assert operator.metric(name) > 0, name
    for name in (
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_active_workers",
        "workqueue_depth",
        "workqueue_retries_total",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
    ):
        assert f"\n{name}{{" in body, name
    assert operator.get(operator.probe_port, "/healthz") == (200, "ok")
    assert operator.get(operator.probe_port, "/readyz") == (200, "ok")


async def test_operator_idles_then_stops_on_sigterm_releasing_its_lease(
    kube_api: k8s.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    processes: list[OperatorProcess],
    tmp_path: Path,
    valkey_crds: None,  # the operator's informers list its kinds: ready only once they exist
) -> None:
    api = Client(RestClient(kube_api), field_manager="test")
    argv = [
        "valkey_operator",
        f"--kubeconfig={kubeconfig_path}",
        f"--namespace={namespace}",  # other test modules' clusters run beside this one
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        "--log-format=json",
        "--node-networks=127.0.0.0/8",
    ]
    processes.append(OperatorProcess(argv, tmp_path / "operator.log"))
    (operator,) = processes
    await eventually(
        off_loop(lambda: operator.get(operator.probe_port, "/readyz")[0] == 200), "readiness", 60
    )
    await eventually(
        off_loop(
            lambda: operator.metric('leader_election_master_status{name="valkey-operator-leader"}') == 1
        ),
        "leadership",
        30,
    )
    lease = await api.get(LEASES, "valkey-operator-leader", namespace)
    assert lease["spec"]["holderIdentity"]

    cpu_before = _cpu_seconds(operator.process.pid)
    await asyncio.sleep(3)
    idle_cpu = _cpu_seconds(operator.process.pid) - cpu_before
    assert idle_cpu < 0.5, f"idle operator used {idle_cpu:.2f}s CPU in 3s"

    stopping = time.monotonic()
    operator.process.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(operator.process.wait, 30)
    assert code == 0, operator.log_path.read_text()[-2000:]
    assert time.monotonic() - stopping < 10
    released = await api.get(LEASES, "valkey-operator-leader", namespace)
    assert released["spec"]["holderIdentity"] in ("", None)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _deployment(namespace: str) -> dict[str, object]:
    labels = {"app": "web"}
    return {
        "metadata": {
            "name": "web",
            "namespace": namespace,
            "annotations": {"checksum.example.com/configmap": "cfg"},
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "a", "image": "x"}]},
            },
        },
    }
