"""Controller-core throughput: N objects, a no-op reconciler, time to the last reconcile.

For each size (default 1,000, then 10,000) creates that many ConfigMaps in a
fresh namespace of the local test bed's real API server, then runs, each in a
fresh process, over the same objects and in alternating order for `--rounds`
rounds (forward, then reversed):

- ours: a Manager with one controller on ConfigMaps whose reconciler only
  counts (`--workers` workers, default 4);
- controller-runtime: the same in Go, a minimal manager
  (bench/controller_runtime/main.go: `For(&corev1.ConfigMap{})`,
  MaxConcurrentReconciles = `--workers`, the cache restricted to the
  namespace, metrics and health probes off), built from the pinned
  `sigs.k8s.io/controller-runtime` module;
- kopf with its low-level `@kopf.on.event` handler.

No side writes to the API server. Each process stops once it has seen every
object and prints the wall-clock time of that last first reconcile; the time
reported is from the process's spawn to then, so it includes interpreter start,
imports and the initial LIST ("after start-up" is the part measured inside the
process: from after the imports and kubeconfig for Python, from main() for Go).
Peak RSS is the process's own VmHWM, which it reads from /proc/self/status when
done; CPU seconds (user + sys) are the child's, from wait4. The medians over the
rounds go into one table with the ratios ours/controller-runtime and kopf/ours.

    python bench/core_throughput.py [--sizes 1000,10000] [--rounds 2] [--kubeconfig PATH]
        [--sides ours,controller-runtime,kopf] [--profile FILE]

`--profile FILE` runs ours once more at the largest size under py-spy
(`pip install py-spy`), writes its raw samples to FILE and prints the share
spent importing modules and the top functions of the rest, by own and by
inclusive time holding the GIL.

The Go binary is built on first use (`go mod tidy`, `go build -trimpath
-ldflags "-s -w"`, a fresh compiler cache, so the time printed is a cold
build) into `<test bed cache>/bench/controller-runtime-<version>/`, and
rebuilt only when the pinned version, main.go, go.mod.tmpl or the Go toolchain
changes. Without --kubeconfig a control plane is started in a temporary
directory (build it first: `python -m valkey_testbed build`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
GO_SOURCE = ROOT / "bench" / "controller_runtime"
SIDE_SCRIPT = ROOT / "bench" / "core_sides.py"
"""The Python sides run from their own small script: this driver's imports are no part of their start-up."""

CONTROLLER_RUNTIME = "v0.25.2"
"""The sigs.k8s.io/controller-runtime version measured; `go mod tidy` picks the k8s.io modules it needs."""

SIDES = ("ours", "controller-runtime", "kopf")
GOAL_COUNT = 10_000
GOAL_RATIO = 1.5
"""The issue's goal: ours within 1.5x of controller-runtime's time at 10,000 objects."""


# -- the Go side: a controller-runtime manager, built once ---------------------------------


def _go(args: list[str], work: Path, cache: Path) -> float:
    from valkey_testbed.build import go_env

    print("  $ " + shlex.join(["go", *args]), flush=True)
    started = time.monotonic()
    result = subprocess.run(
        ["go", *args], cwd=work, env=go_env(work, cache), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=3600,
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"go {' '.join(args)} failed in {work} (exit {result.returncode}):\n{result.stdout}")
    return time.monotonic() - started


def controller_runtime_binary() -> Path:
    """The benchmark's Go manager, built when missing or stale; prints the cold build's time."""
    from valkey_testbed.build import cache_root

    target_dir = cache_root() / "bench" / f"controller-runtime-{CONTROLLER_RUNTIME}"
    binary = target_dir / "crbench"
    stamp_file = target_dir / ".stamp"
    resolved_file = target_dir / "modules.txt"
    main_go = (GO_SOURCE / "main.go").read_bytes()
    go_mod = string.Template((GO_SOURCE / "go.mod.tmpl").read_text()).substitute(
        controller_runtime=CONTROLLER_RUNTIME
    )
    go_version = subprocess.run(
        ["go", "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()
    digest = hashlib.sha256(main_go + go_mod.encode()).hexdigest()[:16]
    stamp = f"controller-runtime {CONTROLLER_RUNTIME} source {digest} built by {go_version}\n"
    if binary.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        modules = resolved_file.read_text().strip()
        print(f"controller-runtime {CONTROLLER_RUNTIME}: cached at {binary} ({modules})")
        return binary
    print(f"controller-runtime {CONTROLLER_RUNTIME}: building {binary} (a cold build)...", flush=True)
    work, go_cache = target_dir / "src", target_dir / "go-build"
    for path in (work, go_cache):
        shutil.rmtree(path, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "go.mod").write_text(go_mod)
    (work / "main.go").write_bytes(main_go)
    tidy = _go(["mod", "tidy"], work, go_cache)
    partial = binary.with_suffix(".partial")
    compile_seconds = _go(
        ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial), "."], work, go_cache
    )
    pattern = r"^\s*(k8s\.io/(?:api|apimachinery|client-go)) (v\S+)"
    resolved = re.findall(pattern, (work / "go.mod").read_text(), re.MULTILINE)
    resolved_file.write_text(", ".join(f"{module} {version}" for module, version in resolved) + "\n")
    partial.replace(binary)
    stamp_file.write_text(stamp)
    # The compiler cache only speeds up a rebuild of the same sources, and a rebuild should be cold.
    shutil.rmtree(go_cache, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    print(
        f"controller-runtime {CONTROLLER_RUNTIME}: cold build {tidy + compile_seconds:.0f}s "
        f"(go mod tidy {tidy:.0f}s, go build {compile_seconds:.0f}s, {go_version}), "
        f"{binary.stat().st_size / 2**20:.0f} MiB; {resolved_file.read_text().strip()}"
    )
    return binary


# -- the driver -----------------------------------------------------------------------------


@attrs.frozen
class Run:
    """One side's process: seconds from spawn to its last first reconcile, and its own resources.

    Peak RSS is what the process read from /proc/self/status (VmHWM) when done; CPU seconds (user +
    sys) are from wait4.
    """

    side: str
    seconds: float
    after_start: float
    """Seconds measured inside the process, from after imports (Python) or main() (Go)."""
    rss_mib: float
    cpu_seconds: float


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


async def delete_namespaces(kubeconfig: str, namespaces: Sequence[str]) -> None:
    """Ask for the benchmark's namespaces to go; the namespace controller deletes their objects later."""
    from kubernetes_asyncio import client, config

    from valkey_operator.core.client import Client
    from valkey_operator.core.resource import NAMESPACES
    from valkey_operator.core.rest import RestClient

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        kube = Client(RestClient(api), field_manager="bench")
        for namespace in namespaces:
            await kube.delete(NAMESPACES, namespace)


def run_process(command: list[str], timeout: float) -> tuple[float, str, resource.struct_rusage]:
    """Run command to its end (killed after timeout); its spawn time, stdout, and its own rusage."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        spawned = time.time()
        process = subprocess.Popen(command, stdout=out, stderr=err, cwd=ROOT)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                process.returncode = os.waitstatus_to_exitcode(status)
                raise SystemExit(f"{command[0]} ran over {timeout:.0f}s and was killed")
            time.sleep(0.02)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            stderr = err.read().decode(errors="replace")
            raise SystemExit(f"{' '.join(command[:3])} exited {process.returncode}:\n{stderr[-3000:]}")
        return spawned, out.read().decode(), usage


def side_command(
    side: str, binary: Path, kubeconfig: str, namespace: str, count: int, workers: int
) -> list[str]:
    common = [f"--kubeconfig={kubeconfig}", f"--namespace={namespace}", f"--count={count}"]
    common.append(f"--workers={workers}")
    if side == "controller-runtime":
        return [str(binary), *common]
    return [sys.executable, str(SIDE_SCRIPT), side, *common]


def run_side(side: str, command: list[str], timeout: float) -> Run:
    spawned, stdout, usage = run_process(command, timeout)
    line = json.loads(stdout.strip().splitlines()[-1])
    return Run(
        side=side,
        seconds=line["finished_at"] - spawned,
        after_start=line["seconds"],
        rss_mib=line["rss_kib"] / 1024,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
    )


@attrs.frozen
class Median:
    """The medians of one side's runs at one size."""

    seconds: float
    after_start: float
    rss_mib: float
    cpu_seconds: float


def measure(
    kubeconfig: str,
    count: int,
    rounds: int,
    sides: Sequence[str],
    command: Callable[[str, str, int], list[str]],
    timeout: float,
) -> tuple[str, dict[str, Median]]:
    """Create `count` ConfigMaps in a new namespace; run every side over them `rounds` times."""
    namespace = f"bench-{count}-{int(time.time())}"
    create_seconds = asyncio.run(create_objects(kubeconfig, namespace, count))
    print(
        f"\n{count} ConfigMaps created in {create_seconds:.1f}s ({count / create_seconds:.0f}/s)", flush=True
    )
    runs: dict[str, list[Run]] = {side: [] for side in sides}
    for round_index in range(rounds):
        order = sides if round_index % 2 == 0 else tuple(reversed(sides))
        for side in order:
            run = run_side(side, command(side, namespace, count), timeout)
            runs[side].append(run)
            print(
                f"  round {round_index + 1} {side:>18}: {run.seconds:6.2f}s to last reconcile "
                f"({run.after_start:.2f}s after start-up), {count / run.seconds:6.0f} objects/s, "
                f"peak RSS {run.rss_mib:4.0f} MiB, CPU {run.cpu_seconds:5.2f}s",
                flush=True,
            )
    medians = {
        side: Median(
            statistics.median(r.seconds for r in side_runs),
            statistics.median(r.after_start for r in side_runs),
            statistics.median(r.rss_mib for r in side_runs),
            statistics.median(r.cpu_seconds for r in side_runs),
        )
        for side, side_runs in runs.items()
    }
    return namespace, medians


def report(results: dict[int, dict[str, Median]], rounds: int) -> None:
    print(f"\nmedians over {rounds} rounds (time: process spawn to the last object's first reconcile)\n")
    print("| objects | side | time | of which after start-up | objects/s | peak RSS | CPU (user+sys) |")
    print("|---|---|---|---|---|---|---|")
    for count, medians in results.items():
        for side, m in medians.items():
            print(
                f"| {count:,} | {side} | {m.seconds:.2f} s | {m.after_start:.2f} s | "
                f"{count / m.seconds:,.0f} | {m.rss_mib:.0f} MiB | {m.cpu_seconds:.2f} s |"
            )
    print("\n| objects | ratio | time | peak RSS | CPU |")
    print("|---|---|---|---|---|")
    for count, medians in results.items():
        for a, b in (("ours", "controller-runtime"), ("kopf", "ours")):
            if a in medians and b in medians:
                x, y = medians[a], medians[b]
                print(
                    f"| {count:,} | {a} / {b} | {x.seconds / y.seconds:.2f}x | "
                    f"{x.rss_mib / y.rss_mib:.2f}x | {x.cpu_seconds / y.cpu_seconds:.2f}x |"
                )
    goal = results.get(GOAL_COUNT, {})
    if "ours" in goal and "controller-runtime" in goal:
        ratio = goal["ours"].seconds / goal["controller-runtime"].seconds
        verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
        goal_text = f"ours within {GOAL_RATIO}x of controller-runtime at {GOAL_COUNT:,}"
        print(f"\ngoal: {goal_text}: {ratio:.2f}x, {verdict}")


# -- profiling ours -------------------------------------------------------------------------


def profile_ours(command: list[str], output: Path, timeout: float, top: int = 15) -> None:
    """Run our side once under py-spy and print where its Python CPU time went.

    Only samples of the thread holding the GIL count (`--gil`: py-spy takes an idle thread-pool
    worker for a busy one otherwise). They are split into start-up (any frame importing a module)
    and the rest; the top functions are those of the rest, by own time (the leaf frame) and
    inclusive time.
    """
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        print("\nprofile skipped: py-spy is not installed (pip install py-spy)")
        return
    record = [py_spy, "record", "--gil", "--format", "raw", "--rate", str(PROFILE_RATE), "-o", str(output)]
    run_process([*record, "--", *command], timeout)
    summarize_profile(output, top)


PROFILE_RATE = 250
"""py-spy samples per second."""


def summarize_profile(output: Path, top: int = 15) -> None:
    """Print the share of py-spy's raw samples spent importing and the top functions of the rest."""
    rate = PROFILE_RATE
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    total = importing = 0
    for line in output.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        count = int(samples)
        total += count
        frames = [_frame_name(frame) for frame in stack.split(";") if frame]
        if any(frame.endswith(":_find_and_load") for frame in frames):
            importing += count
            continue
        leaf = frames[-1] if frames else "(no Python frame)"
        own[leaf] += count
        by_file[leaf.partition(":")[0]] += count
        for frame in set(frames):
            inclusive[frame] += count
    rest = total - importing
    print(
        f"\nprofile of ours: {total} samples holding the GIL at {rate}/s in {output}; "
        f"{100 * importing / total:.0f}% importing modules, the other {rest} samples:"
    )
    for title, counter in (("own time", own), ("inclusive time", inclusive), ("own time by file", by_file)):
        print(f"\ntop {top} by {title} (% of the samples after imports):")
        for name, count in counter.most_common(top):
            print(f"  {100 * count / rest:5.1f}%  {name}")


def _frame_name(frame: str) -> str:
    """'func (path/file.py:123)' -> 'path/file.py:func'."""
    match = re.fullmatch(r"(.*) \((.*?)(?::\d+)?\)", frame)
    if match is None:
        return frame
    return f"{match.group(2)}:{match.group(1)}"


# -- main -----------------------------------------------------------------------------------


def drive(kubeconfig: str, args: argparse.Namespace) -> list[str]:
    """Measure every size, print the table (and the profile); returns the namespaces created."""
    sides: tuple[str, ...] = tuple(args.sides.split(","))
    binary = controller_runtime_binary() if "controller-runtime" in sides else Path()

    def command(side: str, namespace: str, count: int) -> list[str]:
        return side_command(side, binary, kubeconfig, namespace, count, args.workers)

    results: dict[int, dict[str, Median]] = {}
    namespaces: list[str] = []
    for count in args.sizes:
        namespace, results[count] = measure(kubeconfig, count, args.rounds, sides, command, args.timeout)
        namespaces.append(namespace)
    report(results, args.rounds)
    if args.profile:
        largest = max(args.sizes)
        profile_ours(
            command("ours", namespaces[args.sizes.index(largest)], largest), args.profile, args.timeout
        )
    return namespaces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=lambda s: [int(n) for n in s.split(",")], default=[1000, 10_000],
                        help="object counts, comma-separated (default 1000,10000)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated, of {', '.join(SIDES)}")
    parser.add_argument(
        "--workers", type=int, default=4, help="concurrent reconciles (ours, controller-runtime)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one side's process may run")
    parser.add_argument(
        "--profile", type=Path, help="profile ours at the largest size; raw py-spy output here"
    )
    parser.add_argument("--kubeconfig")
    args = parser.parse_args()
    unknown = set(args.sides.split(",")) - set(SIDES)
    if unknown:
        parser.error(f"unknown sides: {', '.join(sorted(unknown))}")
    if args.kubeconfig:
        asyncio.run(delete_namespaces(args.kubeconfig, drive(args.kubeconfig, args)))
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
