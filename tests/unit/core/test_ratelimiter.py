"""Rate limiter sequences must match client-go's, or retry timing silently diverges from the spec."""

from __future__ import annotations

import pytest

from valkey_operator.core.clock import FakeClock
from valkey_operator.core.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_from_base_and_caps_at_max() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:5] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s, still under the cap
    assert delays[18] == 1000.0
    assert delays[19] == 1000.0
    assert limiter.num_requeues("a") == 20


def test_exponential_never_overflows() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(1.0, 60.0)
    for _ in range(5000):
        delay = limiter.when("a")
    assert delay == 60.0


def test_exponential_is_per_item_and_forget_resets() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == pytest.approx(0.005)
    assert limiter.num_requeues("a") == 2
    assert limiter.num_requeues("b") == 1

    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.num_requeues("b") == 1
    assert limiter.num_requeues("never-seen") == 0


def test_bucket_first_burst_immediate_then_spaced_by_qps() -> None:
    clock = FakeClock()
    limiter: BucketRateLimiter[int] = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert [limiter.when(i) for i in range(100, 104)] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert limiter.num_requeues(100) == 0


def test_bucket_refills_with_time_up_to_burst() -> None:
    clock = FakeClock()
    limiter: BucketRateLimiter[int] = BucketRateLimiter(qps=10, burst=100, clock=clock)
    for i in range(102):
        limiter.when(i)  # tokens now at -2
    clock.step(1.0)  # +10 tokens -> 8
    assert [limiter.when(0) for _ in range(8)] == [0.0] * 8
    assert limiter.when(0) == pytest.approx(0.1)

    clock.step(1000.0)  # refill is capped at the burst
    assert [limiter.when(0) for _ in range(100)] == [0.0] * 100
    assert limiter.when(0) == pytest.approx(0.1)


def test_bucket_rejects_nonsense_configuration() -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0)
    with pytest.raises(ValueError):
        BucketRateLimiter(burst=0)
    with pytest.raises(ValueError):
        MaxOfRateLimiter()


def test_max_of_takes_longest_wait_and_feeds_every_limiter() -> None:
    fast: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.001, 10.0)
    slow: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.1, 1.0)
    limiter = MaxOfRateLimiter(fast, slow)
    assert [limiter.when("a") for _ in range(5)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0])
    assert fast.num_requeues("a") == 5
    assert slow.num_requeues("a") == 5
    assert [limiter.when("a") for _ in range(10)][-1] == pytest.approx(10.0)  # fast's cap is higher
    assert limiter.num_requeues("a") == 15

    limiter.forget("a")
    assert fast.num_requeues("a") == 0
    assert slow.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.1)


def test_max_of_num_requeues_is_the_maximum() -> None:
    a: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    b: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    for _ in range(3):
        b.when("x")
    a.when("x")
    assert MaxOfRateLimiter(a, b).num_requeues("x") == 3


def test_default_controller_rate_limiter_combines_item_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter: RateLimiter[str] = default_controller_rate_limiter(clock)
    # 100 distinct failing items: the bucket lets them through, each gets the 5 ms base delay.
    assert [limiter.when(f"item-{i}") for i in range(100)] == pytest.approx([0.005] * 100)
    # The 101st failure within the same instant waits for the bucket: 0.1 s, more than 5 ms.
    assert limiter.when("item-100") == pytest.approx(0.1)
    assert limiter.num_requeues("item-0") == 1

    # One item failing repeatedly: its own backoff dominates once the bucket has refilled.
    clock.step(100.0)
    delays = [limiter.when("hot") for _ in range(5)]
    assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert limiter.num_requeues("hot") == 5
    limiter.forget("hot")
    assert limiter.num_requeues("hot") == 0
    assert limiter.when("hot") == pytest.approx(0.005)


def test_default_controller_rate_limiter_caps_at_1000_seconds() -> None:
    clock = FakeClock()
    limiter: RateLimiter[str] = default_controller_rate_limiter(clock)
    delay = 0.0
    for _ in range(30):
        clock.step(10.0)  # keep the bucket full so only the per-item backoff counts
        delay = limiter.when("x")
    assert delay == 1000.0
