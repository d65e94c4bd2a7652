"""Rolling update under write load: the operator's roll next to a StatefulSet-style naive roll, in one run.

Each round, in alternating order, a fresh 3x1 ValkeyCluster (the operator
running as a process on the test bed) loaded with --keys keys, and two
continuous writers through the data checker while every pod is replaced:

  ours   the config's imageRef moves from --old to --new; the operator rolls
         (shard by shard, replicas first, surge pod, coordinated CLUSTER
         FAILOVER); timed until the status is Active with currentImage the new
         image.
  naive  what a StatefulSet RollingUpdate does: each pod deleted in turn,
         highest shard first (newest pod first within a shard), the next one
         only once the cluster is Active again; a deleted primary's slots go
         to its replica by Valkey's own handover at shutdown
         (shutdown-on-sigterm failover) or election, and the operator's repair
         replaces the pod. The image stays the same on this side: the binary
         does not change the disruption, the deletions do.

Measured per side: total time; per shard, the longest time it took no write
(WAIT 0 probe writer) and the longest time it acknowledged none (WAIT 1
writer, whose keys are read back); the max and median over shards; and the
acknowledged keys lost (missing or wrong on read-back, the --keys preload
included). Goal: ours at most 2 s per shard, 0 lost. Prints each round, the
medians and the ratio naive/ours of the longest gap.

    python bench/rollout.py [--rounds 1] [--keys 100000] [--sides ours,naive] [--json] [--output FILE]
        [--old valkey/valkey:9.1.0] [--new NEWEST] [--timeout 900] [--kubeconfig PATH] [--log-dir DIR]

--output writes the JSON record (date, cores, arguments, every round, medians) to FILE:
bench/results/rollout.json is the one the docs cite, and tests/unit/test_docs_numbers.py
keeps their numbers equal to it.

Without --kubeconfig a control plane with 3 nodes is started in a temporary
directory (build it first: `python -m valkey_testbed build`).
Everything listens on and dials 127.0.0.0/8 only; the bench stops only the
processes it started, by pid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from operators import run_on_testbed

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, PODS
from valkey_operator.core.rest import RestClient
from valkey_testbed import processes
from valkey_testbed.crds import install_crds
from valkey_testbed.datachecker import DataChecker, WriterReport
from valkey_testbed.images import newest_image, resolve_image, valkey_version
from valkey_testbed.operatorproc import start_operator
from valkey_testbed.superuser import SUPERUSER, SUPERUSER_PASSWORD, ensure_role, with_superuser
from valkey_testbed.wait import NotYet, eventually

Obj = dict[str, Any]
SIDES = ("ours", "naive")
CLUSTER = "roll"
SHARDS, REPLICAS = 3, 1
NODE_TIMEOUT_MS = 5000
WRITE_INTERVAL = 0.01
GOAL_GAP_S = 2.0


def custom(kind: str, name: str, spec: Obj) -> Obj:
    """A cluster-scoped object of ours (the API server wants apiVersion and kind on a create)."""
    return {"apiVersion": VALKEY_CLUSTERS.api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


class Bench:
    def __init__(self, kubeconfig: str, old: str, new: str, log_dir: Path) -> None:
        self.kubeconfig, self.old, self.new, self.log_dir = kubeconfig, old, new, log_dir
        self.stamp = time.strftime("%H%M%S")
        self.api: k8s.ApiClient | None = None
        self.kube: Client | None = None
        self.operator: processes.ProcessRecord | None = None

    async def __aenter__(self) -> Bench:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        configuration = k8s.Configuration()
        await k8s_config.load_kube_config(config_file=self.kubeconfig, client_configuration=configuration)
        self.api = k8s.ApiClient(configuration)
        self.kube = Client(RestClient(self.api), field_manager="bench")
        await install_crds(self.kube)
        self.operator = start_operator(self.kubeconfig, self.log_dir)
        for side, reference in (("old", self.old), ("new", self.new)):
            repository, _, tag = reference.rpartition(":")
            spec = {"repository": repository, "tag": tag, "version": valkey_version(reference)}
            await self.kube.create(VALKEY_IMAGES, custom(VALKEY_IMAGES.kind, self.image(side), spec))

    async def __aexit__(self, *exc: object) -> None:
        if self.operator is not None:
            processes.stop([self.operator])
        if self.kube is not None:
            for side in ("old", "new"):
                with contextlib.suppress(Exception):
                    await self.kube.delete(VALKEY_IMAGES, self.image(side))
        if self.api is not None:
            await self.api.close()

    def image(self, side: str) -> str:
        return f"bench-roll-{side}-{self.stamp}"

    @property
    def client(self) -> Client:
        assert self.kube is not None
        return self.kube

    async def run(self, side: str, index: int, keys: int, timeout: float) -> Obj:
        namespace = f"bench-roll-{self.stamp}-{index}-{side}"
        config = namespace
        kube = self.client
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        spec = {"imageRef": self.image("old"), "valkey": {"cluster-node-timeout": str(NODE_TIMEOUT_MS)}}
        await kube.create(VALKEY_CONFIGS, custom(VALKEY_CONFIGS.kind, config, spec))
        try:
            return await self._run(side, namespace, config, keys, timeout)
        finally:
            with contextlib.suppress(Exception):
                await kube.delete(VALKEY_CLUSTERS, CLUSTER, namespace)
                await kube.delete(NAMESPACES, namespace)
                await kube.delete(VALKEY_CONFIGS, config)

    async def _run(self, side: str, namespace: str, config: str, keys: int, timeout: float) -> Obj:
        kube = self.client
        body = {
            "apiVersion": VALKEY_CLUSTERS.api_version,
            "kind": VALKEY_CLUSTERS.kind,
            "metadata": {"name": CLUSTER, "namespace": namespace},
            "spec": with_superuser({"configRef": config, "shards": SHARDS, "replicasPerShard": REPLICAS}),
        }
        await ensure_role(kube)
        await kube.create(VALKEY_CLUSTERS, body)
        status = await self.active(namespace, timeout)
        seeds = [(node["ip"], 6379) for node in status["nodes"]]
        user, password = SUPERUSER, SUPERUSER_PASSWORD
        async with (
            DataChecker(seeds, replicas=REPLICAS, username=user, password=password) as durable,
            DataChecker(seeds, replicas=0, prefix="probe", username=user, password=password) as probe,
        ):
            loaded = await durable.write(keys, timeout=timeout)
            stop = asyncio.Event()
            writers = [
                asyncio.create_task(
                    checker.run_writer(max_keys=10**6, duration=timeout, interval=WRITE_INTERVAL, stop=stop)
                )
                for checker in (durable, probe)
            ]
            await asyncio.sleep(2.0)  # a baseline of writes on every shard before the roll
            started = time.monotonic()
            if side == "ours":
                await kube.patch(VALKEY_CONFIGS, config, {"spec": {"imageRef": self.image("new")}})
                await self.rolled(namespace, self.new, timeout)
            else:
                await self.naive_roll(namespace, timeout)
            seconds = time.monotonic() - started
            stop.set()
            reports: list[WriterReport] = list(await asyncio.gather(*writers))
            durable.seeds = [(node["ip"], 6379) for node in (await self.active(namespace, timeout))["nodes"]]
            verified = await durable.verify()
        probe_gaps = list(reports[1].gaps_by_slots.values())
        durable_gaps = list(reports[0].gaps_by_slots.values())
        return {
            "seconds": seconds,
            "keys_loaded": loaded.acknowledged,
            "acknowledged": len(durable.acknowledged),
            "lost": len(verified.missing) + len(verified.wrong),
            "unreadable": len(verified.unreadable),
            "gap_max": max(probe_gaps),
            "gap_median": statistics.median(probe_gaps),
            "acked_gap_max": max(durable_gaps),
            "acked_gap_median": statistics.median(durable_gaps),
        }

    async def active(self, namespace: str, timeout: float) -> Obj:
        async def done() -> Obj | NotYet:
            cluster = await self.client.get(VALKEY_CLUSTERS, CLUSTER, namespace)
            status: Obj = cluster.get("status") or {}
            current = status.get("observedGeneration") == cluster["metadata"]["generation"]
            return status if current and status.get("state") == "Active" else NotYet(status.get("message"))

        return await eventually(done, f"{namespace}/{CLUSTER} Active", timeout, interval=0.5)

    async def rolled(self, namespace: str, image: str, timeout: float) -> None:
        async def done() -> bool | NotYet:
            status = (await self.client.get(VALKEY_CLUSTERS, CLUSTER, namespace)).get("status") or {}
            finished = status.get("state") == "Active" and status.get("currentImage") == image
            return True if finished else NotYet(status.get("message"))

        await eventually(done, f"{namespace}/{CLUSTER} rolled to {image}", timeout, interval=0.5)

    async def naive_roll(self, namespace: str, timeout: float) -> None:
        """Every original pod deleted in StatefulSet order, one at a time, each once Active again."""
        pods = await self.client.list(PODS, namespace)
        order = sorted(
            pods,
            key=lambda pod: (
                pod["metadata"]["labels"]["valkey.gomomento.com/shard"],
                pod["metadata"]["name"],
            ),
            reverse=True,
        )
        for pod in order:
            await self.client.delete(PODS, pod["metadata"]["name"], namespace, uid=pod["metadata"]["uid"])
            await asyncio.sleep(1.0)  # let the status leave Active before waiting for it
            await self.active(namespace, timeout)


def line(side: str, index: int, result: Obj) -> str:
    if "error" in result:
        return f"round {index + 1} {side:5}: DID NOT FINISH: {result['error']}"
    return (
        f"round {index + 1} {side:5}: {result['seconds']:6.1f} s; longest write gap per shard max "
        f"{result['gap_max']:.2f} s, median {result['gap_median']:.2f} s (acknowledged writes: max "
        f"{result['acked_gap_max']:.2f} s); {result['acknowledged']} keys acknowledged, {result['lost']} lost"
        + (f", {result['unreadable']} unreadable" if result["unreadable"] else "")
    )


async def drive(args: argparse.Namespace, kubeconfig: str, log_dir: Path) -> int:
    results: dict[str, list[Obj]] = {side: [] for side in args.sides}
    async with Bench(kubeconfig, args.old, args.new, log_dir) as bench:
        for index in range(args.rounds):
            order = args.sides if index % 2 == 0 else args.sides[::-1]
            for side in order:
                try:
                    result = await bench.run(side, index, args.keys, args.timeout)
                except Exception as exc:  # report it and go on with the other side
                    result = {"error": f"{type(exc).__name__}: {exc}"}
                results[side].append(result)
                if not args.json:
                    print(line(side, index, result), flush=True)
    summary: Obj = {}
    for side, rounds in results.items():
        done = [result for result in rounds if "error" not in result]
        if done and len(done) == len(rounds):
            summary[side] = {
                name: statistics.median(result[name] for result in done)
                for name in ("seconds", "gap_max", "gap_median", "acked_gap_max", "lost")
            }
    if "ours" in summary and "naive" in summary and summary["ours"]["gap_max"]:
        summary["naive/ours longest gap"] = summary["naive"]["gap_max"] / summary["ours"]["gap_max"]
    record = {
        "measured": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "load_average": [round(value, 2) for value in os.getloadavg()],  # at the end: a shared machine?
        "args": {
            name: value
            for name, value in vars(args).items()
            if name not in ("kubeconfig", "log_dir", "output")
        },
        "results": results,
        "summary": summary,
    }
    if args.output:
        await asyncio.to_thread(Path(args.output).write_text, json.dumps(record, indent=2) + "\n")
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        print(f"\n{SHARDS}x{REPLICAS}, {args.keys} keys, {args.old} -> {args.new}, median of {args.rounds}:")
        for side in args.sides:
            if side in summary:
                values = summary[side]
                print(
                    f"  {side:5} {values['seconds']:6.1f} s, longest gap {values['gap_max']:.2f} s "
                    f"(median shard {values['gap_median']:.2f} s), {values['lost']:.0f} lost"
                )
            else:
                print(f"  {side:5} did not finish")
        if "naive/ours longest gap" in summary:
            print(f"  naive/ours longest gap: {summary['naive/ours longest gap']:.2f}x")
        if "ours" in summary:
            goal = summary["ours"]["gap_max"] <= GOAL_GAP_S and summary["ours"]["lost"] == 0
            print(f"  goal (ours <= {GOAL_GAP_S} s per shard, 0 lost): {'met' if goal else 'NOT met'}")
    return 0 if len(summary) >= len(args.sides) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--sides", default=",".join(SIDES), help=f"a subset of {','.join(SIDES)}")
    parser.add_argument("--old", default="valkey/valkey:9.1.0")
    parser.add_argument("--new", default=None, help="default: the newest image of the catalog")
    parser.add_argument("--timeout", type=float, default=900.0, help="per phase, seconds")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--output", help="also write the JSON record to this file")
    parser.add_argument("--kubeconfig", help="a running test bed (with the process kubelet)")
    parser.add_argument("--log-dir", help="keep the operator log here (default: a temp dir)")
    args = parser.parse_args()
    args.new = args.new or newest_image()
    args.sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    if set(args.sides) - set(SIDES) or args.rounds < 1 or args.keys < 1000:
        parser.error(f"--sides from {SIDES}, --rounds >= 1, --keys >= 1000")
    for reference in (args.old, args.new):
        if resolve_image(reference) is None:
            parser.error(f"{reference} is not installed: run `python -m valkey_testbed build`")
    sys.exit(run_on_testbed(functools.partial(drive, args), args.kubeconfig, args.log_dir, "bench-rollout-"))


if __name__ == "__main__":
    main()
