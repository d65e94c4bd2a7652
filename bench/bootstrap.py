"""Bootstrap: ValkeyCluster 3x1 create -> Active, next to the hand-built floor, in one run.

Each round, in alternating order, on one control plane (3 nodes, the process
kubelet, real valkey-server):

  ours   a 3-shard / 1-replica ValkeyCluster (docs/examples/cluster.yaml) in a
         fresh namespace, with the operator running as a process; timed from
         the create until `.status.state == Active` (polled every 0.1 s).
  floor  6 plain pods running valkey-server of the newest image (cluster
         mode, bound to and announcing $(POD_IP), uid 999, restricted Pod
         Security Standard, repl-diskless-sync-max-replicas 1 so that the
         first sync does not wait Valkey's 5 s delay), joined with `valkey-cli --cluster create
         --cluster-replicas 1 --cluster-yes` as soon as every server answers
         PING; timed from the first pod create until every replica reports
         master_link_status:up and every node cluster_state:ok.

Both namespaces enforce the restricted Pod Security Standard. Each round's
namespace is deleted afterwards. Prints both per round, the medians and the
ratio ours/floor.

    python bench/bootstrap.py [--rounds 2] [--kubeconfig PATH] [--before DIR] [--output FILE] [--logs DIR]

`--before DIR` also times the operator of another checkout (an earlier
revision) in the same rounds. One operator runs at a time: each is started
before its measurement (3 s untimed, to list and watch) and stopped after it.
The operators' logs and each of their Valkey pods' logs (NAMESPACE-POD.log)
go to --logs DIR (a temporary directory without it).

Without --kubeconfig a control plane with 3 nodes is started in a temporary
directory (build it first: `python -m valkey_testbed build`). With
--kubeconfig the plane must already run the process kubelet.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from operators import delete_namespace, machine
from valkey.asyncio import Valkey

from valkey_operator.api.resources import VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, PODS
from valkey_operator.core.rest import RestClient
from valkey_operator.valkey.admin import parse_info
from valkey_testbed import processes
from valkey_testbed.build import binaries
from valkey_testbed.crds import install_crds
from valkey_testbed.demo import curated_examples
from valkey_testbed.images import newest_image, resolve_image
from valkey_testbed.operatorproc import kubectl, start_operator
from valkey_testbed.wait import NotYet, eventually

ROOT = Path(__file__).resolve().parents[1]
IMAGE = newest_image()  # the TLS build's version follows what Debian offered
SHARDS, REPLICAS = 3, 1
PODS_PER_CLUSTER = SHARDS * (1 + REPLICAS)
POLL = 0.1
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
Obj = dict[str, Any]


def loopback(ip: str) -> str:
    if ipaddress.ip_address(ip) not in LOOPBACK:
        raise RuntimeError(f"refusing to connect to {ip}: not in {LOOPBACK}")
    return ip


async def new_namespace(kube: Client, name: str) -> None:
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    await kube.create(NAMESPACES, {"metadata": {"name": name, "labels": labels}})


# -- ours -------------------------------------------------------------------------


def cluster_body(namespace: str) -> Obj:
    body: Obj = yaml.safe_load((ROOT / "docs" / "examples" / "cluster.yaml").read_text())
    body["metadata"] = {"name": "bench", "namespace": namespace}
    body["spec"]["shards"] = SHARDS
    body["spec"]["replicasPerShard"] = REPLICAS
    return body


async def run_ours(kube: Client, namespace: str, timeout: float) -> float:
    await new_namespace(kube, namespace)

    async def active() -> bool | NotYet:
        current = await kube.get(VALKEY_CLUSTERS, "bench", namespace)
        status = current.get("status") or {}
        return status.get("state") == "Active" or NotYet(f"{status.get('state')}: {status.get('message')}")

    started = time.perf_counter()
    await kube.create(VALKEY_CLUSTERS, cluster_body(namespace))
    await eventually(active, "the ValkeyCluster to be Active", timeout, interval=POLL)
    elapsed = time.perf_counter() - started
    pods = await kube.list(PODS, namespace)
    if len(pods) != PODS_PER_CLUSTER:
        raise RuntimeError(f"expected {PODS_PER_CLUSTER} pods in {namespace}, found {len(pods)}")
    return elapsed


async def keep_pod_logs(kube: Client, kubeconfig: str, namespace: str, log_dir: Path) -> None:
    """Each Valkey pod's log next to the operator's (NAMESPACE-POD.log): what a slow round's servers
    said (an election that failed, a sync that waited)."""
    for pod in await kube.list(PODS, namespace):
        name = pod["metadata"]["name"]
        with (log_dir / f"{namespace}-{name}.log").open("w") as out:
            argv = [str(binaries().kubectl), f"--kubeconfig={kubeconfig}", "logs", "-n", namespace, name]
            await asyncio.to_thread(subprocess.run, argv, stdout=out, stderr=subprocess.STDOUT, timeout=60)


# -- floor ------------------------------------------------------------------------


def floor_pod(name: str, namespace: str, extra: tuple[str, ...] = ()) -> Obj:
    """A plain pod running valkey-server in cluster mode. Its first full sync starts as soon as its
    replicas asked (`repl-diskless-sync-max-replicas`), not after Valkey's 5 s default delay: the
    fastest correct setting, which the operator uses too."""
    args = [
        "--bind", "$(POD_IP)", "--port", "6379", "--protected-mode", "no",
        "--cluster-enabled", "yes", "--cluster-announce-ip", "$(POD_IP)", "--cluster-node-timeout", "5000",
        "--dir", "/data", "--save", "", "--appendonly", "no",
        "--repl-diskless-sync-max-replicas", str(REPLICAS), *extra,
    ]  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "floor"}},
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 999,
                "runAsGroup": 999,
                "fsGroup": 999,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "valkey",
                    "image": IMAGE,
                    "command": ["valkey-server"],
                    "args": args,
                    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "ports": [{"name": "valkey", "containerPort": 6379}],
                    "securityContext": {
                        "runAsNonRoot": True,
                        "allowPrivilegeEscalation": False,
                        "privileged": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }


async def answers(ip: str) -> bool:
    client = Valkey(host=loopback(ip), port=6379, socket_timeout=1, socket_connect_timeout=1)
    try:
        return bool(await client.ping())
    except Exception:
        return False
    finally:
        await client.aclose()


async def info(ip: str, section: str) -> dict[str, Any]:
    client = Valkey(host=loopback(ip), port=6379, socket_timeout=1, socket_connect_timeout=1)
    try:
        if section == "cluster":
            raw = await client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
            return parse_info(raw.decode() if isinstance(raw, bytes) else str(raw))
        result: dict[str, Any] = await client.info(section)
        return result
    except Exception:
        return {}
    finally:
        await client.aclose()


async def run_floor(
    kube: Client, namespace: str, cli: Path, timeout: float, extra: tuple[str, ...] = ()
) -> float:
    """The floor's pods (with `extra` valkey-server arguments) joined into a cluster: seconds from
    the first create until every replica is in sync and every node says cluster_state:ok."""
    await new_namespace(kube, namespace)
    names = [f"floor-{index}" for index in range(PODS_PER_CLUSTER)]
    deadline = time.monotonic() + timeout

    def remaining() -> float:
        return max(1.0, deadline - time.monotonic())

    started = time.perf_counter()
    for name in names:
        await kube.create(PODS, floor_pod(name, namespace, extra))

    async def all_ips() -> list[str] | None:
        pods = {p["metadata"]["name"]: p for p in await kube.list(PODS, namespace)}
        ips = [pods.get(name, {}).get("status", {}).get("podIP") for name in names]
        return [str(ip) for ip in ips] if all(ips) else None

    ips: list[str] = await eventually(all_ips, "pod IPs", remaining(), interval=POLL)

    async def all_answer() -> bool:
        return all(await asyncio.gather(*(answers(ip) for ip in ips)))

    await eventually(all_answer, "every valkey-server to answer PING", remaining(), interval=POLL)
    argv = [str(cli), "--cluster", "create", *(f"{loopback(ip)}:6379" for ip in ips)]
    argv += ["--cluster-replicas", str(REPLICAS), "--cluster-yes"]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), remaining())
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise TimeoutError("valkey-cli --cluster create timed out") from None
    if proc.returncode != 0:
        raise RuntimeError(f"valkey-cli --cluster create failed:\n{output.decode()[-2000:]}")

    async def in_sync() -> bool:
        replication = await asyncio.gather(*(info(ip, "replication") for ip in ips))
        clusters = await asyncio.gather(*(info(ip, "cluster") for ip in ips))
        replicas = [r for r in replication if r.get("role") == "slave"]
        primaries = [r for r in replication if r.get("role") == "master"]
        return (
            len(replicas) == SHARDS * REPLICAS
            and len(primaries) == SHARDS
            and all(r.get("master_link_status") == "up" for r in replicas)
            and all(c.get("cluster_state") == "ok" for c in clusters)
        )

    await eventually(in_sync, "replicas in sync and cluster_state:ok everywhere", remaining(), interval=POLL)
    return time.perf_counter() - started


# -- driver -----------------------------------------------------------------------


OPERATOR_START_S = 3.0
"""Untimed: a freshly started operator lists and watches before a create is timed against it."""


def start_one(kubeconfig: str, log_dir: Path, checkout: Path | None) -> processes.ProcessRecord:
    """The operator as a process, from checkout when given (PYTHONPATH, and run there: `python -m`
    puts its working directory first on sys.path)."""
    log_name = "operator.log" if checkout is None else "operator-before.log"
    return start_operator(kubeconfig, log_dir, checkout=checkout, log_name=log_name)


async def drive(
    kubeconfig: str, rounds: int, timeout: float, log_dir: Path, before: Path | None
) -> dict[str, list[float]]:
    """Each round: ours and the floor (and --before's operator), alternating order; one operator
    runs at a time, started before its measurement and stopped after it."""
    image = resolve_image(IMAGE)
    if image is None:
        raise SystemExit(f"{IMAGE} is not installed: run `python -m valkey_testbed build`")
    cli = image.executable("valkey-cli")
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    loopback(urlparse_host(str(configuration.host)))
    kinds = ["ours", "floor", *(["before"] if before else [])]
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    async with k8s.ApiClient(configuration) as api:
        kube = Client(RestClient(api), field_manager="bench")
        await install_crds(kube)
        stamp = time.strftime("%H%M%S")
        for index in range(rounds):
            order = kinds if index % 2 == 0 else kinds[::-1]
            results: dict[str, float] = {}
            for kind in order:
                namespace = f"bench-boot-{stamp}-{index}-{kind}"
                try:
                    if kind == "floor":
                        results[kind] = await run_floor(kube, namespace, cli, timeout)
                        continue
                    operator = start_one(kubeconfig, log_dir, before if kind == "before" else None)
                    try:
                        kubectl(kubeconfig, "apply", "-f", str(curated_examples(IMAGE, log_dir)))
                        await asyncio.sleep(OPERATOR_START_S)
                        if not operator.alive():
                            raise RuntimeError(f"the operator exited; see the logs in {log_dir}")
                        results[kind] = await run_ours(kube, namespace, timeout)
                    finally:
                        processes.stop([operator])
                        await keep_pod_logs(kube, kubeconfig, namespace, log_dir)
                finally:
                    await delete_namespace(kube, namespace)
            for kind, seconds in results.items():
                times[kind].append(seconds)
            said = ", ".join(f"{kind} {results[kind]:6.2f} s" for kind in kinds)
            ratios = ", ".join(
                f"{kind}/floor {results[kind] / results['floor']:.2f}x" for kind in kinds if kind != "floor"
            )
            print(f"round {index + 1} ({order[0]} first): {said}; {ratios}", flush=True)
    floor_p50 = statistics.median(times["floor"])
    print(f"\n{SHARDS}x{REPLICAS} create -> Active over {rounds} rounds (medians, min-max):")
    for kind in kinds:
        p50, low, high = statistics.median(times[kind]), min(times[kind]), max(times[kind])
        print(f"  {kind:6} {p50:6.2f} s ({low:.2f}-{high:.2f}), /floor {p50 / floor_p50:.2f}x")
    return times


def urlparse_host(url: str) -> str:
    host = urlparse(url).hostname
    if host is None:
        raise RuntimeError(f"no host in {url}")
    return host


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="per measurement, seconds")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--before", type=Path, help="also time the operator of this checkout, same rounds")
    parser.add_argument("--output", type=Path, help="also write the times (JSON) here")
    parser.add_argument(
        "--logs", type=Path, help="keep the operators' and Valkey pods' logs here (a pass timeline)"
    )
    args = parser.parse_args()
    before = args.before.resolve() if args.before else None
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    if args.kubeconfig:
        with tempfile.TemporaryDirectory(prefix="bench-") as logs:
            log_dir = args.logs or Path(logs)
            times = asyncio.run(drive(args.kubeconfig, args.rounds, args.timeout, log_dir, before))
    else:
        from valkey_testbed.controlplane import ControlPlane

        with (
            tempfile.TemporaryDirectory(prefix="bench-") as state,
            ControlPlane(Path(state), nodes=3) as plane,
        ):
            log_dir = args.logs or plane.logs
            times = asyncio.run(drive(str(plane.kubeconfig), args.rounds, args.timeout, log_dir, before))
    if args.output:
        record = {"before": str(before) if before else None, "seconds": times, **machine()}
        args.output.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
