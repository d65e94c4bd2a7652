"""A leading operator process cut from the API server stops at its renew deadline and exits 1.

The leader (`python -m valkey_operator --leader-elect`) reaches the API server
only through the test bed's TCP proxy; a warm standby goes straight to it. The
proxy then cuts the leader off, either refusing every connection (requests
fail at once) or black-holing them (requests hang: only the elector's own
deadline ends them). Measured on the Lease's own times, all written on this
machine: the leader exits with status 1 no sooner than the renew deadline
after its last renewal and before the lease runs out, so the standby, which
leads no sooner than the lease duration after that renewal and at most
HANDOVER after it, never leads beside it.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from lease_support import HANDOVER, REQUEST_SLACK, TIMINGS, LeaseWatch
from operator_process import OperatorProcess

from valkey_operator.core.client import Client
from valkey_testbed.controlplane import ControlPlane
from valkey_testbed.processes import free_port
from valkey_testbed.tcpproxy import TcpProxy
from valkey_testbed.wait import NotYet, eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LEASE = "valkey-operator-leader"
LEADER_GAUGE = f'leader_election_master_status{{name="{LEASE}"}}'
DETECTION_SLACK = 0.5
"""From the renew deadline to the elector's verdict: a black-holed attempt ends at the deadline
itself (10.02 s measured); a refused one fails at once, so the verdict waits for the next pass, at
most one retry period later (10.10 s measured)."""
EXIT_SLACK = 3.0
"""From the verdict to the process's end as the test sees it: the manager stops informers and
endpoints, closes its session, the interpreter exits, and the test polls the pid every 0.2 s
(0.9-1.6 s measured on 2 busy cores)."""


def proxied_kubeconfig(kubeconfig: Path, proxy: TcpProxy, path: Path) -> Path:
    """The admin kubeconfig with its server replaced by the proxy (TLS still verifies: IP SAN)."""
    config = yaml.safe_load(kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = proxy.url
    path.write_text(yaml.safe_dump(config))
    return path


def gauge(port: int, name: str) -> float | None:
    """A sample of the process's /metrics, None while it is not exported (or not served yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            body = response.read().decode()
    except OSError:
        return None
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


async def logged(process: OperatorProcess, identity: str) -> None:
    """process's log names identity: the process that wrote the Lease logs that it leads a moment
    after the write, so a log read the instant the Lease shows it may not hold the line yet."""

    async def found() -> bool | NotYet:
        return identity in process.log() or NotYet(f"{identity} not in its log yet")

    await eventually(found, f"{identity} in the log of the process that leads", 5, interval=0.05)


def log_time(process: OperatorProcess, event: str) -> float | None:
    """Epoch seconds of the first JSON log line with this event."""
    for line in process.log().splitlines():
        if f'"{event}"' in line:
            return datetime.datetime.fromisoformat(json.loads(line)["timestamp"]).timestamp()
    return None


@pytest.mark.parametrize("cut", ["refused", "black-holed"])
async def test_a_leader_cut_from_the_api_server_exits_1_at_its_renew_deadline_before_a_standby_leads(
    cut: str,
    kube: Client,
    kube_control_plane: ControlPlane,
    kubeconfig_path: Path,
    namespace: str,
    tmp_path: Path,
    valkey_crds: None,  # the operator's informers list its kinds: it elects only once they sync
) -> None:
    endpoints = kube_control_plane.endpoints()
    assert endpoints is not None
    flags = ("--leader-elect", f"--leader-election-namespace={namespace}")
    lease = LeaseWatch(kube, LEASE, namespace)
    started: list[OperatorProcess] = []
    async with TcpProxy(endpoints.apiserver_port) as proxy:
        try:
            via_proxy = proxied_kubeconfig(kubeconfig_path, proxy, tmp_path / "via-proxy.kubeconfig")
            leader = OperatorProcess(via_proxy, namespace, tmp_path / "leader.log", flags=flags)
            started.append(leader)
            first = await eventually(lease.held, "the first process to lead", 60)
            await logged(leader, first.holder)  # the proxied process leads

            port = free_port()
            metrics = f"--metrics-bind-address=127.0.0.1:{port}"
            standby = OperatorProcess(
                kubeconfig_path, namespace, tmp_path / "standby.log", flags=(*flags, metrics)
            )
            started.append(standby)

            async def warm() -> bool | NotYet:
                value = await asyncio.to_thread(gauge, port, LEADER_GAUGE)
                return value == 0 or NotYet(value)

            await eventually(warm, "the standby's caches synced, trying the lease", 60)
            before_cut = await lease.read()
            assert before_cut is not None and before_cut.holder == first.holder

            cut_at = time.time()
            if cut == "refused":
                proxy.pause()
                proxy.cut(reset=True)
            else:
                proxy.stall()
            code = await leader.exit_code(TIMINGS.renew_deadline + TIMINGS.retry_period + 10)
            exited_at = time.time()
            assert code == 1, f"exit status {code}\n{leader.tail()}"
            lost_at = log_time(leader, "leadership lost; exiting")
            assert lost_at is not None, leader.tail()

            # The Lease still shows the cut leader's last renewal: no standby led while it ran.
            after_exit = await lease.read()
            assert after_exit is not None and after_exit.holder == first.holder, after_exit
            renewed = after_exit.renewed
            assert renewed <= cut_at + 0.01, "no renewal went through the cut"
            lost_after = lost_at - renewed
            next_pass = TIMINGS.retry_period if cut == "refused" else 0.0
            assert (
                TIMINGS.renew_deadline <= lost_after <= TIMINGS.renew_deadline + next_pass + DETECTION_SLACK
            ), f"gave up {lost_after:.2f}s after its last renewal"
            assert exited_at - lost_at <= EXIT_SLACK, f"exited {exited_at - lost_at:.2f}s after giving up"

            taken = await eventually(
                lease.held_by_other_than(first.holder), "the standby to lead", 40, interval=0.1
            )
            handover = taken.acquired - renewed
            print(
                f"cut ({cut}) {cut_at - renewed:.2f}s after the last renewal; leadership lost "
                f"{lost_after:.2f}s, exit seen {exited_at - renewed:.2f}s and standby leads "
                f"{handover:.2f}s after it ({taken.acquired - cut_at:.2f}s after the cut)"
            )
            assert TIMINGS.lease_duration <= handover <= HANDOVER + REQUEST_SLACK, handover
            assert exited_at < taken.acquired, "the cut leader still ran when the standby led"
            await logged(standby, taken.holder)
        finally:
            for process in started:
                process.kill()
