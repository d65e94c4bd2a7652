"""The Python sides of bench/core_throughput.py and bench/core_scale.py, each run in a fresh process.

    python bench/core_sides.py {ours,kopf} --kubeconfig=PATH --namespace=NS --count=N --workers=W
    python bench/core_sides.py ours ... --updates=K --phases=P --tag=T

Kept apart from the driver so a side's start-up is its own: interpreter,
its imports, its kubeconfig. Prints one JSON line: seconds from after the
imports to the last object's first reconcile, its wall-clock time, and the
process's peak RSS.

With `--updates` (ours only; bench/core_scale.py) it prints the JSON lines
bench/controller_runtime/main.go prints in that mode, as it goes: "starting"
(RSS before the manager runs), "synced" (after the last first reconcile),
one "phase" per update phase (K distinct objects reconciled with data.u ==
T + the phase's number; the reconciler reads each object from the cache), and
"done" with the peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import time
from collections.abc import Callable
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
    rest_config = await load_config(kubeconfig)
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


def emit(line: dict[str, Any]) -> None:
    print(json.dumps({"side": "ours", **line}), flush=True)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_ours_scale(
    kubeconfig: str,
    namespace: str,
    count: int,
    workers: int,
    updates: int,
    phases: int,
    tag: str,
    api_client: bool = False,
) -> tuple[float, float]:
    """The initial sync, then `phases` rounds of `updates` changed objects; JSON lines as it goes.

    `api_client`: the requests go through kubernetes-asyncio's ApiClient made from the same loaded
    configuration (side ours-apiclient), not the core's own session.
    """
    from prometheus_client import CollectorRegistry

    from valkey_operator.core.builder import build_controller
    from valkey_operator.core.informer import FuncHandler
    from valkey_operator.core.logging import configure_logging
    from valkey_operator.core.manager import Manager
    from valkey_operator.core.reconcile import Request, Result
    from valkey_operator.core.resource import CONFIG_MAPS
    from valkey_operator.core.restconfig import load_config

    configure_logging("json", os.environ.get("BENCH_LOG_LEVEL", "warning"))
    rest_config = await load_config(kubeconfig)
    from kubernetes_asyncio.client import ApiClient

    started = time.perf_counter()
    api = ApiClient(rest_config) if api_client else None  # after `started`: its TLS set-up, as ours
    manager = Manager(
        api or rest_config,
        field_manager="bench",
        namespace=namespace,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )
    reader = manager.cache
    finished = asyncio.Event()
    state: dict[str, Any] = {"phase": 0, "seen": set(), "finished_at": 0.0, "elapsed": 0.0}

    def marker() -> str:
        return f"{tag}{state['phase']}"

    def next_phase() -> None:
        state.update(phase=state["phase"] + 1, seen=set(), versions=set(), events=0, first_event=0.0)
        state["cpu_at_start"] = cpu_seconds()

    class Counting:
        async def reconcile(self, request: Request) -> Result:
            obj = reader.get(CONFIG_MAPS, request.name, request.namespace)
            if obj is None:
                return Result()
            phase = state["phase"]
            if phase and (obj.get("data") or {}).get("u") != marker():
                return Result()
            seen: set[Request] = state["seen"]
            seen.add(request)
            if phase == 0 and len(seen) == count:
                state["elapsed"] = time.perf_counter() - started
                emit(
                    {
                        "event": "synced",
                        "seconds": state["elapsed"],
                        "finished_at": time.time(),
                        "rss_synced_kib": status_kib("VmRSS:"),
                        "peak_synced_kib": status_kib("VmHWM:"),
                    }
                )
                next_phase()
            elif phase and len(seen) == updates:
                state["finished_at"] = time.time()
                emit(
                    {
                        "event": "phase",
                        "phase": phase,
                        "first_event_at": state["first_event"],
                        "last_event_at": state["last_event"],
                        "finished_at": state["finished_at"],
                        "events": state["events"],
                        "versions": len(state["versions"]),
                        "objects": len(seen),
                        "cpu_seconds": cpu_seconds() - state["cpu_at_start"],
                    }
                )
                if phase == phases:
                    finished.set()
                else:
                    next_phase()
            return Result()

    def observe(old: Any, new: Any) -> None:
        """The update events of the current phase, counted as controller-runtime's predicate does."""
        del old
        if state["phase"] and (new.get("data") or {}).get("u") == marker():
            state["last_event"] = time.time()
            if not state["first_event"]:
                state["first_event"] = state["last_event"]
            state["events"] += 1
            state["versions"].add(new["metadata"]["resourceVersion"])

    build_controller(manager, "bench").for_(CONFIG_MAPS).with_workers(workers).complete(Counting())
    manager.informer(CONFIG_MAPS).add_event_handler(FuncHandler(on_update=observe))
    emit({"event": "starting", "rss_before_kib": status_kib("VmRSS:")})
    running = asyncio.create_task(manager.run())
    await finished.wait()
    manager.stop()
    await running
    if api is not None:
        await api.close()
    return state["elapsed"], state["finished_at"]


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


def status_kib(field: str) -> int:
    """One "Vm...:" line of /proc/self/status: VmRSS (resident now) or VmHWM (peak).

    VmHWM is this process's own peak resident set, not the parent's wait4
    ru_maxrss: Linux carries the spawning process's high-water mark across
    exec, so every child would report at least the driver's RSS.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def peak_rss_kib() -> int:
    return status_kib("VmHWM:")


def side_main(side: str, kubeconfig: str, namespace: str, count: int, workers: int) -> None:
    """One Python side: the same JSON line the Go side prints (its `seconds` start after imports)."""
    runner: Callable[..., Any] = run_ours if side == "ours" else run_kopf
    elapsed, finished_at = asyncio.run(runner(kubeconfig, namespace, count, workers))
    line = {"side": side, "seconds": elapsed, "finished_at": finished_at, "rss_kib": peak_rss_kib()}
    print(json.dumps(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("side", choices=("ours", "ours-apiclient", "kopf"))
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--updates", type=int, default=0, help="objects changed per phase (ours only)")
    parser.add_argument("--phases", type=int, default=1)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    if args.updates:
        if args.side not in ("ours", "ours-apiclient"):
            parser.error("--updates is implemented for ours only")
        scale = run_ours_scale(
            args.kubeconfig,
            args.namespace,
            args.count,
            args.workers,
            args.updates,
            args.phases,
            args.tag,
            api_client=args.side == "ours-apiclient",
        )
        elapsed, finished_at = asyncio.run(scale)
        emit({"event": "done", "seconds": elapsed, "finished_at": finished_at, "rss_kib": peak_rss_kib()})
        return
    side_main(args.side, args.kubeconfig, args.namespace, args.count, args.workers)


if __name__ == "__main__":
    main()
