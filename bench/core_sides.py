"""The Python sides of bench/core_throughput.py, each run in a fresh process by the driver.

    python bench/core_sides.py {ours,kopf} --kubeconfig=PATH --namespace=NS --count=N --workers=W

Kept apart from the driver so a side's start-up is its own: interpreter,
its imports, its kubeconfig. Prints one JSON line: seconds from after the
imports to the last object's first reconcile, its wall-clock time, and the
process's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any


async def run_ours(kubeconfig: str, namespace: str, count: int, workers: int) -> tuple[float, float]:
    """The core alone: no kubernetes-asyncio in this process (its import is half a second of start)."""
    from prometheus_client import CollectorRegistry

    from valkey_operator.core.builder import build_controller
    from valkey_operator.core.logging import configure_logging
    from valkey_operator.core.manager import Manager
    from valkey_operator.core.reconcile import Request, Result
    from valkey_operator.core.resource import CONFIG_MAPS
    from valkey_operator.core.restconfig import load_config

    configure_logging("json", "warning")
    rest_config = load_config(kubeconfig)
    seen: set[Request] = set()
    finished = asyncio.Event()
    finished_at = 0.0

    class NoOp:
        async def reconcile(self, request: Request) -> Result:
            nonlocal finished_at
            seen.add(request)
            if len(seen) == count:
                finished_at = time.time()
                finished.set()
            return Result()

    started = time.perf_counter()
    manager = Manager(
        rest_config,  # the manager's own session, closed when run() ends
        field_manager="bench",
        namespace=namespace,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )
    build_controller(manager, "bench").for_(CONFIG_MAPS).with_workers(workers).complete(NoOp())
    running = asyncio.create_task(manager.run())
    await finished.wait()
    elapsed = time.perf_counter() - started
    manager.stop()
    await running
    return elapsed, finished_at


async def run_kopf(kubeconfig: str, namespace: str, count: int, workers: int) -> tuple[float, float]:
    import logging

    import kopf
    import yaml

    del workers  # kopf has no worker pool: one task per object
    logging.getLogger("kopf").setLevel(logging.WARNING)
    seen: set[str] = set()
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    finished_at = 0.0
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
        nonlocal finished_at
        seen.add(name)
        if len(seen) == count and not stop.done():
            finished_at = time.time()
            stop.set_result(None)

    started = time.perf_counter()
    operator = asyncio.create_task(
        kopf.operator(registry=registry, namespaces=[namespace], standalone=True, stop_flag=stop)
    )
    await asyncio.shield(stop)
    elapsed = time.perf_counter() - started
    await operator
    return elapsed, finished_at


def peak_rss_kib() -> int:
    """VmHWM of /proc/self/status: this process's own peak resident set.

    Not the parent's wait4 ru_maxrss: Linux carries the spawning process's
    high-water mark across exec, so every child would report at least the
    driver's RSS.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def side_main(side: str, kubeconfig: str, namespace: str, count: int, workers: int) -> None:
    """One Python side: the same JSON line the Go side prints (its `seconds` start after imports)."""
    runner = run_ours if side == "ours" else run_kopf
    elapsed, finished_at = asyncio.run(runner(kubeconfig, namespace, count, workers))
    line = {"side": side, "seconds": elapsed, "finished_at": finished_at, "rss_kib": peak_rss_kib()}
    print(json.dumps(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("side", choices=("ours", "kopf"))
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    side_main(args.side, args.kubeconfig, args.namespace, args.count, args.workers)


if __name__ == "__main__":
    main()
