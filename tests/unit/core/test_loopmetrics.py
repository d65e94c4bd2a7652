"""The event-loop metrics expose exactly what prometheus-client's own metrics would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)

from valkey_operator.core.loopmetrics import CounterFamily, GaugeFamily, HistogramFamily

BUCKETS = (0.005, 0.1, 1.0, 10.0)
OBSERVED = (0.0, 0.005, 0.0051, 0.5, 1.0, 3.0, 99.0)


@pytest.fixture
def without_created_series() -> Iterator[None]:
    """The operator disables *_created series (controller-runtime has none): compare like that."""
    disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        enable_created_metrics()  # type: ignore[no-untyped-call]


def test_the_exposition_matches_prometheus_clients(without_created_series: None) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    their_counter = Counter("jobs", "Jobs done", ["controller"], registry=theirs)
    their_gauge = Gauge("depth", "Queue depth", ["controller"], registry=theirs)
    their_histogram = Histogram(
        "took_seconds", "Time taken", ["controller"], registry=theirs, buckets=BUCKETS
    )
    our_counter = CounterFamily("jobs", "Jobs done", ["controller"], registry=ours)
    our_gauge = GaugeFamily("depth", "Queue depth", ["controller"], registry=ours)
    our_histogram = HistogramFamily(
        "took_seconds", "Time taken", ["controller"], registry=ours, buckets=BUCKETS
    )
    for name in ("a", "b"):
        their_counter.labels(controller=name).inc(2)
        our_counter.labels(controller=name).inc(2)
        their_gauge.labels(controller=name).inc(3)
        their_gauge.labels(controller=name).dec()
        our_gauge.labels(controller=name).inc(3)
        our_gauge.labels(controller=name).dec()
        for value in OBSERVED:
            their_histogram.labels(controller=name).observe(value)
            our_histogram.labels(controller=name).observe(value)
    their_histogram.labels(controller="idle")
    our_histogram.labels(controller="idle")  # a series exists at zero once labelled
    assert generate_latest(ours).decode() == generate_latest(theirs).decode()
    assert ours.get_sample_value("took_seconds_bucket", {"controller": "a", "le": "0.005"}) == 2
    assert ours.get_sample_value("took_seconds_count", {"controller": "a"}) == len(OBSERVED)


def test_wrong_labels_and_negative_counts_are_refused() -> None:
    registry = CollectorRegistry()
    jobs = CounterFamily("jobs", "Jobs done", ["controller"], registry=registry)
    with pytest.raises(ValueError, match="labels"):
        jobs.labels(queue="a")
    with pytest.raises(ValueError, match="only go up"):
        jobs.labels(controller="a").inc(-1)
    with pytest.raises(ValueError, match="Duplicated"):
        CounterFamily("jobs", "again", ["controller"], registry=registry)
