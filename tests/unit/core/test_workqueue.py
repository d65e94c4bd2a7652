"""Workqueue semantics the controllers rely on: dedup, one worker per item, delays, shutdown, metrics."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from valkey_operator.core.clock import FakeClock
from valkey_operator.core.workqueue import (
    DelayingQueue,
    ItemExponentialFailureRateLimiter,
    PrometheusQueueMetrics,
    Queue,
    RateLimitingQueue,
    ShutDown,
)

TIMEOUT = 1.0  # real-time guard only; nothing here waits on real time when correct


async def settle(ticks: int = 30) -> None:
    """Let every runnable task (including a delaying queue's loop) run to its next wait."""
    for _ in range(ticks):
        await asyncio.sleep(0)


async def get(queue: Queue[str]) -> str:
    return await asyncio.wait_for(queue.get(), TIMEOUT)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def delaying(clock: FakeClock) -> AsyncIterator[DelayingQueue[str]]:
    queue: DelayingQueue[str] = DelayingQueue(clock=clock)
    yield queue
    queue.shut_down()
    await settle()


# --- Queue -----------------------------------------------------------------------------


async def test_fifo_and_dedup() -> None:
    queue: Queue[str] = Queue()
    for item in ["a", "b", "a", "c", "b"]:
        queue.add(item)
    assert len(queue) == 3
    assert queue.len() == 3
    assert [await get(queue) for _ in range(3)] == ["a", "b", "c"]
    assert len(queue) == 0


async def test_re_add_while_processing_is_held_until_done_then_processed_once_more() -> None:
    queue: Queue[str] = Queue()
    queue.add("a")
    assert await get(queue) == "a"

    for _ in range(3):
        queue.add("a")  # several re-adds while processing collapse into one
    assert len(queue) == 0  # not handed to anybody while in flight
    second_worker = asyncio.create_task(queue.get())
    await settle()
    assert not second_worker.done()

    queue.done("a")
    assert await asyncio.wait_for(second_worker, TIMEOUT) == "a"
    queue.done("a")
    assert len(queue) == 0
    third = asyncio.create_task(queue.get())
    await settle()
    assert not third.done()  # exactly once more, not again
    queue.shut_down()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(third, TIMEOUT)


async def test_item_is_never_processed_by_two_workers_at_once() -> None:
    queue: Queue[int] = Queue()
    rng = random.Random(1234)
    keys = list(range(5))
    active: set[int] = set()
    violations: list[int] = []
    processed: Counter[int] = Counter()
    max_parallel = 0
    re_added_in_flight = 0

    async def worker() -> None:
        nonlocal max_parallel
        while True:
            try:
                item = await queue.get()
            except ShutDown:
                return
            if item in active:
                violations.append(item)
            active.add(item)
            max_parallel = max(max_parallel, len(active))
            processed[item] += 1
            for _ in range(rng.randint(0, 4)):
                await asyncio.sleep(0)
            active.discard(item)
            queue.done(item)

    workers = [asyncio.create_task(worker()) for _ in range(6)]
    for _ in range(400):
        key = rng.choice(keys)
        if key in active:
            re_added_in_flight += 1
        queue.add(key)
        if rng.random() < 0.5:
            await asyncio.sleep(0)
    await asyncio.wait_for(queue.shut_down_with_drain(), TIMEOUT)
    await asyncio.wait_for(asyncio.gather(*workers), TIMEOUT)

    assert violations == []
    assert max_parallel > 1  # the test did exercise concurrency
    assert re_added_in_flight > 0  # ... and re-adds of in-flight keys
    assert set(processed) == set(keys)
    assert active == set()
    assert len(queue) == 0


async def test_shut_down_wakes_blocked_getters() -> None:
    queue: Queue[str] = Queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    assert not any(g.done() for g in getters)
    queue.shut_down()
    assert queue.shutting_down()
    results = await asyncio.wait_for(asyncio.gather(*getters, return_exceptions=True), TIMEOUT)
    assert all(isinstance(r, ShutDown) for r in results)


async def test_after_shut_down_queued_items_drain_and_adds_are_ignored() -> None:
    queue: Queue[str] = Queue()
    queue.add("a")
    queue.add("b")
    queue.shut_down()
    queue.add("c")
    assert len(queue) == 2
    assert await get(queue) == "a"
    assert await get(queue) == "b"
    with pytest.raises(ShutDown):
        await get(queue)


async def test_shut_down_with_drain_waits_for_in_flight_items() -> None:
    queue: Queue[str] = Queue()
    queue.add("a")
    queue.add("b")
    a = await get(queue)
    b = await get(queue)
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drain.done()
    queue.done(a)
    await settle()
    assert not drain.done()
    queue.done(b)
    await asyncio.wait_for(drain, TIMEOUT)


async def test_drain_also_waits_for_an_item_requeued_by_done() -> None:
    queue: Queue[str] = Queue()
    queue.add("a")
    item = await get(queue)
    queue.add("a")  # dirty while in flight
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()  # the drain is waiting on the in-flight item
    queue.done(item)  # re-queued: still work to do
    await settle()
    assert not drain.done()
    again = await get(queue)
    assert again == "a"
    queue.done(again)
    await asyncio.wait_for(drain, TIMEOUT)
    with pytest.raises(ShutDown):
        await get(queue)


async def test_shut_down_interrupts_a_drain() -> None:
    queue: Queue[str] = Queue()
    queue.add("a")
    await get(queue)
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drain.done()
    queue.shut_down()
    await asyncio.wait_for(drain, TIMEOUT)


async def test_drain_with_nothing_in_flight_returns_at_once() -> None:
    queue: Queue[str] = Queue()
    await asyncio.wait_for(queue.shut_down_with_drain(), TIMEOUT)
    assert queue.shutting_down()


async def test_cancelled_getter_passes_its_wake_up_on() -> None:
    queue: Queue[str] = Queue()
    first = asyncio.create_task(queue.get())
    await settle()
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("x")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it could take the item
    assert await asyncio.wait_for(second, TIMEOUT) == "x"
    assert first.cancelled()


# --- DelayingQueue ---------------------------------------------------------------------


async def test_add_after_non_positive_delay_adds_immediately(delaying: DelayingQueue[str]) -> None:
    delaying.add_after("now", 0)
    delaying.add_after("past", -5)
    assert len(delaying) == 2


async def test_add_after_waits_for_the_clock(delaying: DelayingQueue[str], clock: FakeClock) -> None:
    delaying.add_after("a", 1.0)
    await clock.wait_for_waiters(1)
    clock.step(0.5)
    await settle()
    assert len(delaying) == 0
    clock.step(0.5)
    assert await get(delaying) == "a"


async def test_items_become_available_in_ready_time_order(
    delaying: DelayingQueue[str], clock: FakeClock
) -> None:
    delaying.add_after("c", 3.0)
    delaying.add_after("a", 1.0)
    delaying.add_after("b", 2.0)
    await settle()
    clock.step(1.0)
    assert await get(delaying) == "a"
    await settle()
    assert len(delaying) == 0
    clock.step(5.0)  # b and c both due at once: still ready-time order
    assert await get(delaying) == "b"
    assert await get(delaying) == "c"


async def test_earlier_of_two_schedules_wins(delaying: DelayingQueue[str], clock: FakeClock) -> None:
    delaying.add_after("x", 5.0)
    await clock.wait_for_waiters(1)  # the loop is already sleeping towards t=5
    delaying.add_after("x", 1.0)
    delaying.add_after("y", 2.0)
    delaying.add_after("y", 4.0)  # later than the existing schedule: ignored
    clock.step(1.0)
    assert await get(delaying) == "x"
    delaying.done("x")
    clock.step(1.0)
    assert await get(delaying) == "y"
    delaying.done("y")
    clock.step(10.0)  # the superseded schedules (x at 5, y at 4) never fire
    await settle()
    assert len(delaying) == 0


async def test_delayed_add_of_an_already_queued_item_is_deduplicated(
    delaying: DelayingQueue[str], clock: FakeClock
) -> None:
    delaying.add("a")
    delaying.add_after("a", 1.0)
    clock.step(1.0)
    await settle()
    assert len(delaying) == 1


async def test_stepping_in_parts_reaches_a_deadline_despite_rounding() -> None:
    clock = FakeClock(start=1e6 + 0.1)
    queue: DelayingQueue[str] = DelayingQueue(clock=clock)
    queue.add_after("a", 0.3)
    await clock.wait_for_waiters(1)
    for _ in range(3):
        clock.step(0.1)
    assert await get(queue) == "a"
    queue.shut_down()


async def test_shut_down_stops_the_waiting_loop(clock: FakeClock) -> None:
    queue: DelayingQueue[str] = DelayingQueue(clock=clock)
    queue.add_after("a", 1.0)
    await clock.wait_for_waiters(1)
    queue.shut_down()
    await settle()
    assert clock.waiters == 0  # the loop's sleep was cancelled
    clock.step(2.0)
    await settle()
    queue.add_after("b", 0)  # ignored after shutdown
    with pytest.raises(ShutDown):
        await get(queue)


# --- RateLimitingQueue -----------------------------------------------------------------


async def test_add_rate_limited_uses_the_limiter_and_forget_resets(clock: FakeClock) -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, 100.0)
    queue: RateLimitingQueue[str] = RateLimitingQueue(limiter, clock=clock)
    assert queue.rate_limiter is limiter

    queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 1
    await clock.wait_for_waiters(1)
    assert clock.next_deadline() == 1.0
    clock.step(1.0)
    assert await get(queue) == "a"
    queue.done("a")

    queue.add_rate_limited("a")  # second failure: 2 s
    assert queue.num_requeues("a") == 2
    await clock.wait_for_waiters(1)
    clock.step(1.0)
    await settle()
    assert len(queue) == 0
    clock.step(1.0)
    assert await get(queue) == "a"
    queue.done("a")

    queue.forget("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")  # back to the base delay
    await clock.wait_for_waiters(1)
    assert clock.next_deadline() == pytest.approx(clock.now() + 1.0)
    queue.shut_down()


async def test_default_rate_limiter_runs_on_the_queue_clock(clock: FakeClock) -> None:
    queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    for i in range(101):
        queue.add_rate_limited(f"item-{i}")
    await settle()
    clock.step(0.005)
    await settle()
    assert len(queue) == 100  # the burst: all at the 5 ms base delay
    clock.step(0.095)
    await settle()
    assert len(queue) == 101  # the 101st waited for a token: 0.1 s
    queue.shut_down()


# --- Metrics ---------------------------------------------------------------------------


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, {"controller": "ctrl", "name": "ctrl", **labels})


async def test_prometheus_metrics_names_and_values(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusQueueMetrics("ctrl", registry, clock=clock)
    queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock, metrics=metrics)

    exposition = generate_latest(registry).decode()
    for family in [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_retries_total",
    ]:
        assert f"# TYPE {family} " in exposition
    assert 'workqueue_adds_total{controller="ctrl",name="ctrl"} 0.0' in exposition
    assert 'workqueue_retries_total{controller="ctrl",name="ctrl"} 0.0' in exposition
    bucket = 'workqueue_{}_duration_seconds_bucket{{controller="ctrl",le="{}",name="ctrl"}} 0.0'
    assert bucket.format("queue", "1e-08") in exposition
    assert bucket.format("work", "1000.0") in exposition

    queue.add("a")
    queue.add("a")  # deduplicated: not an add
    queue.add("b")
    assert sample(registry, "workqueue_adds_total") == 2
    assert sample(registry, "workqueue_depth") == 2

    clock.step(1.0)
    a = await get(queue)
    clock.step(2.0)
    b = await get(queue)
    assert sample(registry, "workqueue_depth") == 0
    assert sample(registry, "workqueue_queue_duration_seconds_count") == 2
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == pytest.approx(1.0 + 3.0)

    clock.step(4.0)  # a in flight for 6 s, b for 4 s
    assert sample(registry, "workqueue_unfinished_work_seconds") == pytest.approx(10.0)
    assert sample(registry, "workqueue_longest_running_processor_seconds") == pytest.approx(6.0)

    queue.done(a)
    assert sample(registry, "workqueue_work_duration_seconds_count") == 1
    assert sample(registry, "workqueue_work_duration_seconds_sum") == pytest.approx(6.0)
    assert sample(registry, "workqueue_unfinished_work_seconds") == pytest.approx(4.0)
    queue.done(b)
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 0

    queue.add_rate_limited("a")
    queue.add_after("b", 0)
    assert sample(registry, "workqueue_retries_total") == 2
    assert 'workqueue_retries_total{controller="ctrl",name="ctrl"} 2.0' in generate_latest(registry).decode()
    queue.shut_down()


async def test_queues_share_one_registry() -> None:
    registry = CollectorRegistry()
    first: Queue[str] = Queue(metrics=PrometheusQueueMetrics("first", registry))
    second: Queue[str] = Queue(metrics=PrometheusQueueMetrics("second", registry))
    first.add("a")
    second.add("a")
    second.add("b")
    for name, adds in (("first", 1), ("second", 2)):
        labels = {"controller": name, "name": name}
        assert registry.get_sample_value("workqueue_adds_total", labels) == adds
    exposition = generate_latest(registry).decode()
    assert 'workqueue_unfinished_work_seconds{controller="first",name="first"} 0.0' in exposition
    assert 'workqueue_unfinished_work_seconds{controller="second",name="second"} 0.0' in exposition
    assert exposition.count("# TYPE workqueue_depth gauge") == 1
