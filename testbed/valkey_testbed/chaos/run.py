"""Run chaos against one namespace of a running test bed: the operator as a process, a TLS cluster
under client load, the seeded schedule's faults and changes, the invariants, a timeline and a summary.

`chaos(...)` is what both the command (`python -m valkey_testbed
chaos`) and the CI test call. It returns the summary; `summary["violations"]`
empty means every invariant held.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from valkey_operator.api.resources import ADMIN_USER, VALKEY_CLUSTERS
from valkey_operator.core.client import Client
from valkey_operator.core.resource import SECRETS
from valkey_operator.core.rest import ApiError, RestClient
from valkey_operator.core.restconfig import load_config
from valkey_operator.valkey.admin import AdminClient, Credentials
from valkey_operator.valkey.slots import format_slot_ranges
from valkey_testbed import images
from valkey_testbed.chaos import invariants, schedule
from valkey_testbed.chaos.faults import FAULTS, Skipped, World
from valkey_testbed.chaos.load import Access, Load, LoadReport, checker
from valkey_testbed.chaos.monitor import Monitor
from valkey_testbed.chaos.nodes import convergence_problems, probe
from valkey_testbed.chaos.objects import USERNAME, Catalog, Names, Objects, internal_secret
from valkey_testbed.chaos.operatorctl import OperatorUnderChaos
from valkey_testbed.chaos.schedule import Bounds, Step
from valkey_testbed.crds import install_crds
from valkey_testbed.kubelet import KubeletControl
from valkey_testbed.operatorproc import LOOPBACK_NETWORKS
from valkey_testbed.wait import NotYet, WaitTimeout, eventually

FORMED = 360.0
"""Seconds for the first cluster to become Active (formation, before any fault)."""
STEP_LIMIT = 600.0
"""Seconds one step may take (a fault waiting for redundancy, a settle waiting for convergence)."""


@attrs.frozen
class Options:
    seed: int
    minutes: float
    log_dir: Path
    tls: bool = True
    shards: int = 3
    replicas: int = 1
    benchmark: bool = True
    bounds: Bounds = attrs.field(factory=Bounds)


@attrs.frozen
class Entry:
    """One line of the timeline."""

    at: float
    step: int
    kind: str
    detail: str
    outcome: str
    seconds: float

    def line(self) -> str:
        head = f"{self.at:8.1f}s #{self.step:<4d}{self.kind:<16}{self.detail:<34}"
        return f"{head}{self.seconds:6.1f}s  {self.outcome}"


class Run:
    def __init__(self, world: World, options: Options, say: Callable[[str], None]) -> None:
        self.world = world
        self.options = options
        self.say = say
        self.started = time.monotonic()
        self.violations = invariants.Violations(options.seed)
        self.timeline: list[Entry] = []
        self.current = -1
        self.injected: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.changes: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.last_fault_end = 0.0
        self.settle_times: list[float] = []
        self.lost_midway = 0

    def clock(self) -> float:
        return time.monotonic() - self.started

    def record(self, step: Step | None, kind: str, outcome: str, began: float) -> None:
        index = step.index if step else -1
        entry = Entry(began, index, kind, step.describe() if step else "", outcome, self.clock() - began)
        self.timeline.append(entry)
        self.say(entry.line())

    def violation(self, invariant: str, message: str) -> None:
        found = self.violations.add(invariant, self.current, self.clock(), message)
        self.say(self.violations.reproduce(found, self.options.minutes))

    # --- steps ------------------------------------------------------------------------------------

    async def step(self, step: Step, load: Load, monitor: Monitor, access: Access) -> str:
        objects = self.world.objects
        if step.kind in FAULTS:
            try:
                outcome = await FAULTS[step.kind](self.world, step)
            except Skipped as exc:
                self.skipped[step.kind] += 1
                return f"skipped: {exc}"
            self.injected[step.kind] += 1
            self.last_fault_end = self.clock()
            return outcome
        if step.kind == schedule.SETTLE:
            return await self.settle(load, access, final=False)
        self.changes[step.kind] += 1
        if step.kind == schedule.SCALE_SHARDS:
            await objects.scale(shards=step.value)
            return f"spec.shards = {step.value}"
        if step.kind == schedule.SCALE_REPLICAS:
            await objects.scale(replicas=step.value)
            return f"spec.replicasPerShard = {step.value}"
        if step.kind == schedule.RUNTIME_SETTING:
            value = await objects.runtime_setting(step.value)
            monitor.policy = step.value % len(schedule.POLICIES)
            return f"ValkeyConfig maxmemory-policy = {value}"
        if step.kind == schedule.ROLL:
            return f"ValkeyConfig {await objects.roll(step.value)}"
        await objects.role_edit(step.value)
        return f"ValkeyRole {'+' if step.value % 2 else '-'}@keyspace"

    async def converge(self, bound: float) -> float | None:
        """Seconds until the status says Active for the current spec and the nodes agree; None if not."""
        names = self.world.objects.names
        began = time.monotonic()

        async def done() -> bool | NotYet:
            cluster = await self.world.kube.get(VALKEY_CLUSTERS, names.cluster, names.namespace)
            spec = cluster["spec"]
            if not invariants.current_and_active(cluster):
                status = cluster.get("status") or {}
                return NotYet(f"status {status.get('state')}: {str(status.get('message'))[:200]}")
            facts = await probe(self.world.admin, await self.world.pod_ips())
            problems = convergence_problems(facts, spec["shards"], spec["replicasPerShard"])
            return not problems or NotYet(f"status Active, nodes: {'; '.join(problems[:4])}")

        try:
            await eventually(done, "Active with every slot served", bound, interval=2.0, ignore=(ApiError,))
        except WaitTimeout as exc:
            facts = await probe(self.world.admin, await self.world.pod_ips())
            seen = "; ".join(
                f"{ip} {node.role or 'unreachable'} {format_slot_ranges(node.slots)}".strip()
                for ip, node in facts.items()
            )
            message = f"not converged within {bound:.0f}s: {str(exc)[-500:]}; the nodes themselves: {seen}"
            self.violation(invariants.CONVERGED, message)
            return None
        return time.monotonic() - began

    async def verify(self, load: Load, access: Access, *, final: bool) -> str:
        """Read every key acknowledged so far back, from fresh connections."""
        snapshot = dict(load.durable.acknowledged)
        reader = checker(access, await self.world.pod_ips(), replicas=1, prefix="verify", timeout=5.0)
        reader.acknowledged = snapshot
        async with reader:
            report = await reader.verify()
        lost = len(report.missing) + len(report.wrong)
        if lost or (final and report.unreadable):
            self.violation(invariants.ACKED, str(report))
        self.lost_midway = max(self.lost_midway, lost)
        unread = f", {len(report.unreadable)} unreadable" if report.unreadable else ""
        return f"{report.checked} acknowledged keys read back, {lost} lost{unread}"

    async def settle(self, load: Load, access: Access, *, final: bool) -> str:
        took = await self.converge(invariants.CONVERGE_BOUND)
        if took is None:
            return "not converged"
        self.settle_times.append(took)
        return f"converged in {took:.1f}s; {await self.verify(load, access, final=final)}"

    # --- the run ----------------------------------------------------------------------------------

    async def execute(self, load: Load, monitor: Monitor, access: Access) -> dict[str, Any]:
        options = self.options
        deadline = self.started + options.minutes * 60
        steps = schedule.steps_of(
            options.seed, shards=options.shards, replicas=options.replicas, bounds=options.bounds
        )
        for step in steps:
            if time.monotonic() + step.gap >= deadline or self.violations.found or monitor.error:
                break
            await asyncio.sleep(step.gap)
            self.current = step.index
            began = self.clock()
            try:
                outcome = await asyncio.wait_for(self.step(step, load, monitor, access), STEP_LIMIT)
            except (ApiError, OSError, TimeoutError) as exc:
                self.errors[step.kind] += 1
                outcome = f"error: {type(exc).__name__}: {str(exc)[:200]}"
            self.record(step, step.kind, outcome, began)
        self.current += 1
        began = self.clock()
        unconverged = any(v.invariant == invariants.CONVERGED for v in self.violations.found)
        # A settle that did not converge already waited the bound: once is enough to say so.
        convergence = None if unconverged else await self.converge(invariants.CONVERGE_BOUND)
        self.record(
            None, "converge", f"{'not converged' if convergence is None else f'{convergence:.1f}s'}", began
        )
        if convergence is not None:
            await asyncio.sleep(invariants.CLAIM_GRACE / 3)  # a few more status comparisons at rest
        report = await load.finish()
        began = self.clock()
        verified = await self.verify(load, access, final=True)
        self.record(None, "verify", verified, began)
        await monitor.stop()
        if monitor.error:
            self.violations.add("run-error", self.current, self.clock(), monitor.error)
        return self.summary(report, convergence, monitor)

    def summary(self, report: LoadReport, convergence: float | None, monitor: Monitor) -> dict[str, Any]:
        operator = self.world.operator
        gaps = {label: round(gap, 2) for label, gap in sorted(report.probe.gaps_by_slots.items())}
        return {
            "seed": self.options.seed,
            "minutes": self.options.minutes,
            "tls": self.options.tls,
            "steps": len(self.timeline) - 2,
            "faults": dict(sorted(self.injected.items())),
            "faultsSkipped": dict(sorted(self.skipped.items())),
            "changes": dict(sorted(self.changes.items())),
            "settles": len(self.settle_times),
            "longestSettleSeconds": round(max(self.settle_times, default=0.0), 1),
            "stepErrors": dict(sorted(self.errors.items())),
            "acknowledgedWrites": report.durable.acknowledged,
            "unacknowledgedWrites": report.durable.unacknowledged,
            "failedWrites": report.durable.failed,
            "lost": self.lost_midway,
            "longestUnavailabilityPerShard": gaps,
            "worstShardUnavailabilitySeconds": max(gaps.values(), default=0.0),
            "probeWrites": report.probe.acknowledged,
            "convergenceSeconds": None if convergence is None else round(convergence, 1),
            "convergenceBoundSeconds": invariants.CONVERGE_BOUND,
            "lastFaultEndedAt": round(self.last_fault_end, 1),
            "statusComparisons": monitor.claims_checked,
            "clusterClient": {
                "ok": report.client.ok,
                "errors": dict(report.client.errors),
                "clients": report.client.runs,
            },
            "benchmark": {
                "runs": report.benchmark.runs,
                "completed": report.benchmark.ok,
                "restarts": sum(report.benchmark.restarts.values()),
                "restartsByReason": dict(report.benchmark.restarts),
            },
            "operator": {"starts": operator.starts, "kills": operator.kills, "cuts": operator.cuts},
            "violations": [attrs.asdict(violation) for violation in self.violations.found],
            "wallSeconds": round(self.clock(), 1),
        }


async def admin_for(kube: Client, names: Names, ca_pem: bytes | None) -> AdminClient:
    secret = await kube.get(SECRETS, internal_secret(names.cluster), names.namespace)
    password = base64.b64decode(secret["data"]["admin-password"]).decode()
    return AdminClient(
        credentials=Credentials(username=ADMIN_USER, password=password),
        ca_pem=ca_pem.decode() if ca_pem else None,
        allowed_networks=LOOPBACK_NETWORKS,
    )


async def chaos(
    kubeconfig: Path,
    apiserver_port: int,
    kubelet: KubeletControl,
    namespace: str,
    options: Options,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the seeded chaos in namespace (which must exist) and return the summary."""
    options.log_dir.mkdir(parents=True, exist_ok=True)
    async with RestClient(await load_config(str(kubeconfig))) as rest:
        kube = Client(rest, field_manager="chaos")
        await install_crds(kube)
        names = Names(secrets.token_hex(3), namespace, options.tls)
        objects = Objects(kube, names, Catalog.for_mode(options.tls))
        operator = OperatorUnderChaos(kubeconfig, apiserver_port, namespace, options.log_dir)
        await operator.start()
        try:
            return await _run(kube, kubelet, objects, operator, options, say)
        finally:
            await objects.cleanup()
            await _gone(kube, objects)
            await operator.stop()


async def _run(
    kube: Client,
    kubelet: KubeletControl,
    objects: Objects,
    operator: OperatorUnderChaos,
    options: Options,
    say: Callable[[str], None],
) -> dict[str, Any]:
    names = objects.names
    say(
        f"chaos: seed {options.seed}, {options.minutes:g} min, {'TLS' if names.tls else 'plain'} "
        f"{options.shards}x{options.replicas} cluster of {', '.join(objects.catalog.references)} "
        f"in {names.namespace}; "
        f"logs in {options.log_dir}"
    )
    began = time.monotonic()
    await objects.create(options.shards, options.replicas)
    ca_pem = objects.pki.ca_pem if names.tls else None
    ca_file = None
    if ca_pem is not None:
        ca_file = options.log_dir / "ca.pem"
        ca_file.write_bytes(ca_pem)
    world = World(
        kube,
        kubelet,
        objects,
        AdminClient(credentials=Credentials(username="-", password="-"), allowed_networks=()),
        operator,
    )
    run = Run(world, options, say)

    async def formed() -> bool | NotYet:
        cluster = await kube.get(VALKEY_CLUSTERS, names.cluster, names.namespace)
        return invariants.current_and_active(cluster) or NotYet((cluster.get("status") or {}).get("message"))

    await eventually(formed, "the chaos cluster Active", FORMED, interval=1.0, ignore=(ApiError,))
    world.admin = await admin_for(kube, names, ca_pem)
    run.started = time.monotonic()
    formed_in = run.started - began
    if await run.converge(60.0) is None:
        raise RuntimeError(f"the cluster was Active but the nodes disagree: {run.violations.found}")
    say(
        f"chaos: {options.shards}x{options.replicas} Active in {formed_in:.1f}s; "
        "load starts, then the schedule"
    )
    access = Access(USERNAME, objects.password, ca_file)
    benchmark = None
    if options.benchmark:
        entry = images.resolve_image(images.tls_image())
        benchmark = entry.executable("valkey-benchmark") if entry is not None else None
    monitor = Monitor(world, run.violations, lambda: run.current, run.clock, lambda: None)
    await monitor.start()
    duration = options.minutes * 60 + invariants.CONVERGE_BOUND + 120
    load = Load(access, monitor.seeds, duration, benchmark, options.log_dir)
    monitor.load_failed = load.failed
    try:
        summary = await run.execute(load, monitor, access)
    finally:
        await load.close()
        if not monitor.stopped.is_set():
            await monitor.stop()
    summary["formedSeconds"] = round(formed_in, 1)
    return summary


async def _gone(kube: Client, objects: Objects) -> None:
    """Wait (bounded) until the operator released the run's cluster-scoped objects."""

    async def gone() -> bool:
        names = objects.names
        return await kube.get_or_none(VALKEY_CLUSTERS, names.cluster, names.namespace) is None

    try:
        await eventually(gone, "the chaos cluster deleted", 90, interval=1.0)
        await objects.cleanup()
    except (WaitTimeout, ApiError) as exc:
        print(f"chaos: cleanup incomplete: {exc!r}", file=sys.stderr)
