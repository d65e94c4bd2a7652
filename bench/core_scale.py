"""Controller-core cost at scale, apart from start-up: ours vs controller-runtime.

For each size (default 10,000, then 100,000) creates that many small
ConfigMaps in a fresh namespace of the local test bed's real API server (32
concurrent creates), then runs each side in a fresh process over the same
objects, in alternating order for `--rounds` rounds. Both sides run one
controller on ConfigMaps with `--workers` workers whose reconciler reads the
object from its cache and counts (ours: bench/core_sides.py with --updates; the
other: bench/controller_runtime/main.go with -updates, built as by
core_throughput.py). Each side reports, measured inside its own process:

- initial sync: seconds from after start-up (Python: after imports and
  kubeconfig; Go: from main()) to the last object's first reconcile;
- memory: VmRSS just before the manager runs and at that last first reconcile;
  (after - before) / N is the RSS per cached object; peak RSS (VmHWM) at the
  end;
- for each update phase: once synced, the driver changes `--updates` objects
  (default a tenth of N, at least 1,000; data.u, a merge patch each,
  `--concurrency` at once) and the side reports
  the wall-clock time of the first update event carrying the phase's value
  (the informer's handler / predicate) and of the reconcile that completed the
  set of changed objects, the update events and distinct resourceVersions it
  saw (each must be every update), and its CPU seconds in between.

Phase "live": the side runs while the driver writes, so its events/s cannot
exceed the writer's; what it shows is whether a side keeps up (its lag: last
reconcile minus the driver's last acknowledged write) and its CPU per event.
Phase "backlog" (unless --no-backlog): the driver stops the side (SIGSTOP)
before writing and continues it (SIGCONT) after the last write was
acknowledged, so the events wait in the socket (or, when the API server gives
up on the stopped watcher, in its watch cache, from where the side's re-watch
replays them): events/s is how fast the side drains them, its throughput.

    python bench/core_scale.py [--sizes 10000,100000] [--rounds 3] [--updates K]
        [--sides ours,controller-runtime,ours-apiclient] [--kubeconfig PATH] [--reuse] [--keep]
        [--profile FILE]

Medians over the rounds go into one table, with the ratios
ours/controller-runtime (for throughput: the other side's events/s over
ours, so above 1 means ours is slower). Without --kubeconfig a control plane
is started in a temporary directory. `--reuse` keeps objects a previous
`--keep` run left in `bench-scale-<N>`, instead of creating them again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))

from core_throughput import (
    PROFILE_RATE,
    ROOT,
    SIDE_SCRIPT,
    controller_runtime_binary,
    create_objects,
    delete_namespaces,
    summarize_profile,
)

SIDES = ("ours", "controller-runtime", "ours-apiclient")
"""ours-apiclient: the same core with its requests carried by kubernetes-asyncio's ApiClient (built
from the same loaded Configuration) instead of the core's own aiohttp session; not run by default."""
DEFAULT_SIDES = SIDES[:2]
GOAL_COUNT = 100_000
GOAL_THROUGHPUT = 1.2
GOAL_RSS = 2.0
"""The issue's goals at 100,000 objects: throughput within 1.2x of controller-runtime, RSS within 2x."""


@attrs.frozen
class Phase:
    """One update phase as a side saw it, and the driver's writes."""

    kind: str  # "live" or "backlog"
    events_seconds: float  # first to last update event
    seconds: float  # first update event to the reconcile completing the set
    events: int
    versions: int
    cpu_seconds: float
    writes_seconds: float  # the driver's first write sent to last acknowledged
    lag: float  # the side's last reconcile minus the driver's last acknowledged write


@attrs.frozen
class ScaleRun:
    side: str
    sync_seconds: float
    rss_before_kib: int
    rss_synced_kib: int
    peak_kib: int
    phases: tuple[Phase, ...]


async def update_objects(
    kubeconfig: str, namespace: str, count: int, value: str, concurrency: int
) -> tuple[float, float]:
    """Merge-patch data.u = value into cm-000000.. cm-<count-1>; wall-clock times of the first
    write sent and the last acknowledged."""
    from kubernetes_asyncio import client, config

    from valkey_operator.core.client import Client
    from valkey_operator.core.resource import CONFIG_MAPS
    from valkey_operator.core.rest import RestClient

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    configuration.connection_pool_maxsize = concurrency
    async with client.ApiClient(configuration) as api:
        kube = Client(RestClient(api), field_manager="bench")
        names = iter(range(count))
        patch = {"data": {"u": value}}
        started = time.time()

        async def writer() -> None:
            for index in names:
                await kube.patch(CONFIG_MAPS, f"cm-{index:06d}", patch, namespace)

        await asyncio.gather(*(writer() for _ in range(concurrency)))
        return started, time.time()


async def _lines(stream: asyncio.StreamReader) -> AsyncIterator[dict[str, Any]]:
    """The side's JSON lines that carry an event; anything else (a log line) is skipped."""
    while line := await stream.readline():
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if isinstance(parsed, dict) and "event" in parsed:
            yield parsed


async def _expect(lines: AsyncIterator[dict[str, Any]], event: str) -> dict[str, Any]:
    async for line in lines:
        if line["event"] == event:
            return line
    raise RuntimeError(f"the side ended before its {event!r} line")


async def run_side(
    side: str,
    command: list[str],
    kubeconfig: str,
    namespace: str,
    args: argparse.Namespace,
    tag: str,
    profile: bool = False,
) -> ScaleRun:
    """One side's process through its sync and update phases; killed after args.timeout.

    `profile`: py-spy samples the process from its start to its end (into args.profile).
    """
    kinds = ["live"] + ([] if args.no_backlog else ["backlog"])
    with tempfile.TemporaryFile() as err:
        process = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=err, cwd=ROOT
        )
        assert process.stdout is not None
        profiler = await _start_profiler(process.pid, args.profile) if profile else None
        lines = _lines(process.stdout)
        try:
            async with asyncio.timeout(args.timeout):
                starting = await _expect(lines, "starting")
                synced = await _expect(lines, "synced")
                phases = []
                for number, kind in enumerate(kinds, start=1):
                    if kind == "backlog":
                        os.kill(process.pid, signal.SIGSTOP)
                    try:
                        write_start, write_end = await update_objects(
                            kubeconfig, namespace, args.updates_for, f"{tag}{number}", args.concurrency
                        )
                    finally:
                        if kind == "backlog":
                            os.kill(process.pid, signal.SIGCONT)
                    line = await _expect(lines, "phase")
                    phases.append(
                        Phase(
                            kind=kind,
                            seconds=line["finished_at"] - line["first_event_at"],
                            events_seconds=line.get("last_event_at", line["first_event_at"])
                            - line["first_event_at"],
                            events=line["events"],
                            versions=line["versions"],
                            cpu_seconds=line["cpu_seconds"],
                            writes_seconds=write_end - write_start,
                            lag=line["finished_at"] - write_end,
                        )
                    )
                done = await _expect(lines, "done")
                if await process.wait() != 0:
                    raise RuntimeError(f"exit {process.returncode}")
                if profiler is not None:
                    await profiler.wait()
            if args.side_logs:
                err.seek(0)
                args.side_logs.mkdir(parents=True, exist_ok=True)
                (args.side_logs / f"{side}-{tag}log").write_bytes(err.read())
        except BaseException as exc:
            if process.returncode is None:
                process.kill()
                await process.wait()
            err.seek(0)
            stderr = err.read().decode(errors="replace")[-3000:]
            raise SystemExit(f"{side} failed ({type(exc).__name__}: {exc}):\n{stderr}") from exc
    return ScaleRun(
        side=side,
        sync_seconds=synced["seconds"],
        rss_before_kib=starting["rss_before_kib"],
        rss_synced_kib=synced["rss_synced_kib"],
        peak_kib=done["rss_kib"],
        phases=tuple(phases),
    )


async def _start_profiler(pid: int, output: Path) -> asyncio.subprocess.Process:
    """py-spy attached to pid (samples of the thread holding the GIL), until that process ends."""
    record = ["py-spy", "record", "--gil", "--format", "raw", "--rate", str(PROFILE_RATE)]
    return await asyncio.create_subprocess_exec(
        *record, "-o", str(output), "--pid", str(pid), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


def side_command(
    side: str, binary: Path, kubeconfig: str, namespace: str, count: int, args: argparse.Namespace, tag: str
) -> list[str]:
    phases = 1 if args.no_backlog else 2
    common = [
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        f"--count={count}",
        f"--workers={args.workers}",
        f"--updates={args.updates_for}",
        f"--phases={phases}",
        f"--tag={tag}",
    ]
    if side == "controller-runtime":
        return [str(binary), *common]
    return [sys.executable, str(SIDE_SCRIPT), side, *common]


@attrs.frozen
class Median:
    """The medians of one side's runs at one size."""

    sync_seconds: float
    rss_per_object: float  # bytes
    rss_synced_mib: float
    peak_mib: float
    events_per_second: dict[str, float]
    cpu_us_per_event: dict[str, float]
    lag: dict[str, float]
    writes_per_second: dict[str, float]


def median_of(runs: Sequence[ScaleRun], count: int, updates: int) -> Median:
    kinds = [phase.kind for phase in runs[0].phases]

    def per_kind(value: Any) -> dict[str, float]:
        return {
            kind: statistics.median(value(run.phases[index]) for run in runs)
            for index, kind in enumerate(kinds)
        }

    return Median(
        sync_seconds=statistics.median(run.sync_seconds for run in runs),
        rss_per_object=statistics.median(
            (run.rss_synced_kib - run.rss_before_kib) * 1024 / count for run in runs
        ),
        rss_synced_mib=statistics.median(run.rss_synced_kib / 1024 for run in runs),
        peak_mib=statistics.median(run.peak_kib / 1024 for run in runs),
        events_per_second=per_kind(lambda p: updates / p.seconds),
        cpu_us_per_event=per_kind(lambda p: 1e6 * p.cpu_seconds / updates),
        lag=per_kind(lambda p: p.lag),
        writes_per_second=per_kind(lambda p: updates / p.writes_seconds),
    )


def print_run(round_index: int, run: ScaleRun, count: int, updates: int) -> None:
    per_object = (run.rss_synced_kib - run.rss_before_kib) * 1024 / count
    phases = "; ".join(
        f"{p.kind} {updates / p.seconds:,.0f} ev/s (events over {p.events_seconds:.2f}s, "
        f"writes {updates / p.writes_seconds:,.0f}/s, "
        f"lag {p.lag:.2f}s, {p.events} events {p.versions} versions, "
        f"{1e6 * p.cpu_seconds / updates:.0f} us CPU/ev)"
        for p in run.phases
    )
    print(
        f"  round {round_index + 1} {run.side:>18}: sync {run.sync_seconds:6.2f}s, "
        f"RSS {run.rss_before_kib / 1024:.0f} -> {run.rss_synced_kib / 1024:.0f} MiB "
        f"({per_object:,.0f} B/object), peak {run.peak_kib / 1024:.0f} MiB; {phases}",
        flush=True,
    )
    for phase in run.phases:
        if phase.events != updates or phase.versions != updates:
            print(f"    note: {run.side} saw {phase.events} {phase.kind} events, {updates} expected")


def print_ratios(results: dict[int, dict[str, Median]], kinds: Iterable[str], other: str) -> None:
    """ours against other at each size both ran."""
    if not any("ours" in medians and other in medians for medians in results.values()):
        return
    print(f"\nratios ours / {other} (time or cost; throughput: theirs / ours)\n")
    head = "| objects | initial sync |" + "".join(f" {k} throughput | {k} CPU/event |" for k in kinds)
    head += " RSS/object | peak RSS |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for count, medians in results.items():
        if "ours" not in medians or other not in medians:
            continue
        ours, theirs = medians["ours"], medians[other]
        row = f"| {count:,} | {ours.sync_seconds / theirs.sync_seconds:.2f}x |"
        for kind in kinds:
            row += (
                f" {theirs.events_per_second[kind] / ours.events_per_second[kind]:.2f}x |"
                f" {ours.cpu_us_per_event[kind] / theirs.cpu_us_per_event[kind]:.2f}x |"
            )
        row += (
            f" {ours.rss_per_object / theirs.rss_per_object:.2f}x | {ours.peak_mib / theirs.peak_mib:.2f}x |"
        )
        print(row)


def report(results: dict[int, dict[str, Median]], rounds: int, load: list[float]) -> None:
    print(
        f"\nmedians over {rounds} rounds; load average during the runs {min(load):.1f} to {max(load):.1f}\n"
    )
    kinds = next(iter(next(iter(results.values())).values())).events_per_second.keys()
    head = "| objects | side | initial sync | objects/s |"
    for kind in kinds:
        head += f" {kind} events/s | {kind} CPU/event |"
    head += " lag (live) | RSS/object | RSS synced | peak RSS |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for count, medians in results.items():
        for side, m in medians.items():
            row = f"| {count:,} | {side} | {m.sync_seconds:.2f} s | {count / m.sync_seconds:,.0f} |"
            for kind in kinds:
                row += f" {m.events_per_second[kind]:,.0f} | {m.cpu_us_per_event[kind]:.0f} us |"
            row += (
                f" {m.lag['live']:.2f} s | {m.rss_per_object:,.0f} B | {m.rss_synced_mib:.0f} MiB |"
                f" {m.peak_mib:.0f} MiB |"
            )
            print(row)
        writes = {k: statistics.median(m.writes_per_second[k] for m in medians.values()) for k in kinds}
        print(
            "|  | (driver's writes) | | | " + " | ".join(f"{writes[k]:,.0f}/s | " for k in kinds) + " | | | |"
        )
    for other in SIDES[1:]:
        print_ratios(results, kinds, other)
    goal = results.get(GOAL_COUNT, {})
    if "ours" in goal and "controller-runtime" in goal:
        ours, theirs = goal["ours"], goal["controller-runtime"]
        kind = "backlog" if "backlog" in kinds else "live"
        throughput = theirs.events_per_second[kind] / ours.events_per_second[kind]
        rss = ours.rss_per_object / theirs.rss_per_object
        peak = ours.peak_mib / theirs.peak_mib
        print(
            f"\ngoal at {GOAL_COUNT:,}: {kind} throughput within {GOAL_THROUGHPUT}x: {throughput:.2f}x "
            f"({'met' if throughput <= GOAL_THROUGHPUT else 'NOT met'}); RSS within {GOAL_RSS}x: "
            f"per object {rss:.2f}x, peak {peak:.2f}x "
            f"({'met' if max(rss, peak) <= GOAL_RSS else 'NOT met'})"
        )


async def namespace_exists(kubeconfig: str, namespace: str) -> bool:
    from kubernetes_asyncio import client, config

    from valkey_operator.core.client import Client
    from valkey_operator.core.resource import NAMESPACES
    from valkey_operator.core.rest import RestClient

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        found = await Client(RestClient(api), field_manager="bench").get_or_none(NAMESPACES, namespace)
        return found is not None and not found.get("metadata", {}).get("deletionTimestamp")


def updates_for(updates: int | None, count: int) -> int:
    """Objects changed per phase: as asked, else a tenth of them (at least 1,000); never more than count."""
    return min(count, updates if updates else max(count // 10, 1000))


def drive(kubeconfig: str, args: argparse.Namespace) -> list[str]:
    """Measure every size and print the table; returns the namespaces created."""
    sides: tuple[str, ...] = tuple(args.sides.split(","))
    binary = controller_runtime_binary() if "controller-runtime" in sides else Path()
    results: dict[int, dict[str, Median]] = {}
    namespaces: list[str] = []
    load: list[float] = []
    for count in args.sizes:
        namespace = f"bench-scale-{count}"
        if args.reuse and asyncio.run(namespace_exists(kubeconfig, namespace)):
            print(f"\n{count} ConfigMaps: reusing namespace {namespace}", flush=True)
        else:
            seconds = asyncio.run(create_objects(kubeconfig, namespace, count, args.concurrency))
            print(f"\n{count} ConfigMaps created in {seconds:.1f}s ({count / seconds:.0f}/s)", flush=True)
        namespaces.append(namespace)
        args.updates_for = updates_for(args.updates, count)
        runs: dict[str, list[ScaleRun]] = {side: [] for side in sides}
        for round_index in range(args.rounds):
            order = sides if round_index % 2 == 0 else tuple(reversed(sides))
            for side in order:
                tag = f"{int(time.time() * 1000) % 10**9}-"
                command = side_command(side, binary, kubeconfig, namespace, count, args, tag)
                load.append(os.getloadavg()[0])
                run = asyncio.run(run_side(side, command, kubeconfig, namespace, args, tag))
                load.append(os.getloadavg()[0])
                runs[side].append(run)
                print_run(round_index, run, count, args.updates_for)
        results[count] = {
            side: median_of(side_runs, count, args.updates_for) for side, side_runs in runs.items()
        }
    report(results, args.rounds, load)
    if args.profile:
        largest = max(args.sizes)
        namespace = namespaces[args.sizes.index(largest)]
        args.updates_for = updates_for(args.updates, largest)
        tag = f"{int(time.time() * 1000) % 10**9}-"
        command = side_command("ours", binary, kubeconfig, namespace, largest, args, tag)
        run = asyncio.run(run_side("ours", command, kubeconfig, namespace, args, tag, profile=True))
        print_run(args.rounds, run, largest, args.updates_for)
        summarize_profile(args.profile)
    return namespaces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=lambda s: [int(n) for n in s.split(",")], default=[10_000, 100_000],
                        help="object counts, comma-separated (default 10000,100000)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--updates", type=int, help="objects changed per phase (at most N; default N/10, at least 1,000)"
    )
    parser.add_argument("--no-backlog", action="store_true", help="only the live update phase")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent creates and updates")
    parser.add_argument(
        "--sides", default=",".join(DEFAULT_SIDES), help=f"comma-separated, of {', '.join(SIDES)}"
    )
    parser.add_argument("--workers", type=int, default=4, help="concurrent reconciles")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one side's process may run")
    parser.add_argument(
        "--profile", type=Path, help="one more run of ours at the largest size under py-spy; raw output here"
    )
    parser.add_argument("--side-logs", type=Path, help="keep each side's stderr in this directory")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--reuse", action="store_true", help="reuse bench-scale-<N> if it exists")
    parser.add_argument("--keep", action="store_true", help="do not delete the namespaces at the end")
    args = parser.parse_args()
    unknown = set(args.sides.split(",")) - set(SIDES)
    if unknown:
        parser.error(f"unknown sides: {', '.join(sorted(unknown))}")
    if args.kubeconfig:
        namespaces = drive(args.kubeconfig, args)
        if not args.keep:
            asyncio.run(delete_namespaces(args.kubeconfig, namespaces))
        return
    from valkey_testbed.controlplane import ControlPlane

    with tempfile.TemporaryDirectory(prefix="bench-") as state:
        plane = ControlPlane(Path(state))
        plane.up()
        try:
            drive(str(plane.kubeconfig), args)
        finally:
            plane.down()


if __name__ == "__main__":
    main()
