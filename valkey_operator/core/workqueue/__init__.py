"""Work queues with client-go semantics: dedup, one worker per item, delayed and rate-limited adds."""

from valkey_operator.core.workqueue.delaying import DelayingQueue
from valkey_operator.core.workqueue.metrics import (
    DURATION_BUCKETS,
    ItemTimings,
    NoopQueueMetrics,
    PrometheusQueueMetrics,
    QueueMetrics,
)
from valkey_operator.core.workqueue.queue import Queue, ShutDown
from valkey_operator.core.workqueue.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from valkey_operator.core.workqueue.ratelimiting import RateLimitingQueue

__all__ = [
    "DURATION_BUCKETS",
    "BucketRateLimiter",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "ItemTimings",
    "MaxOfRateLimiter",
    "NoopQueueMetrics",
    "PrometheusQueueMetrics",
    "Queue",
    "QueueMetrics",
    "RateLimiter",
    "RateLimitingQueue",
    "ShutDown",
    "default_controller_rate_limiter",
]
