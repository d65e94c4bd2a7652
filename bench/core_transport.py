"""The core's own aiohttp transport against kubernetes-asyncio's ApiClient, the same requests in one run.

Both are built from the same Configuration (`load_config`), so they share TLS, token and server;
only the path a request takes differs: ours (core/transport.py HttpTransport: orjson bodies,
`trust_env=False`) or ApiClient.call_api (its header and body sanitising, json.dumps, `trust_env=True`)
as the core uses it for an embedder's ApiClient. Start-up is outside every timing: each transport's
session is opened by one request first. Per round, in alternating order:

- get: `--requests` sequential GETs of one ConfigMap (per-request overhead on the loop);
- patch: `--requests` merge patches of one ConfigMap, 16 at once (the operator's writes);
- list: `--lists` LISTs of the `--objects` ConfigMaps (the informers' start).

    python bench/core_transport.py [--requests 1000] [--objects 2000] [--lists 5] [--rounds 5]
        [--kubeconfig PATH]

Prints each round, then the medians of wall-clock and client CPU time and the ratios ApiClient / ours
(above 1: ApiClient is slower).
Without --kubeconfig a control plane is started in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

NAMESPACE = "bench-transport"
PATCH_CONCURRENCY = 16
KINDS = ("get", "patch", "list")


async def timed(action: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """Wall-clock seconds and this process's CPU seconds (the API server runs in another process, so
    the CPU is the client's alone: steadier than the wall clock on a shared machine)."""
    started, cpu = time.perf_counter(), time.process_time()
    await action()
    return time.perf_counter() - started, time.process_time() - cpu


async def one_round(rest: Any, args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds of each kind of request, through rest (a RestClient)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    one = f"{path}/bench-0"
    padding = "x" * 1024

    async def gets() -> None:
        for _ in range(args.requests):
            await rest.request("GET", one)

    async def patches() -> None:
        limit = asyncio.Semaphore(PATCH_CONCURRENCY)

        async def patch(index: int) -> None:
            async with limit:
                body = {"data": {"u": str(index), "pad": padding}}
                await rest.request("PATCH", one, body=body, content_type="application/merge-patch+json")

        await asyncio.gather(*(patch(index) for index in range(args.requests)))

    async def lists() -> None:
        for _ in range(args.lists):
            listed = await rest.request("GET", path)
            assert len(listed["items"]) >= args.objects

    return {"get": await timed(gets), "patch": await timed(patches), "list": await timed(lists)}


async def measure(kubeconfig: str, args: argparse.Namespace) -> None:
    from kubernetes_asyncio.client import ApiClient

    from valkey_operator.core.rest import ApiError, RestClient
    from valkey_operator.core.restconfig import load_config

    configuration = await load_config(kubeconfig)
    async with RestClient(configuration) as ours, ApiClient(configuration) as api:
        theirs = RestClient(api)
        try:
            await ours.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
        except ApiError as exc:
            if not exc.already_exists:
                raise
        limit = asyncio.Semaphore(32)

        async def create(index: int) -> None:
            async with limit:
                body = {"metadata": {"name": f"bench-{index}"}, "data": {"a": "b"}}
                try:
                    await ours.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", body=body)
                except ApiError as exc:
                    if not exc.already_exists:
                        raise

        await asyncio.gather(*(create(index) for index in range(args.objects)))
        sides = {"ours": ours, "apiclient": theirs}
        for rest in sides.values():  # sessions open, connections made: start-up stays out
            await rest.request("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/bench-0")
        seconds: dict[str, dict[str, list[tuple[float, float]]]] = {
            side: {kind: [] for kind in KINDS} for side in sides
        }
        for round_index in range(args.rounds):
            order = list(sides) if round_index % 2 == 0 else list(reversed(sides))
            for side in order:
                result = await one_round(sides[side], args)
                for kind in KINDS:
                    seconds[side][kind].append(result[kind])
                print(
                    f"round {round_index + 1} {side:9}: "
                    + ", ".join(
                        f"{kind} {result[kind][0]:.3f} s (CPU {result[kind][1]:.3f} s)" for kind in KINDS
                    ),
                    flush=True,
                )
        await ours.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")
    report(seconds, args)


def report(seconds: dict[str, dict[str, list[tuple[float, float]]]], args: argparse.Namespace) -> None:
    counts = {"get": args.requests, "patch": args.requests, "list": args.lists}
    print(f"\nmedians over {args.rounds} rounds (load average now {os.getloadavg()[0]:.1f})\n")
    print(
        "| requests | ours | ApiClient | ApiClient / ours | client CPU ours | ApiClient | ApiClient / ours |"
    )
    print("|---|---|---|---|---|---|---|")
    for kind in KINDS:
        wall = [statistics.median(w for w, _ in seconds[side][kind]) for side in ("ours", "apiclient")]
        cpu = [statistics.median(c for _, c in seconds[side][kind]) for side in ("ours", "apiclient")]
        unit = counts[kind]
        what = f"{unit} {kind}" + (f" of {args.objects} objects" if kind == "list" else "")
        print(
            f"| {what} | {wall[0]:.3f} s | {wall[1]:.3f} s | {wall[1] / wall[0]:.2f}x |"
            f" {cpu[0] / unit * 1e3:.2f} ms each | {cpu[1] / unit * 1e3:.2f} ms each |"
            f" {cpu[1] / cpu[0]:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="GETs and PATCHes per round")
    parser.add_argument("--objects", type=int, default=2000, help="ConfigMaps in the LISTs")
    parser.add_argument("--lists", type=int, default=5, help="LISTs per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kubeconfig")
    args = parser.parse_args()
    if args.kubeconfig:
        asyncio.run(measure(args.kubeconfig, args))
        return
    from valkey_testbed.controlplane import ControlPlane

    with tempfile.TemporaryDirectory(prefix="bench-") as state:
        plane = ControlPlane(Path(state))
        plane.up()
        try:
            asyncio.run(measure(str(plane.kubeconfig), args))
        finally:
            plane.down()


if __name__ == "__main__":
    main()
