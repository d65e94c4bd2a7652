"""Controller semantics without a server: results, errors, requeues, metrics."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import pytest
import structlog.testing
from prometheus_client import CollectorRegistry

from valkey_operator.core.clock import FakeClock
from valkey_operator.core.controller import Controller
from valkey_operator.core.handler import EnqueueMapped, request_for_object, requests_for_controller_owner
from valkey_operator.core.reconcile import Request, Result, TerminalError
from valkey_operator.core.resource import Resource
from valkey_testbed.wait import eventually


class Scripted:
    """A reconciler that replays scripted outcomes per key and records every call."""

    def __init__(self, script: dict[str, list[Result | Exception]]) -> None:
        self.script = script
        self.calls: list[str] = []
        self.concurrent = 0
        self.max_concurrent: Counter[str] = Counter()
        self.in_flight: Counter[str] = Counter()

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request.name)
        self.in_flight[request.name] += 1
        self.max_concurrent[request.name] = max(
            self.max_concurrent[request.name], self.in_flight[request.name]
        )
        try:
            await asyncio.sleep(0)
            outcomes = self.script.get(request.name, [])
            outcome = outcomes.pop(0) if outcomes else Result()
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        finally:
            self.in_flight[request.name] -= 1


def sample(registry: CollectorRegistry, metric: str, **labels: str) -> float:
    value = registry.get_sample_value(metric, labels)
    return value if value is not None else 0.0


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def run_controller(controller: Controller) -> asyncio.Task[None]:
    task = asyncio.create_task(controller.run())
    await settle()
    return task


async def test_error_requeues_with_backoff_then_success_forgets() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    reconciler = Scripted({"a": [RuntimeError("boom"), RuntimeError("boom"), Result()]})
    controller = Controller("demo", reconciler, clock=clock, registry=registry)
    task = await run_controller(controller)
    controller.queue.add(Request("a", "ns"))
    await settle()
    assert reconciler.calls == ["a"]
    assert controller.queue.num_requeues(Request("a", "ns")) == 1
    clock.step(0.004)  # first retry after 5 ms, not before
    await settle()
    assert reconciler.calls == ["a"]
    clock.step(0.001)
    await settle()
    assert reconciler.calls == ["a", "a"]
    clock.step(0.010)  # second retry after 10 ms
    await settle()
    assert reconciler.calls == ["a", "a", "a"]
    assert controller.queue.num_requeues(Request("a", "ns")) == 0  # success forgets
    assert sample(registry, "controller_runtime_reconcile_total", controller="demo", result="error") == 2
    assert sample(registry, "controller_runtime_reconcile_total", controller="demo", result="success") == 1
    assert sample(registry, "controller_runtime_reconcile_errors_total", controller="demo") == 2
    assert sample(registry, "workqueue_retries_total", controller="demo", name="demo") == 2
    await controller.shutdown()
    await task


async def test_requeue_after_and_terminal_errors() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    reconciler = Scripted({"later": [Result(requeue_after=30)], "bad": [TerminalError("invalid spec")]})
    controller = Controller("demo", reconciler, clock=clock, registry=registry)
    task = await run_controller(controller)
    controller.queue.add(Request("later"))
    controller.queue.add(Request("bad"))
    await settle()
    assert sorted(reconciler.calls) == ["bad", "later"]
    clock.step(29.9)
    await settle()
    assert len(reconciler.calls) == 2
    clock.step(0.1)
    await settle()
    assert reconciler.calls.count("later") == 2
    clock.step(10_000)  # a terminal error is never retried
    await settle()
    assert reconciler.calls.count("bad") == 1
    assert (
        sample(registry, "controller_runtime_reconcile_total", controller="demo", result="requeue_after") == 1
    )
    assert sample(registry, "controller_runtime_terminal_reconcile_errors_total", controller="demo") == 1
    await controller.shutdown()
    await task


async def test_one_key_is_never_reconciled_concurrently() -> None:
    reconciler = Scripted({})
    controller = Controller("demo", reconciler, workers=4, clock=FakeClock(), registry=CollectorRegistry())
    task = await run_controller(controller)
    for _ in range(50):
        for name in ("a", "b", "c"):
            controller.queue.add(Request(name))
        await asyncio.sleep(0)
    await settle()
    assert set(reconciler.calls) == {"a", "b", "c"}
    assert max(reconciler.max_concurrent.values()) == 1
    await controller.shutdown()
    await task


async def test_shutdown_drains_in_flight_reconciles() -> None:
    release = asyncio.Event()
    finished: list[str] = []

    class Slow:
        async def reconcile(self, request: Request) -> Result:
            await release.wait()
            finished.append(request.name)
            return Result()

    controller = Controller("demo", Slow(), workers=2, registry=CollectorRegistry())
    task = await run_controller(controller)
    controller.queue.add(Request("a"))
    controller.queue.add(Request("b"))
    await settle()
    stopping = asyncio.create_task(controller.shutdown(drain_timeout=5))
    await settle()
    assert not stopping.done()
    release.set()
    await stopping
    await task
    assert sorted(finished) == ["a", "b"]


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Controller("demo", Scripted({}), workers=0, registry=CollectorRegistry())


class Sink:
    def __init__(self) -> None:
        self.items: list[Request] = []

    def add(self, item: Request) -> None:
        self.items.append(item)


def test_update_enqueues_old_and_new_targets() -> None:
    sink = Sink()

    def by_ref(obj: dict[str, object]) -> list[Request]:
        spec = obj["spec"]
        assert isinstance(spec, dict)
        return [Request(spec["ref"])]

    handler = EnqueueMapped(sink, by_ref)
    handler.on_update({"spec": {"ref": "old"}}, {"spec": {"ref": "new"}})
    assert sorted(r.name for r in sink.items) == ["new", "old"]


def test_update_of_the_reconciled_kind_enqueues_its_request_once() -> None:
    sink = Sink()
    handler = EnqueueMapped(sink, request_for_object)
    old = {"metadata": {"name": "cm", "namespace": "ns", "resourceVersion": "1"}}
    new = {"metadata": {"name": "cm", "namespace": "ns", "resourceVersion": "2"}}
    handler.on_update(old, new)
    assert sink.items == [Request("cm", "ns")]


def test_owner_mapping_needs_controller_reference_of_the_right_kind() -> None:
    widgets = Resource("example.com", "v1", "widgets", "Widget")
    map_fn = requests_for_controller_owner(widgets)
    owned = {
        "metadata": {
            "name": "cm",
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "other.com/v1", "kind": "Widget", "name": "x", "controller": True},
                {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "controller": False},
                {"apiVersion": "example.com/v1", "kind": "Widget", "name": "mine", "controller": True},
            ],
        }
    }
    assert map_fn(owned) == [Request("mine", "ns")]
    assert request_for_object(owned) == [Request("cm", "ns")]


class Hanging:
    """Hangs on key "stuck" until cancelled; answers every other key at once."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.cancelled = 0

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request.name)
        if request.name == "stuck":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return Result()


async def test_a_reconcile_past_its_deadline_is_cancelled_counted_and_requeued() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    reconciler = Hanging()
    controller = Controller("demo", reconciler, clock=clock, registry=registry, reconcile_timeout=30)
    task = await run_controller(controller)  # one worker: the hung call must let it go
    controller.queue.add(Request("stuck"))
    controller.queue.add(Request("next"))
    await settle()
    assert clock.waiters == 1, "the deadline runs on the injected clock: no real sleeping"
    clock.step(29.9)
    await settle()
    assert reconciler.cancelled == 0 and reconciler.calls == ["stuck"]
    clock.step(0.1)
    await settle()
    assert reconciler.cancelled == 1
    assert reconciler.calls == ["stuck", "next"]
    assert controller.queue.num_requeues(Request("stuck")) == 1  # retried with backoff
    assert sample(registry, "controller_runtime_reconcile_errors_total", controller="demo") == 1
    assert sample(registry, "controller_runtime_reconcile_total", controller="demo", result="success") == 1
    await controller.shutdown(drain_timeout=0.1)
    await task


async def test_a_timeout_raised_inside_the_reconcile_is_an_ordinary_error() -> None:
    registry = CollectorRegistry()
    reconciler = Scripted({"a": [TimeoutError("the backend timed out")]})
    controller = Controller("demo", reconciler, clock=FakeClock(), registry=registry, reconcile_timeout=60)
    task = await run_controller(controller)
    controller.queue.add(Request("a"))
    await settle()
    assert controller.queue.num_requeues(Request("a")) == 1
    await controller.shutdown()
    await task


class Swallowing:
    """Hangs on "stubborn", swallows the first cancellation and returns; answers other keys at once."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def reconcile(self, request: Request) -> Result:
        self.calls.append(request.name)
        if request.name == "stubborn":
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()
        return Result()


async def test_on_the_real_clock_a_late_reconcile_is_cancelled_and_the_worker_goes_on() -> None:
    """The loop-timer deadline (one timer per worker): real time, bounded to a few 10 ms steps."""
    registry = CollectorRegistry()
    reconciler = Hanging()
    controller = Controller("demo", reconciler, registry=registry, reconcile_timeout=0.05)
    task = await run_controller(controller)
    for name in ("a", "b", "stuck", "next"):
        controller.queue.add(Request(name))
    # "stuck" keeps coming back with backoff and being cancelled again: count at least the first.
    await eventually(lambda: "next" in reconciler.calls, "next", 5, interval=0.01)
    assert reconciler.calls[:4] == ["a", "b", "stuck", "next"]
    assert reconciler.cancelled >= 1
    assert controller.queue.num_requeues(Request("stuck")) >= 1
    assert sample(registry, "controller_runtime_reconcile_errors_total", controller="demo") >= 1
    assert sample(registry, "controller_runtime_reconcile_total", controller="demo", result="success") == 3
    await controller.shutdown(drain_timeout=0.1)
    await task


async def test_a_cancellation_the_reconcile_swallows_does_not_reach_the_worker() -> None:
    """After the deadline's cancellation is swallowed, the worker goes idle with its timer armed (by
    "between"); the clock then passes every deadline, so a stray cancellation has had its chance:
    the timer has run and ended (no sleeper left) while the worker waited for work."""
    clock = FakeClock()
    reconciler = Swallowing()
    controller = Controller(
        "demo", reconciler, clock=clock, registry=CollectorRegistry(), reconcile_timeout=60
    )
    task = await run_controller(controller)
    controller.queue.add(Request("stubborn"))
    await settle()
    assert clock.waiters == 1, "the deadline's timer sleeps on the injected clock"
    clock.step(60)
    await settle()
    controller.queue.add(Request("between"))
    await settle()
    assert reconciler.calls == ["stubborn", "between"] and not controller.queue.len()
    assert clock.waiters == 1, "the idle worker's timer, armed by 'between'"
    clock.step(60)
    await settle()
    assert clock.waiters == 0, "the timer ran at its deadline and ended"
    assert not task.done(), "a stray cancellation ended the idle worker"
    controller.queue.add(Request("after"))
    await settle()
    assert reconciler.calls == ["stubborn", "between", "after"]
    await controller.shutdown(drain_timeout=0.1)
    await task


async def test_a_failed_reconcile_logs_its_traceback_and_a_terminal_one_its_message() -> None:
    """The embedder's NotCached was logged as one line of text: where it came from was lost."""
    reconciler = Scripted({"bug": [KeyError("missing")], "bad": [TerminalError("invalid spec")]})
    with structlog.testing.capture_logs() as logs:
        controller = Controller("demo", reconciler, clock=FakeClock(), registry=CollectorRegistry())
        task = await run_controller(controller)
        controller.queue.add(Request("bug"))
        controller.queue.add(Request("bad"))
        await settle()
        await controller.shutdown(1)
        await task
    failed = {entry["key"]: entry for entry in logs if entry["event"] == "reconcile failed"}
    assert isinstance(failed["bug"]["exc_info"], KeyError)
    assert failed["bug"]["exc_info"].__traceback__ is not None
    assert failed["bad"]["exc_info"] is None and failed["bad"]["error"] == "TerminalError: invalid spec"
