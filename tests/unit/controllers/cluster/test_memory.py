"""One cluster's Memory between passes (pure): pod writes awaited, statuses written, refusals, claims."""

from __future__ import annotations

import observed
from decide_harness import step, world

from controllers.cluster.decision.actions import Failure, SetConfig
from controllers.cluster.decision.memory import (
    EXPECTATION_TTL,
    Expected,
    Memory,
    Refusals,
    live_refusals,
    recorded_status,
    remember_refusals,
)
from controllers.shared.observation import PodObservation


def pod(name: str, *, deleting: bool = False, annotations: dict[str, str] | None = None) -> PodObservation:
    return observed.pod(name, 0, template="t", deleting=deleting, annotations=annotations or {})


def test_writes_are_awaited_until_the_cache_shows_them_or_they_lapse() -> None:
    expected = Expected().expect(0.0, created=["a"], deleted=["b"], annotated={"c": {"x/y": "1"}})
    assert expected.met([pod("b"), pod("c")], 1.0).names() == {"a", "b", "c"}
    shown = [pod("a"), pod("b", deleting=True), pod("c", annotations={"x/y": "1", "other": "z"})]
    assert expected.met(shown, 1.0).names() == frozenset()
    later = Expected().expect(0.0, created=["d"])
    assert later.met([], EXPECTATION_TTL + 1).names() == frozenset()  # a lost watch event cannot block


def test_a_cache_still_at_the_written_version_reads_as_the_written_status() -> None:
    memory = Memory().wrote("10", {"metadata": {"resourceVersion": "11"}, "status": {"state": "Active"}})
    assert recorded_status(memory, "10") == {"state": "Active"}  # stale cache: no second finish
    assert recorded_status(memory, "12") is None  # any other version wins: versions are never ordered
    assert recorded_status(None, "10") is None
    assert Memory().wrote(None, {"status": {}}) == Memory()  # no version to compare with: nothing kept


def test_two_writes_before_the_cache_shows_the_first_leave_the_second_recorded() -> None:
    """The warm CI of 697de9c saw RolloutFinished twice: pass A wrote a rolling status on version 10
    (the server made it 11), pass B, with the cache still at 10, wrote the finished one (12); the
    cache then showed 11, the rolling status, and pass C finished the rollout again."""
    rolling = {"metadata": {"resourceVersion": "11"}, "status": {"state": "Updating", "rollout": {}}}
    finished = {"metadata": {"resourceVersion": "12"}, "status": {"state": "Active"}}
    memory = Memory().wrote("10", rolling).wrote("10", finished)
    assert recorded_status(memory, "10") == {"state": "Active"}
    assert recorded_status(memory, "11") == {"state": "Active"}  # our first write: older than the second
    assert recorded_status(memory, "12") is None  # the cache caught up
    assert recorded_status(memory, "13") is None  # a later write of anyone's holds ours too


def test_versions_known_older_are_forgotten_once_the_cache_caught_up() -> None:
    memory = Memory().wrote("10", {"metadata": {"resourceVersion": "11"}, "status": {"state": "Updating"}})
    memory = memory.wrote("11", {"metadata": {"resourceVersion": "12"}, "status": {"state": "Active"}})
    assert memory.written is not None and memory.written.older == {"11"}
    assert recorded_status(memory, "10") is None  # no longer remembered: it is not what the cache lags at


def test_refusals_last_while_their_pod_lives_and_unnamed_ones_until_it_is_sent_settings() -> None:
    sent = SetConfig("p", (("hz", "15"), ("timeout", "30")))
    refused = remember_refusals(Refusals(), [sent], [Failure(sent, "ERR", refused="")])
    assert refused.unnamed == {"p": "ERR"}
    named = remember_refusals(refused, [sent], [Failure(sent, "bad hz", refused="hz")])
    assert named.unnamed == {} and named.named["p"]["hz"].value == "15"
    assert live_refusals(named, ["q"]) == Refusals()


def test_the_memory_a_pass_returns_is_the_one_the_next_pass_starts_from() -> None:
    """decide folds what it needs into the returned Memory; a refusal the actor reports comes back
    as the next pass's Context.refusals, with no other record kept anywhere."""
    found = world(1, 0)
    first = step(found)
    assert first.memory == found.memory
    created = [a for a in first.actions if type(a).__name__ == "CreatePod"]
    assert created
    sent = SetConfig("vk-0-x", (("hz", "15"),))
    after = first.after([Failure(sent, "no", refused="hz")], created=["vk-0-x"])
    assert after.memory.expected.names() == {"vk-0-x"}
    assert after.memory.refusals.named["vk-0-x"]["hz"].message == "no"
