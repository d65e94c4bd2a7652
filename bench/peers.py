"""Ours next to the official valkey-io/valkey-operator on the same test bed, in one run.

Each round, in alternating order, each side starts its operator as a process,
runs the four scenarios below on a fresh namespace, and stops it:

  a. bootstrap: a 3x1 cluster on --old, from create to serving every slot;
  b. roll: --old -> --new under two writers (WAIT 1 keys read back later, and a
     WAIT 0 probe): total time, the longest write gap per shard, acked writes lost;
  c. scale: --keys more keys written, then 3 -> 4 shards: time and keys lost;
  d. failover: a primary's pod deleted under the probe writer: the time until
     its slots accept writes again (its shard's longest gap), and until whole;
  e. the operator's CPU seconds and peak RSS over a..d.

"Done" is judged the same way for both: the side's own status says the spec
is done and, from Valkey itself, every pod runs the image, every node says
cluster_state:ok, every slot is served once, no slot migrates, and every
primary has its replicas linked (bench/operators.py). The same data checker
and clients serve both. Every acknowledged key (preload, writers) is read back
at the end of c and of d.

    python bench/peers.py [--rounds 3] [--sides ours,peer] [--keys 200000] [--old valkey/valkey:9.1.0]
        [--new valkey/valkey:9.1.2] [--timeout 900] [--kubeconfig PATH] [--log-dir DIR] [--output FILE]

The peer is found through VALKEY_PEER_OPERATOR (its manager binary) and
VALKEY_PEER_CRDS (its CRD directory); see docs/performance.md. Its roll starts
from 9.1.0, not its default 9.0.0: ours refuses binaries below 9.0.1, and both
sides roll the same images. Without --kubeconfig a 3-node test bed is started
in a temporary directory. Everything listens on and dials 127.0.0.0/8 only.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from operators import (
    Ours,
    Peer,
    Shape,
    Side,
    delete_namespace,
    new_namespace,
    open_client,
    pod_addresses,
    run_on_testbed,
    settled,
)

from valkey_operator.core.client import Client
from valkey_operator.core.resource import PODS
from valkey_testbed import peer
from valkey_testbed.datachecker import DataChecker, WriterReport
from valkey_testbed.images import resolve_image

Obj = dict[str, Any]
SIDES = ("ours", "peer")
SHARDS, REPLICAS = 3, 1
WRITE_INTERVAL = 0.01
ROWS = (
    ("bootstrap_s", "a. 3x1 bootstrap to serving every slot", "s"),
    ("roll_s", "b. roll: total", "s"),
    ("roll_gap_s", "b. roll: longest write gap of any shard", "s"),
    ("roll_acked_gap_s", "b. roll: longest gap in replicated (WAIT 1) writes", "s"),
    ("roll_lost", "b. roll: acknowledged writes lost", ""),
    ("scale_s", "c. scale 3 -> 4 shards", "s"),
    ("scale_lost", "c. scale: keys lost", ""),
    ("failover_s", "d. primary's pod deleted: its slots writable again", "s"),
    ("recovered_s", "d. primary's pod deleted: whole again", "s"),
    ("cpu_s", "e. operator CPU seconds (a-d)", "s"),
    ("rss_mib", "e. operator peak RSS", "MiB"),
)


class Round:
    """One side's four scenarios on one namespace."""

    def __init__(self, side: Side, kube: Client, namespace: str, args: argparse.Namespace) -> None:
        self.side, self.kube, self.namespace, self.args = side, kube, namespace, args
        self.result: Obj = {}

    async def settled(self, shape: Shape) -> None:
        await settled(self.side, self.kube, self.namespace, shape, self.args.timeout)

    async def seeds(self) -> list[tuple[str, int]]:
        found = await pod_addresses(self.kube, self.namespace)
        assert isinstance(found, list)
        return found

    async def run(self) -> Obj:
        args = self.args
        started = time.monotonic()
        await self.side.create(self.namespace, SHARDS, REPLICAS, args.old)
        await self.settled(Shape(SHARDS, REPLICAS, args.old))
        self.result["bootstrap_s"] = time.monotonic() - started
        username, password = await self.side.credentials(self.namespace)
        async with (
            DataChecker(
                await self.seeds(), replicas=REPLICAS, username=username, password=password
            ) as durable,
            DataChecker(
                await self.seeds(), replicas=0, prefix="probe", username=username, password=password
            ) as probe,
        ):
            await self.roll(durable, probe)
            await self.scale(durable)
            await self.failover(durable, probe)
        return self.result

    async def under_writers(
        self, durable: DataChecker, probe: DataChecker, action: Any
    ) -> list[WriterReport]:
        stop = asyncio.Event()
        writers = [
            asyncio.create_task(
                checker.run_writer(
                    max_keys=10**6, duration=self.args.timeout, interval=WRITE_INTERVAL, stop=stop
                )
            )
            for checker in (durable, probe)
        ]
        try:
            await asyncio.sleep(2.0)  # writes on every shard before the change
            await action()
        finally:
            stop.set()
        return list(await asyncio.gather(*writers))

    async def roll(self, durable: DataChecker, probe: DataChecker) -> None:
        shape = Shape(SHARDS, REPLICAS, self.args.new)

        async def change() -> None:
            started = time.monotonic()
            await self.side.set_image(self.namespace, self.args.new)
            await self.settled(shape)
            self.result["roll_s"] = time.monotonic() - started

        reports = await self.under_writers(durable, probe, change)
        self.result["roll_gap_s"] = max(reports[1].gaps_by_slots.values())
        self.result["roll_acked_gap_s"] = max(reports[0].gaps_by_slots.values())
        self.result["roll_lost"] = await self.lost(durable)

    async def scale(self, durable: DataChecker) -> None:
        durable.seeds = await self.seeds()
        await durable.refresh()
        loaded = await durable.write(self.args.keys, batch=500, timeout=self.args.timeout)
        self.result["scale_keys"] = loaded.acknowledged
        started = time.monotonic()
        await self.side.set_shards(self.namespace, SHARDS + 1)
        await self.settled(Shape(SHARDS + 1, REPLICAS, self.args.new))
        self.result["scale_s"] = time.monotonic() - started
        self.result["scale_lost"] = await self.lost(durable)

    async def failover(self, durable: DataChecker, probe: DataChecker) -> None:
        for checker in (durable, probe):
            checker.seeds = await self.seeds()
            await checker.refresh()
        ranges = probe.slot_ranges()
        victim = next(address for address, spans in ranges.items() if spans[0][0] == 0)
        label = ",".join(f"{start}-{end}" for start, end in ranges[victim])
        pod = next(
            p for p in await self.kube.list(PODS, self.namespace) if p["status"].get("podIP") == victim[0]
        )
        timings: Obj = {}

        async def change() -> None:
            started = time.monotonic()
            await self.kube.delete(PODS, pod["metadata"]["name"], self.namespace, uid=pod["metadata"]["uid"])
            await asyncio.sleep(1.0)  # let the statuses see the loss before waiting for whole
            await self.settled(Shape(SHARDS + 1, REPLICAS, self.args.new))
            timings["recovered_s"] = time.monotonic() - started

        reports = await self.under_writers(durable, probe, change)
        self.result["failover_s"] = reports[1].gaps_by_slots[label]
        self.result.update(timings)
        self.result["failover_lost"] = await self.lost(durable)

    async def lost(self, durable: DataChecker) -> int:
        durable.seeds = await self.seeds()
        await durable.refresh()
        verified = await durable.verify()
        return len(verified.missing) + len(verified.wrong) + len(verified.unreadable)


async def one_round(side: Ours | Peer, kube: Client, index: int, args: argparse.Namespace) -> Obj:
    namespace = f"peers-{time.strftime('%H%M%S')}-{index}-{side.name}"
    await new_namespace(kube, namespace)
    await side.start()
    try:
        result = await Round(side, kube, namespace, args).run()
        usage = side.usage()
    finally:
        await side.delete(namespace)
        await side.stop()
        await delete_namespace(kube, namespace)
    result["cpu_s"] = usage.cpu_seconds
    result["rss_mib"] = usage.peak_rss_mib
    return result


def line(side: str, index: int, result: Obj) -> str:
    if "error" in result:
        return f"round {index + 1} {side:4}: DID NOT FINISH: {result['error']}"
    parts = [
        f"{key}={result[key]:.2f}" if isinstance(result[key], float) else f"{key}={result[key]}"
        for key in result
    ]
    return f"round {index + 1} {side:4}: " + " ".join(parts)


def cell(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.2f} {unit}".strip() if isinstance(value, float) else str(value)


def table(summary: dict[str, Obj], sides: list[str]) -> str:
    """The medians as a Markdown table, ours first, with peer/ours when both ran."""
    sides = sorted(sides, key=SIDES.index)
    both = len(sides) == 2
    header = "| | " + " | ".join(sides) + " |" + (" peer/ours |" if both else "")
    rows = [header, "|---" * (len(sides) + 1 + both) + "|"]
    for key, label, unit in ROWS:
        values = [summary.get(side, {}).get(key) for side in sides]
        cells = [cell(value, unit) for value in values]
        ratio = ""
        if both:
            ours, theirs = values
            ratio = f" {theirs / ours:.2f}x |" if ours and theirs is not None else " - |"
        rows.append(f"| {label} | {' | '.join(cells)} |{ratio}")
    return "\n".join(rows)


async def drive(args: argparse.Namespace, kubeconfig: str, log_dir: Path) -> int:
    api, kube = await open_client(kubeconfig)
    found = peer.find_peer()
    made: dict[str, Ours | Peer] = {"ours": Ours(kube, kubeconfig, [args.old, args.new], log_dir)}
    if isinstance(found, peer.Peer):
        made["peer"] = Peer(kube, kubeconfig, found, log_dir)
    results: dict[str, list[Obj]] = {side: [] for side in args.sides}
    try:
        for index in range(args.rounds):
            order = args.sides if index % 2 == 0 else args.sides[::-1]
            for name in order:
                try:
                    result = await one_round(made[name], kube, index, args)
                except Exception as exc:  # report it and go on with the other side
                    result = {"error": f"{type(exc).__name__}: {exc}"}
                results[name].append(result)
                print(line(name, index, result), flush=True)
    finally:
        for side in made.values():
            await side.cleanup()
        await api.close()
    summary: dict[str, Obj] = {}
    for name, rounds in results.items():
        done = [result for result in rounds if "error" not in result]
        if done:
            summary[name] = {key: statistics.median(r[key] for r in done) for key in done[0]}
            summary[name]["rounds"] = len(done)
    record = {
        "measured": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "peer": peer.PINNED_VERSION if isinstance(found, peer.Peer) else None,
        "args": {k: v for k, v in vars(args).items() if k not in ("kubeconfig", "log_dir", "output")},
        "results": results,
        "summary": summary,
    }
    if args.output:
        await asyncio.to_thread(Path(args.output).write_text, json.dumps(record, indent=2) + "\n")
    print(f"\nmedians of {args.rounds} rounds, {args.old} -> {args.new}, {args.keys} keys")
    print(f"load average at the end {record['load_average']}:")
    print(table(summary, args.sides))
    return 0 if all(summary.get(side, {}).get("rounds") == args.rounds for side in args.sides) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES), help=f"a subset of {','.join(SIDES)}")
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--old", default="valkey/valkey:9.1.0")
    parser.add_argument("--new", default="valkey/valkey:9.1.2")
    parser.add_argument("--timeout", type=float, default=900.0, help="per phase, seconds")
    parser.add_argument("--output", help="also write the JSON record to this file")
    parser.add_argument("--kubeconfig", help="a running test bed (with the process kubelet)")
    parser.add_argument("--log-dir", help="keep the operators' logs here (default: a temp dir)")
    args = parser.parse_args()
    args.sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    if set(args.sides) - set(SIDES) or args.rounds < 1:
        parser.error(f"--sides from {SIDES}, --rounds >= 1")
    found = peer.find_peer()
    if "peer" in args.sides and not isinstance(found, peer.Peer):
        parser.error(f"the peer is absent: {found.reason}")
    for reference in (args.old, args.new):
        if resolve_image(reference) is None:
            parser.error(f"{reference} is not installed: run `python -m valkey_testbed build`")
    sys.exit(run_on_testbed(functools.partial(drive, args), args.kubeconfig, args.log_dir, "bench-peers-"))


if __name__ == "__main__":
    main()
