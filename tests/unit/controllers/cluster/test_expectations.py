"""The reconciler's record of its own pod writes the cache has not shown yet (pure, fake clock)."""

from __future__ import annotations

from controllers.cluster.expectations import EXPECTATION_TTL, PodExpectations


def pod(name: str, *, deleting: bool = False, annotations: dict[str, str] | None = None) -> dict:
    metadata: dict = {"name": name, "annotations": annotations or {}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {"metadata": metadata}


def test_writes_are_awaited_until_the_cache_shows_them_or_they_lapse() -> None:
    now = [0.0]
    expectations = PodExpectations(clock=lambda: now[0])
    expectations.expect("ns/c", created=["a"], deleted=["b"], annotated={"c": {"x/y": "1"}})
    cached = [pod("b"), pod("c")]
    assert expectations.awaiting("ns/c", cached) == {"a", "b", "c"}
    cached = [pod("a"), pod("b", deleting=True), pod("c", annotations={"x/y": "1", "other": "z"})]
    assert expectations.awaiting("ns/c", cached) == frozenset()
    expectations.expect("ns/c", created=["d"])
    now[0] += EXPECTATION_TTL + 1
    assert expectations.awaiting("ns/c", []) == frozenset()  # a lost watch event cannot block forever
    assert expectations.awaiting("ns/other", []) == frozenset()
