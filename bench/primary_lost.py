"""A primary's pod deleted: how long its slots take writes again, ours next to the floor, in one run.

Each round, in alternating order, on one control plane (3 nodes, the process
kubelet, real valkey-server of the newest image):

  ours   a 3x1 ValkeyCluster through the operator (a process, as bench/peers.py
         runs it: cluster-node-timeout 5000), waited for until Active.
  floor  bench/bootstrap.py's floor: 6 plain pods joined with `valkey-cli
         --cluster create --cluster-replicas 1`, each with Valkey's own
         handover at SIGTERM (`shutdown-on-sigterm failover`), as ours runs.

Then the test bed's DataChecker writes one key at a time to every primary
(WAIT 0, every 10 ms) for 2 s, the pod of the primary serving slot 0 is
deleted (graceful: SIGTERM, the grace period), and writes go on until the
shard has taken 3 s of writes again. The measure is the writer's longest gap
on that primary's slots: from the last write the old primary acknowledged to
the first one a node acknowledged after it. No replacement pod matters to it:
the floor has none, ours starts one.

    python bench/primary_lost.py [--rounds 3] [--kubeconfig PATH] [--output FILE]

Without --kubeconfig a control plane with 3 nodes is started in a temporary
directory (build it first: `python -m valkey_testbed build`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bootstrap import IMAGE, new_namespace, run_floor, urlparse_host
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from operators import Auth, Ours, Shape, delete_namespace, loopback, machine, pod_addresses, settled

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_operator.core.rest import RestClient
from valkey_testbed.datachecker import DataChecker
from valkey_testbed.images import resolve_image

SHARDS, REPLICAS = 3, 1
WRITE_INTERVAL = 0.01
BEFORE_S = 2.0
"""Writes on every shard before the pod is deleted."""
AFTER_S = 3.0
"""Writes after the deleted primary's slots took one again (a longer gap would still show)."""
HANDOVER_AT_SIGTERM = ("--shutdown-on-sigterm", "failover", "--shutdown-timeout", "10")


async def victim_of(kube: Client, namespace: str, writer: DataChecker) -> tuple[str, str, str]:
    """(pod name, pod uid, its slots' label) of the primary serving slot 0."""
    ranges = writer.slot_ranges()
    address = next(address for address, spans in ranges.items() if spans[0][0] == 0)
    label = ",".join(f"{start}-{end}" for start, end in ranges[address])
    pod = next(p for p in await kube.list(PODS, namespace) if p["status"].get("podIP") == address[0])
    return pod["metadata"]["name"], pod["metadata"]["uid"], label


async def lose_primary(kube: Client, namespace: str, auth: Auth | None, timeout: float) -> float:
    """Delete the pod of slot 0's primary under a writer; the writer's longest gap on its slots."""
    seeds = await pod_addresses(kube, namespace)
    assert isinstance(seeds, list), seeds
    username, password = auth or (None, None)
    async with DataChecker(seeds, replicas=0, prefix="lost", username=username, password=password) as writer:
        await writer.refresh()
        name, uid, label = await victim_of(kube, namespace, writer)
        stop = asyncio.Event()
        writing = asyncio.create_task(
            writer.run_writer(max_keys=10**6, duration=timeout, interval=WRITE_INTERVAL, stop=stop)
        )
        try:
            await asyncio.sleep(BEFORE_S)
            deleted = time.monotonic()
            await kube.delete(PODS, name, namespace, uid=uid)
            await asyncio.sleep(AFTER_S)
            while time.monotonic() - deleted < timeout and not await serving_again(writer, label):
                await asyncio.sleep(0.5)
            await asyncio.sleep(AFTER_S)
        finally:
            stop.set()
        report = await writing
    return report.gaps_by_slots[label]


async def serving_again(writer: DataChecker, label: str) -> bool:
    """A node other than the deleted one serves label's first slot (refreshed from the seeds)."""
    first = int(label.split("-", 1)[0])
    await writer.refresh()
    return any(spans[0][0] == first for spans in writer.slot_ranges().values())


async def round_ours(kube: Client, side: Ours, namespace: str, timeout: float) -> float:
    await new_namespace(kube, namespace)
    await side.start()
    try:
        await side.create(namespace, SHARDS, REPLICAS, IMAGE)
        await settled(side, kube, namespace, Shape(SHARDS, REPLICAS, IMAGE), timeout)
        return await lose_primary(kube, namespace, await side.credentials(namespace), timeout)
    finally:
        await side.delete(namespace)
        await side.stop()


async def round_floor(kube: Client, namespace: str, timeout: float) -> float:
    image = resolve_image(IMAGE)
    if image is None:
        raise SystemExit(f"{IMAGE} is not installed: run `python -m valkey_testbed build`")
    await run_floor(kube, namespace, image.executable("valkey-cli"), timeout, extra=HANDOVER_AT_SIGTERM)
    return await lose_primary(kube, namespace, None, timeout)


async def drive(kubeconfig: str, rounds: int, timeout: float, log_dir: Path) -> dict[str, list[float]]:
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    loopback(urlparse_host(str(configuration.host)))
    times: dict[str, list[float]] = {"ours": [], "floor": []}
    async with k8s.ApiClient(configuration) as api:
        kube = Client(RestClient(api), field_manager="bench")
        ours = Ours(kube, kubeconfig, [IMAGE], log_dir)
        stamp = time.strftime("%H%M%S")
        try:
            for index in range(rounds):
                order = ["ours", "floor"] if index % 2 == 0 else ["floor", "ours"]
                results: dict[str, float] = {}
                for kind in order:
                    namespace = f"bench-lost-{stamp}-{index}-{kind}"
                    try:
                        if kind == "ours":
                            results[kind] = await round_ours(kube, ours, namespace, timeout)
                        else:
                            results[kind] = await round_floor(kube, namespace, timeout)
                    finally:
                        await delete_namespace(kube, namespace)
                    times[kind].append(results[kind])
                extra = results["ours"] - results["floor"]
                print(
                    f"round {index + 1} ({order[0]} first): ours {results['ours']:.2f} s, "
                    f"floor {results['floor']:.2f} s; ours - floor {extra:+.2f} s",
                    flush=True,
                )
        finally:
            await ours.cleanup()
    ours_p50, floor_p50 = statistics.median(times["ours"]), statistics.median(times["floor"])
    print(f"\nprimary's pod deleted -> its slots written again, {rounds} rounds (medians, min-max):")
    for kind, p50 in (("ours", ours_p50), ("floor", floor_p50)):
        print(f"  {kind:5} {p50:5.2f} s ({min(times[kind]):.2f}-{max(times[kind]):.2f})")
    print(f"  ours - floor {ours_p50 - floor_p50:+.2f} s")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="per measurement, seconds")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--output", type=Path, help="also write the times (JSON) here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-") as logs:
        if args.kubeconfig:
            times = asyncio.run(drive(args.kubeconfig, args.rounds, args.timeout, Path(logs)))
        else:
            from valkey_testbed.controlplane import ControlPlane

            with ControlPlane(Path(logs) / "plane", nodes=3) as plane:
                times = asyncio.run(drive(str(plane.kubeconfig), args.rounds, args.timeout, plane.logs))
    if args.output:
        record = {"image": IMAGE, "rounds": args.rounds, "seconds": times, **machine()}
        args.output.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
