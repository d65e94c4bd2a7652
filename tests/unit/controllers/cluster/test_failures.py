"""The crash-loop guard the planner reads: pods that keep failing stop being replaced (world only)."""

from __future__ import annotations

import datetime

from controllers.cluster.decision import failures
from controllers.cluster.decision.failures import FAILURE_LIMIT, FAILURE_WINDOW, KEEP_FAILED, CrashLoops
from controllers.shared.observation import PodObservation

NOW = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.UTC)


def pod(name: str, *, shard: int = 0, age: float, phase: str = "Failed", template: str = "h1") -> dict:
    created = (NOW - datetime.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "labels": {
                "valkey.gomomento.com/shard": str(shard),
                "valkey.gomomento.com/template-hash": template,
            },
        },
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "valkey", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
            ],
        },
    }


def crash_loops(pods: list[dict], template: str, now: datetime.datetime) -> CrashLoops:
    """The guard reads the pods as the observation models them (PodObservation.from_pod)."""
    return failures.crash_loops([PodObservation.from_pod(pod) for pod in pods], template, now.timestamp())


def test_fewer_failures_than_the_limit_do_not_block() -> None:
    loops = crash_loops([pod(f"p{i}", age=10 * i) for i in range(FAILURE_LIMIT - 1)], "h1", NOW)
    assert loops.blocked == {} and loops.retry_after is None


def test_repeated_recent_failures_block_the_shard_until_the_window_passes() -> None:
    pods = [pod(f"p{i}", age=10 * (i + 1)) for i in range(FAILURE_LIMIT)] + [
        pod("ok", shard=1, age=5, phase="Running")
    ]
    loops = crash_loops(pods, "h1", NOW)
    assert set(loops.blocked) == {0}
    assert loops.blocked[0][0].name == "p0"  # newest first
    assert loops.retry_after == FAILURE_WINDOW - 10 * FAILURE_LIMIT
    message = loops.message("valkey/valkey:8.1.8")
    assert "valkey/valkey:8.1.8" in message and "exited with code 1" in message


def test_old_failures_and_other_templates_do_not_block() -> None:
    old = [pod(f"old{i}", age=FAILURE_WINDOW + i + 1) for i in range(FAILURE_LIMIT)]
    other = [pod(f"t{i}", age=i + 1, template="h0") for i in range(FAILURE_LIMIT)]
    assert crash_loops(old, "h1", NOW).blocked == {}
    assert crash_loops(other, "h1", NOW).blocked == {}


def test_only_the_newest_failed_pods_of_a_shard_are_kept() -> None:
    pods = [pod(f"p{i}", age=i + 1) for i in range(KEEP_FAILED + 2)]
    assert [failed.name for failed in crash_loops(pods, "h1", NOW).prune] == [
        f"p{i}" for i in range(KEEP_FAILED, KEEP_FAILED + 2)
    ]


def test_a_failed_server_that_printed_a_below_floor_version_is_named_with_it() -> None:
    pods = [pod(f"p{i}", age=10 * (i + 1)) for i in range(FAILURE_LIMIT)]
    terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    terminated["message"] = (
        "*** FATAL CONFIG FILE ERROR (Version 8.1.8) ***\n"
        "Reading the configuration file, at line 12\n"
        ">>> 'shutdown-on-sigterm \"failover\"'\n"
    )
    loops = crash_loops(pods, "h1", NOW)
    assert loops.below_floor_version() == "8.1.8"
    message = loops.message("valkey/valkey:8.1.8")
    assert "valkey/valkey:8.1.8 runs Valkey 8.1.8, below the supported floor 9.0.1" in message


def test_a_printed_version_at_or_above_the_floor_is_not_blamed() -> None:
    pods = [pod(f"p{i}", age=10 * (i + 1)) for i in range(FAILURE_LIMIT)]
    terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    terminated["message"] = "*** FATAL CONFIG FILE ERROR (Version 9.1.2) ***"
    loops = crash_loops(pods, "h1", NOW)
    assert loops.below_floor_version() is None
    assert "keep failing" in loops.message("valkey/valkey:9.1.2")


def test_a_failed_pod_is_told_once_and_an_oom_kill_says_what_to_change() -> None:
    oom = pod("db-1-a", shard=1, age=5)
    oom["status"]["containerStatuses"][0]["state"]["terminated"] = {"exitCode": 137, "reason": "OOMKilled"}
    pods = [PodObservation.from_pod(p) for p in (oom, pod("db-0-b", age=5, phase="Running"))]
    events, told = failures.failure_events(pods, frozenset())
    assert [(event.type, event.reason) for event in events] == [("Warning", "PodFailed")]
    assert (
        "pod db-1-a (shard 1) failed: container valkey exited with code 137 (OOMKilled)" in events[0].message
    )
    assert "raise the limit" in events[0].message
    assert told == {"db-1-a"}
    assert failures.failure_events(pods, told) == ((), told)  # the next pass: nothing new to tell


def test_a_pruned_failed_pod_is_forgotten_and_a_crash_names_no_memory_limit() -> None:
    crashed = PodObservation.from_pod(pod("db-0-c", age=5))
    events, told = failures.failure_events([crashed], frozenset({"db-0-gone"}))
    assert told == {"db-0-c"}  # db-0-gone was pruned: not remembered any more
    assert "exited with code 1 (Error)" in events[0].message and "memory limit" not in events[0].message
