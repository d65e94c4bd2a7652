"""Controller-core throughput: N objects, a no-op reconciler, time to the last reconcile.

Creates N ConfigMaps (default 5000) in the real API server of the local test
bed, then runs, each in a fresh process, our core (a Manager with one
controller whose reconciler only counts) and kopf with its low-level
`@kopf.on.event` handler (so neither side writes to the API server), over the
same objects, alternating order for `--rounds` rounds. Each run reports time
from start to the last object's first reconcile, reconciles/s and peak RSS.

    python bench/core_throughput.py [--count 5000] [--rounds 2] [--kubeconfig PATH]

Without --kubeconfig a control plane is started in a temporary directory
(build it first: `python -m valkey_operator.testing build`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# -- the two sides, each run in its own process ------------------------------------


async def run_ours(kubeconfig: str, namespace: str, count: int) -> float:
    from kubernetes_asyncio import client, config
    from prometheus_client import CollectorRegistry

    from valkey_operator.core.builder import build_controller
    from valkey_operator.core.logging import configure_logging
    from valkey_operator.core.manager import Manager
    from valkey_operator.core.reconcile import Request, Result
    from valkey_operator.core.resource import CONFIG_MAPS

    configure_logging("json", "warning")
    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    seen: set[Request] = set()
    finished = asyncio.Event()

    class NoOp:
        async def reconcile(self, request: Request) -> Result:
            seen.add(request)
            if len(seen) >= count:
                finished.set()
            return Result()

    async with client.ApiClient(configuration) as api:
        started = time.perf_counter()
        manager = Manager(
            api,
            field_manager="bench",
            namespace=namespace,
            metrics_bind_address="0",
            health_probe_bind_address="0",
            registry=CollectorRegistry(),
        )
        build_controller(manager, "bench").for_(CONFIG_MAPS).with_workers(4).complete(NoOp())
        running = asyncio.create_task(manager.run())
        await finished.wait()
        elapsed = time.perf_counter() - started
        manager.stop()
        await running
    return elapsed


async def run_kopf(kubeconfig: str, namespace: str, count: int) -> float:
    import logging

    import kopf
    import yaml

    logging.getLogger("kopf").setLevel(logging.WARNING)
    seen: set[str] = set()
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        kc = yaml.safe_load(Path(kubeconfig).read_text())
        cluster, user = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
        return kopf.ConnectionInfo(
            server=cluster["server"],
            ca_path=cluster["certificate-authority"],
            certificate_path=user["client-certificate"],
            private_key_path=user["client-key"],
            default_namespace=namespace,
        )

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.peering.standalone = True
        settings.scanning.disabled = True

    @kopf.on.event("", "v1", "configmaps", registry=registry)
    def on_event(name: str, **_: Any) -> None:
        seen.add(name)
        if len(seen) >= count and not stop.done():
            stop.set_result(None)

    started = time.perf_counter()
    operator = asyncio.create_task(
        kopf.operator(registry=registry, namespaces=[namespace], standalone=True, stop_flag=stop)
    )
    await asyncio.shield(stop)
    elapsed = time.perf_counter() - started
    await operator
    return elapsed


def side_main(side: str, kubeconfig: str, namespace: str, count: int) -> None:
    runner = run_ours if side == "ours" else run_kopf
    elapsed = asyncio.run(runner(kubeconfig, namespace, count))
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps({"side": side, "seconds": elapsed, "per_second": count / elapsed, "rss_mib": peak_rss_mib})
    )


# -- the driver -----------------------------------------------------------------


async def create_objects(kubeconfig: str, namespace: str, count: int, concurrency: int = 32) -> float:
    from kubernetes_asyncio import client, config

    from valkey_operator.core.client import Client
    from valkey_operator.core.resource import CONFIG_MAPS, NAMESPACES
    from valkey_operator.core.rest import RestClient

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        kube = Client(RestClient(api), field_manager="bench")
        await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
        names = iter(range(count))
        started = time.perf_counter()

        async def creator() -> None:
            for index in names:
                body = {
                    "metadata": {"name": f"cm-{index:06d}", "namespace": namespace},
                    "data": {"i": str(index)},
                }
                await kube.create(CONFIG_MAPS, body)

        await asyncio.gather(*(creator() for _ in range(concurrency)))
        return time.perf_counter() - started


def run_side(side: str, kubeconfig: str, namespace: str, count: int) -> dict[str, float]:
    output = subprocess.run(
        [sys.executable, __file__, "--side", side, "--kubeconfig", kubeconfig, "--namespace", namespace,
         "--count", str(count)],
        capture_output=True, text=True, timeout=1800, cwd=ROOT,
    )  # fmt: skip
    if output.returncode != 0:
        raise SystemExit(f"{side} run failed:\n{output.stderr[-3000:]}")
    result: dict[str, float] = json.loads(output.stdout.strip().splitlines()[-1])
    return result


def drive(kubeconfig: str, count: int, rounds: int) -> None:
    namespace = f"bench-{int(time.time())}"
    create_seconds = asyncio.run(create_objects(kubeconfig, namespace, count))
    print(f"created {count} ConfigMaps in {create_seconds:.1f}s ({count / create_seconds:.0f}/s)")
    results: dict[str, list[dict[str, float]]] = {"ours": [], "kopf": []}
    for round_index in range(rounds):
        order = ("ours", "kopf") if round_index % 2 == 0 else ("kopf", "ours")
        for side in order:
            result = run_side(side, kubeconfig, namespace, count)
            results[side].append(result)
            print(
                f"round {round_index + 1} {side:>4}: {result['seconds']:.2f}s to last reconcile, "
                f"{result['per_second']:.0f} reconciles/s, peak RSS {result['rss_mib']:.0f} MiB"
            )
    ours = statistics.median(r["seconds"] for r in results["ours"])
    kopf = statistics.median(r["seconds"] for r in results["kopf"])
    ours_rss = statistics.median(r["rss_mib"] for r in results["ours"])
    kopf_rss = statistics.median(r["rss_mib"] for r in results["kopf"])
    print(f"\nmedian over {rounds} rounds, {count} objects:")
    print(f"  ours: {ours:.2f}s ({count / ours:.0f}/s), peak RSS {ours_rss:.0f} MiB")
    print(f"  kopf: {kopf:.2f}s ({count / kopf:.0f}/s), peak RSS {kopf_rss:.0f} MiB")
    print(f"  ratio kopf/ours time: {kopf / ours:.2f}x; RSS kopf/ours: {kopf_rss / ours_rss:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--side", choices=("ours", "kopf"), help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side_main(args.side, args.kubeconfig, args.namespace, args.count)
        return
    if args.kubeconfig:
        drive(args.kubeconfig, args.count, args.rounds)
        return
    from valkey_operator.testing.controlplane import ControlPlane

    with tempfile.TemporaryDirectory(prefix="bench-") as state:
        plane = ControlPlane(Path(state))
        plane.up()
        try:
            drive(str(plane.kubeconfig), args.count, args.rounds)
        finally:
            plane.down()


if __name__ == "__main__":
    main()
