"""Drive a fuzz run: rounds of hypothesis examples against the real API server and operator.

A round sends its examples back to back (each a few writes and deletes), then settles (every stored
object of the run explains itself: verdicts.status_problem and protection_problem), then, after a
calm of a few seconds, holds a quiet window with no writes: no object may be reconciled more than
about once a second beyond the pod status changes the kubelet reports for it (kubelet_events), and
the operator's CPU stays low. Then it deletes everything the run wrote and waits until all of it is
gone (protection finalizers must let go), and samples the operator's memory. The operator process
must stay alive throughout and stop cleanly at the end.

Hypothesis only generates here (no shrinking, no example database): the server's state carries
over between examples, so a failure is reported with the seed, round and example that hit it.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import aiohttp
import attrs
import hypothesis
from hypothesis import HealthCheck, Phase

from valkey_operator.api.resources import VALKEY_CLUSTERS, VALKEY_CONFIGS, VALKEY_IMAGES, VALKEY_ROLES
from valkey_operator.core.client import Client
from valkey_operator.core.resource import NAMESPACES, Resource
from valkey_operator.core.rest import ApiError, Obj, RestClient
from valkey_operator.core.restconfig import load_config
from valkey_testbed.crds import install_crds
from valkey_testbed.fuzz.kubelet_events import pod_status_changes
from valkey_testbed.fuzz.strategies import RUN_LABEL, Delete, Op, Pool, Write, batch
from valkey_testbed.fuzz.verdicts import (
    Tally,
    deleting,
    protection_problem,
    refusal_problem,
    refused_fields,
    status_problem,
)
from valkey_testbed.fuzz.watch import OperatorDied, OperatorUnderFuzz
from valkey_testbed.wait import NotYet, WaitTimeout, eventually

KINDS: tuple[Resource, ...] = (VALKEY_IMAGES, VALKEY_CONFIGS, VALKEY_ROLES, VALKEY_CLUSTERS)
MIB = 1024 * 1024

# Bounds, generous on purpose: each is several times what a healthy operator shows on 2 shared cores.
QUIET_PASSES_PER_SECOND = 1.0
"""Per object while nothing is written; a waiting cluster looks again every 2 s (plan.REQUEUE_WAITING)."""
QUIET_SLACK = 3
QUIET_CPU = 0.5
"""Core-seconds per second the operator may spend while nothing is written."""
RSS_GROWTH = 64 * MIB
"""Resident memory growth allowed between the first and the last round's end (all objects deleted)."""


@attrs.frozen
class FuzzSettings:
    seed: int
    examples: int
    rounds: int = 2
    settle_timeout: float = 90.0
    calm_seconds: float = 5.0
    """Left after settling, before the quiet window: new pods' own start-up events pass."""
    quiet_seconds: float = 10.0
    gone_timeout: float = 60.0


@attrs.define
class FuzzReport:
    """The counts of one run; `violations` empty means every invariant held."""

    seed: int
    examples: int = 0
    rounds: int = 0
    seconds: float = 0.0
    sent: collections.Counter[str] = attrs.field(factory=collections.Counter)
    refused: collections.Counter[str] = attrs.field(factory=collections.Counter)
    refused_fields: collections.Counter[str] = attrs.field(factory=collections.Counter)
    refusal_samples: dict[str, str] = attrs.field(factory=dict)
    """The first message seen per refused field, to read what users are told."""
    accepted: collections.Counter[str] = attrs.field(factory=collections.Counter)
    explained: collections.Counter[str] = attrs.field(factory=collections.Counter)
    gone_before_settle: collections.Counter[str] = attrs.field(factory=collections.Counter)
    deletes: int = 0
    conflicts: int = 0
    crashes: int = 0
    exit_code: int | None = None
    tally: Tally = attrs.field(factory=Tally)
    quiet_busiest: tuple[str, int, int] = ("", 0, 0)
    """The object with the most passes in a quiet window beyond its excuse: (object, passes,
    kubelet status changes of its pods in that window)."""
    quiet_cpu: float = 0.0
    rss: list[int] = attrs.field(factory=list)
    """Resident bytes after start-up, then after each round's clean-up."""
    violations: list[str] = attrs.field(factory=list)

    @property
    def passes(self) -> int:
        return sum(self.tally.passes.values())

    @property
    def rss_growth(self) -> int:
        """Growth from the first round's end to the last's (from start-up when there is one round)."""
        start = self.rss[1] if len(self.rss) > 2 else (self.rss[0] if self.rss else 0)
        return (self.rss[-1] - start) if self.rss else 0

    def summary(self) -> str:
        kinds = [resource.kind for resource in KINDS]

        def row(counter: Mapping[str, int]) -> str:
            return ", ".join(f"{kind} {counter.get(kind, 0)}" for kind in kinds)

        rss = " -> ".join(f"{value / MIB:.0f}" for value in self.rss)
        lines = [
            f"seed {self.seed}: {self.examples} examples in {self.rounds} round(s), {self.seconds:.0f} s",
            f"writes sent: {sum(self.sent.values())} ({row(self.sent)}); deletes sent: {self.deletes}",
            f"refused at admission naming a field: {sum(self.refused.values())} ({row(self.refused)})",
            f"accepted: {sum(self.accepted.values())} ({row(self.accepted)})",
            f"  explained at the next settle: {sum(self.explained.values())} ({row(self.explained)})",
            f"  deleted before it (deletes mid-flight): {sum(self.gone_before_settle.values())}",
            f"update conflicts (retried out): {self.conflicts}",
            f"operator crashes: {self.crashes}; exit status on SIGTERM: {self.exit_code}",
            f"reconcile passes: {self.passes} ({self.passes / max(self.seconds, 1):.1f}/s over the run; "
            + ", ".join(f"{name} {count}" for name, count in sorted(self.tally.passes.items()))
            + ")",
            f"failed passes: {sum(self.tally.errors.values())} "
            + (
                f"({', '.join(f'{k} x{v}' for k, v in self.tally.errors.most_common(6))})"
                if self.tally.errors
                else ""
            ),
            f"quiet window: busiest {self.quiet_busiest[0] or '-'} with {self.quiet_busiest[1]} passes "
            f"for {self.quiet_busiest[2]} pod status changes, CPU {self.quiet_cpu:.2f} core",
            f"operator RSS MiB (start, then after each round's clean-up): {rss}; "
            f"growth {self.rss_growth / MIB:+.1f} MiB",
            f"top refused fields: {', '.join(f'{k} x{v}' for k, v in self.refused_fields.most_common(8))}",
            f"violations: {len(self.violations)}",
            *(f"  - {violation}" for violation in self.violations[:20]),
        ]
        return "\n".join(lines)


def _short(obj: object, limit: int = 400) -> str:
    text = json.dumps(obj, ensure_ascii=True, default=str)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


class FuzzRun:
    """One run on its own event loop (hypothesis calls back synchronously for each example)."""

    def __init__(
        self, kubeconfig: Path, settings: FuzzSettings, work_dir: Path, progress: Callable[[str], None]
    ) -> None:
        self.kubeconfig = kubeconfig
        self.settings = settings
        self.work_dir = work_dir
        self.progress = progress
        run = f"fz{uuid.uuid4().hex[:6]}"
        self.pool = Pool.of(run, f"fuzz-{run}")
        self.report = FuzzReport(seed=settings.seed)
        self.rng = random.Random(settings.seed)
        self.loop = asyncio.new_event_loop()
        self.client: Client | None = None
        self.operator: OperatorUnderFuzz | None = None
        self.pending: list[tuple[Resource, str, str | None, str]] = []
        self.where = ""
        self.started = time.monotonic()

    def _progress(self, text: str) -> None:
        self.progress(f"[{time.monotonic() - self.started:6.1f}s] {text}")

    # -- the run ---------------------------------------------------------------------------------------
    def run(self) -> FuzzReport:
        started = time.monotonic()
        try:
            self.loop.run_until_complete(self._setup())
            per_round = -(-self.settings.examples // self.settings.rounds)
            for round_ in range(self.settings.rounds):
                self._generate(round_, per_round)
                self.loop.run_until_complete(self._after_round(round_))
        except OperatorDied as exc:
            self.report.crashes += 1
            self.report.violations.append(f"{self.where}: {exc}")
        finally:
            self.report.seconds = time.monotonic() - started
            self.loop.run_until_complete(self._teardown())
            self.loop.close()
        return self.report

    def _generate(self, round_: int, examples: int) -> None:
        @hypothesis.settings(
            max_examples=examples,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @hypothesis.seed(self.settings.seed * 1000 + round_)
        @hypothesis.given(batch(self.pool))
        def example(ops: list[Op]) -> None:
            self.report.examples += 1
            self.where = f"seed {self.settings.seed} round {round_} example {self.report.examples}"
            self.loop.run_until_complete(self._send(ops))

        self._progress(f"round {round_ + 1}/{self.settings.rounds}: sending {examples} examples")
        example()

    async def _setup(self) -> None:
        self.client = Client(RestClient(await load_config(str(self.kubeconfig))), field_manager="fuzz")
        await install_crds(self.client)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.pool.namespace}}
        await self.client.create(NAMESPACES, namespace)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.work_dir / f"operator-{self.pool.run}.log"
        self.operator = OperatorUnderFuzz(self.kubeconfig, self.pool.namespace, log_path)
        self._progress(f"run {self.pool.run}: operator pid {self.operator.pid}, log {log_path}")
        await self.operator.ready()
        self.report.rss.append(self.operator.rss_bytes())

    async def _after_round(self, round_: int) -> None:
        operator = self._operator()
        self.where = f"seed {self.settings.seed} round {round_} settle"
        self._progress(f"round {round_ + 1}: settling {len(self.pending)} accepted writes")
        await self._settle()
        self.where = f"seed {self.settings.seed} round {round_} quiet window"
        self._progress(f"round {round_ + 1}: settled; {self.settings.quiet_seconds:.0f} s without writes")
        await self._quiet()
        self.where = f"seed {self.settings.seed} round {round_} clean-up"
        self._progress(f"round {round_ + 1}: deleting every object of the run")
        await self._clean_up()
        await asyncio.sleep(1.0)
        operator.check_alive()
        self.report.rss.append(operator.rss_bytes())
        self._progress(f"round {round_ + 1}: clean; operator RSS {self.report.rss[-1] / MIB:.1f} MiB")
        self.report.rounds += 1
        self._tally()

    async def _teardown(self) -> None:
        if self.operator is not None:
            self._tally()
            crashed = not self.operator.alive()
            self.report.exit_code = await self.operator.stop()
            if not crashed and self.report.exit_code != 0:
                self.report.violations.append(f"the operator exited {self.report.exit_code} on SIGTERM")
            repeated = collections.Counter(self.report.tally.unexpected)
            self.report.violations.extend(f"operator log (x{n}): {line}" for line, n in repeated.items())
        if self.client is not None:
            await self.client.delete(NAMESPACES, self.pool.namespace)
            await self.client.rest.close()
        if self.report.rounds:
            self._judge_bounds()

    def _judge_bounds(self) -> None:
        report = self.report
        if report.quiet_cpu > QUIET_CPU:
            report.violations.append(f"busy while idle: {report.quiet_cpu:.2f} core (bound {QUIET_CPU})")
        if report.rss_growth > RSS_GROWTH:
            report.violations.append(
                f"memory grew {report.rss_growth / MIB:.0f} MiB between rounds (bound {RSS_GROWTH / MIB:.0f})"
            )

    def _operator(self) -> OperatorUnderFuzz:
        assert self.operator is not None
        return self.operator

    def _api(self) -> Client:
        assert self.client is not None
        return self.client

    def _tally(self) -> None:
        self.report.tally.add(self._operator().new_lines())

    # -- sending ------------------------------------------------------------------------------------------
    async def _send(self, ops: Sequence[Op]) -> None:
        for op in ops:
            try:
                if isinstance(op, Delete):
                    await self._delete(op)
                else:
                    await self._write(op)
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.report.violations.append(f"{self.where}: no answer to {op!r:.200}: {exc!r}")
        self._operator().check_alive()

    async def _delete(self, op: Delete) -> None:
        self.report.deletes += 1
        try:
            await self._api().delete(op.resource, op.name, op.namespace, propagation_policy=op.propagation)
        except ApiError as exc:
            self.report.violations.append(f"{self.where}: delete {op.resource.kind} {op.name}: {exc}")

    async def _write(self, op: Write) -> None:
        kind = op.resource.kind
        self.report.sent[kind] += 1
        api = self._api()
        for _ in range(3):
            try:
                stored = await api.create(op.resource, op.body)
            except ApiError as exc:
                if not exc.already_exists:
                    self._refused(op, op.body, exc)
                    return
            else:
                self._accepted(op.resource, stored)
                return
            current = await api.get_or_none(op.resource, op.name, op.namespace)
            if current is None:
                continue  # deleted meanwhile: create again
            body = {
                **current,
                "metadata": {**current["metadata"], "annotations": op.body["metadata"].get("annotations")},
                "spec": op.body.get("spec"),
            }
            try:
                stored = await api.replace(op.resource, body)
            except ApiError as exc:
                if exc.conflict or exc.not_found:
                    continue
                self._refused(op, body, exc)
                return
            self._accepted(op.resource, stored)
            return
        self.report.conflicts += 1

    def _refused(self, op: Write, sent: Obj, exc: ApiError) -> None:
        problem = refusal_problem(sent, exc)
        if problem is not None:
            self.report.violations.append(
                f"{self.where}: {op.resource.kind} {op.name}: {problem}; sent {_short(sent)}"
            )
            return
        self.report.refused[op.resource.kind] += 1
        for field in refused_fields(exc):
            self.report.refused_fields[f"{op.resource.kind} {field}"] += 1
            self.report.refusal_samples.setdefault(f"{op.resource.kind} {field}", exc.message[:400])

    def _accepted(self, resource: Resource, stored: Obj) -> None:
        self.report.accepted[resource.kind] += 1
        meta = stored["metadata"]
        self.pending.append((resource, meta["name"], meta.get("namespace"), meta["uid"]))

    # -- settling, the quiet window, clean-up ---------------------------------------------------------
    async def _world(self) -> dict[Resource, list[Obj]]:
        selector = f"{RUN_LABEL}={self.pool.run}"
        return {
            resource: [
                {**obj, "kind": resource.kind}
                for obj in await self._api().list(
                    resource, self.pool.namespace if resource.namespaced else None, label_selector=selector
                )
            ]
            for resource in KINDS
        }

    @staticmethod
    def _problems(world: Mapping[Resource, Sequence[Obj]]) -> dict[tuple[str, str], str]:
        problems = {}
        for resource, objects in world.items():
            for obj in objects:
                if deleting(obj):
                    continue
                problem = status_problem(resource, obj) or protection_problem(resource, obj, world)
                if problem is not None:
                    problems[(resource.kind, obj["metadata"]["name"])] = problem
        return problems

    async def _settle(self) -> None:
        async def explained() -> object:
            self._operator().check_alive()
            problems = self._problems(await self._world())
            return NotYet(problems) if problems else True

        try:
            await eventually(
                explained, "every stored object explained", self.settings.settle_timeout, interval=1.0
            )
        except WaitTimeout as exc:
            self.report.violations.append(f"{self.where}: {exc}")
        world = await self._world()
        problems = self._problems(world)
        stored = {(r.kind, o["metadata"]["name"]): o for r, objects in world.items() for o in objects}
        for resource, name, _namespace, uid in self.pending:
            current = stored.get((resource.kind, name))
            if current is None or current["metadata"]["uid"] != uid or deleting(current):
                self.report.gone_before_settle[resource.kind] += 1
            elif (resource.kind, name) not in problems:
                self.report.explained[resource.kind] += 1
        self.pending.clear()

    async def _quiet(self) -> None:
        operator = self._operator()
        await asyncio.sleep(self.settings.calm_seconds)
        self._tally()
        cpu = operator.cpu_seconds()
        seconds = self.settings.quiet_seconds
        changes = await pod_status_changes(self._api(), self.pool.namespace, seconds)
        operator.check_alive()
        window = Tally()
        lines = operator.new_lines()
        window.add(lines)
        self.report.tally.add(lines)
        self.report.quiet_cpu = max(self.report.quiet_cpu, (operator.cpu_seconds() - cpu) / seconds)
        for (controller, key), passes in window.by_key.items():
            if not self._ours(key):
                continue  # another test's cluster-scoped object, busy on the shared control plane
            excused = changes[key] if controller == "valkeycluster" else 0
            if passes - excused > self.report.quiet_busiest[1] - self.report.quiet_busiest[2]:
                self.report.quiet_busiest = (f"{controller} {key}", passes, excused)
            bound = seconds * QUIET_PASSES_PER_SECOND + QUIET_SLACK + excused
            if passes > bound:
                self.report.violations.append(
                    f"{self.where}: hot loop: {controller} {key} reconciled {passes} times in "
                    f"{seconds:.0f} s without writes, with {excused} pod status changes (bound {bound:.0f})"
                )

    def _ours(self, key: str) -> bool:
        """Whether a reconcile key names an object this run wrote: cluster-scoped names carry the
        run id; namespaced keys are `<namespace>/<name>` in the run's namespace."""
        pool = self.pool
        return key.startswith(f"{pool.namespace}/") or key in {*pool.images, *pool.configs, *pool.roles}

    async def _clean_up(self) -> None:
        api = self._api()
        targets = [(r, o) for r, objects in (await self._world()).items() for o in objects]
        self.rng.shuffle(targets)
        for resource, obj in targets:
            meta = obj["metadata"]
            await api.delete(resource, meta["name"], meta.get("namespace"))

        async def gone() -> object:
            left = [
                f"{r.kind} {o['metadata']['name']} {o['metadata'].get('finalizers')}"
                for r, o in await self._left()
            ]
            return NotYet(left) if left else True

        try:
            await eventually(
                gone, "every object of the round deleted", self.settings.gone_timeout, interval=1.0
            )
        except WaitTimeout as exc:
            self.report.violations.append(f"{self.where}: {exc}")
            for resource, obj in await self._left():  # unstick, so the next round starts clean
                meta = obj["metadata"]
                await api.patch(
                    resource, meta["name"], {"metadata": {"finalizers": None}}, meta.get("namespace")
                )

    async def _left(self) -> list[tuple[Resource, Obj]]:
        return [(r, o) for r, objects in (await self._world()).items() for o in objects]


def run_fuzz(
    kubeconfig: Path, settings: FuzzSettings, work_dir: Path, progress: Callable[[str], None] = lambda _: None
) -> FuzzReport:
    """Run the fuzzer against the control plane of kubeconfig (call it from a thread without a running
    event loop; tests use asyncio.to_thread or a plain test function)."""
    return FuzzRun(kubeconfig, settings, work_dir, progress).run()
