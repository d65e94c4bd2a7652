"""The status document and table, from a recorded ValkeyCluster and its pods (no server)."""

from __future__ import annotations

import datetime
from typing import Any

from valkey_operator.kubectl import view

NOW = datetime.datetime(2026, 12, 3, 13, 20, tzinfo=datetime.UTC)


def pod(name: str, shard: int, node: str, ip: str, phase: str = "Running") -> dict[str, Any]:
    labels = {"valkey.gomomento.com/cluster": "cache", "valkey.gomomento.com/shard": str(shard)}
    return {
        "metadata": {"name": name, "labels": labels, "uid": name + "-uid"},
        "spec": {"nodeName": node},
        "status": {"phase": phase, "podIP": ip},
    }


def cluster(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "cache",
            "namespace": "shop",
            "generation": 3,
            "creationTimestamp": "2026-12-01T13:20:00Z",
            "annotations": {},
        },
        "spec": {"shards": 2, "replicasPerShard": 1, "configRef": "standard"},
        "status": {
            "state": "Active",
            "ready": "4/4",
            "observedGeneration": 3,
            "currentImage": "valkey/valkey:9.1.2",
            "endpoint": "cache-client.shop.svc.cluster.local:6379",
            "nodes": [
                {
                    "pod": "cache-0-b",
                    "shard": 0,
                    "role": "replica",
                    "ip": "127.1.0.2",
                    "version": "9.1.2",
                    "inSync": True,
                },
                {
                    "pod": "cache-0-a",
                    "shard": 0,
                    "role": "primary",
                    "ip": "127.1.0.1",
                    "version": "9.1.2",
                    "slots": "0-8191",
                },
                {
                    "pod": "cache-1-a",
                    "shard": 1,
                    "role": "primary",
                    "ip": "127.1.0.3",
                    "version": "9.1.2",
                    "slots": "8192-16383",
                },
                {
                    "pod": "cache-1-b",
                    "shard": 1,
                    "role": "replica",
                    "ip": "127.1.0.4",
                    "version": "9.1.2",
                    "inSync": False,
                },
            ],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "AllSlotsServed",
                    "message": "every slot served",
                },
                {"type": "Progressing", "status": "False", "reason": "Reconciled", "message": ""},
            ],
            **status,
        },
    }


PODS = [
    pod("cache-0-a", 0, "node-1", "127.1.0.1"),
    pod("cache-0-b", 0, "node-2", "127.1.0.2"),
    pod("cache-1-a", 1, "node-3", "127.1.0.3"),
    pod("cache-1-b", 1, "node-1", "127.1.0.4"),
]


def test_the_document_groups_nodes_by_shard_primary_first_with_their_kubernetes_node() -> None:
    doc = view.summarize(cluster(), PODS, NOW)
    assert doc["cluster"]["phase"] == "Active" and doc["cluster"]["age"] == "2d"
    assert doc["cluster"]["versions"] == ["9.1.2"] and doc["cluster"]["paused"] is False
    assert [[n["pod"] for n in s["nodes"]] for s in doc["shards"]] == [
        ["cache-0-a", "cache-0-b"],
        ["cache-1-a", "cache-1-b"],
    ]
    assert [n["node"] for s in doc["shards"] for n in s["nodes"]] == ["node-1", "node-2", "node-3", "node-1"]
    assert doc["shards"][1]["nodes"][1]["inSync"] is False
    assert doc["rollout"] is None and doc["switchover"] is None


def test_a_pod_the_status_does_not_list_yet_is_shown_with_its_phase() -> None:
    surge = pod("cache-1-c", 1, "node-2", "", phase="Pending")
    doc = view.summarize(cluster(), [*PODS, surge], NOW)
    row = doc["shards"][1]["nodes"][-1]
    assert row["pod"] == "cache-1-c" and row["role"] is None and row["podPhase"] == "Pending"
    table = view.render(doc, NOW)
    assert any(line.split()[:2] == ["Pending", "cache-1-c"] for line in table.splitlines()), table


def test_a_node_whose_pod_is_gone_says_so() -> None:
    table = view.render(view.summarize(cluster(), PODS[1:], NOW), NOW)
    row = next(line for line in table.splitlines() if "cache-0-a" in line)
    assert row.split()[:4] == ["0", "primary", "cache-0-a", "(gone)"], row


def test_the_table_reads_at_a_glance() -> None:
    rollout = {
        "shardsUpdated": 1,
        "shards": 2,
        "shard": 1,
        "step": "syncing surge pod",
        "startedAt": "2026-12-03T13:18:00Z",
    }
    switchover = {
        "request": "0@20261203T131500Z",
        "phase": "Succeeded",
        "from": "cache-0-a",
        "to": "cache-0-b",
        "finishedAt": "2026-12-03T13:15:30Z",
    }
    doc = view.summarize(cluster(rollout=rollout, switchover=switchover), PODS, NOW)
    assert view.render(doc, NOW).splitlines() == [
        "shop/cache: Active, ready 4/4, 2 shards x 1 replica, valkey/valkey:9.1.2 (9.1.2), age 2d",
        "Endpoint: cache-client.shop.svc.cluster.local:6379",
        "",
        "SHARD   ROLE      POD         NODE     IP          VERSION   SLOTS        IN-SYNC",
        "0       primary   cache-0-a   node-1   127.1.0.1   9.1.2     0-8191       -",
        "        replica   cache-0-b   node-2   127.1.0.2   9.1.2     -            yes",
        "1       primary   cache-1-a   node-3   127.1.0.3   9.1.2     8192-16383   -",
        "        replica   cache-1-b   node-1   127.1.0.4   9.1.2     -            no",
        "",
        "CONDITION     STATUS   REASON           MESSAGE",
        "Ready         True     AllSlotsServed   every slot served",
        "Progressing   False    Reconciled       -",
        "",
        "Rollout: 1/2 shards updated, shard 1 rolling: syncing surge pod (started 2m ago)",
        "Switchover 0@20261203T131500Z: Succeeded, cache-0-a -> cache-0-b (finished 4m30s ago)",
    ]


def test_an_archiving_cluster_says_how_far_behind_its_archive_is_and_why_it_is_not_whole() -> None:
    behind = {"archivedUntil": "2026-12-03T13:19:35Z"}
    doc = view.summarize(cluster(pointInTime=behind), PODS, NOW)
    assert doc["pointInTime"] == behind
    assert view.render(doc, NOW).splitlines()[-1] == "Archived until: 2026-12-03T13:19:35Z (25s behind)"
    gap = {**behind, "reason": "ArchiveGap", "message": "history lost"}
    assert view.render(view.summarize(cluster(pointInTime=gap), PODS, NOW), NOW).splitlines()[-1] == (
        "Archived until: 2026-12-03T13:19:35Z (25s behind); ArchiveGap: history lost"
    )
    none = {"reason": "NeedsAppendOnly", "message": "persistence is rdb"}
    assert view.render(view.summarize(cluster(pointInTime=none), PODS, NOW), NOW).splitlines()[-1] == (
        "Archived until: -; NeedsAppendOnly: persistence is rdb"
    )
    assert "Archived" not in view.render(view.summarize(cluster(), PODS, NOW), NOW)


def test_a_paused_cluster_and_an_unobserved_generation_say_so() -> None:
    body = cluster(observedGeneration=2)
    body["metadata"]["annotations"]["valkey.gomomento.com/paused"] = "true"
    lines = view.render(view.summarize(body, PODS, NOW), NOW).splitlines()
    assert lines[0].endswith(", PAUSED")
    assert "Generation 3 not yet observed by the operator (status describes 2)" in lines


def test_a_new_cluster_without_status_renders() -> None:
    body = cluster()
    body["status"] = {}
    lines = view.render(view.summarize(body, [], NOW), NOW).splitlines()
    assert lines[0] == "shop/cache: Unknown, ready -, 2 shards x 1 replica, - (version unknown), age 2d"
    assert "No nodes yet." in lines and "No conditions yet." in lines and "Rollout: none" in lines


def test_ages_read_as_kubectl_prints_them() -> None:
    cases = {
        45: "45s",
        119: "119s",
        330: "5m30s",
        42 * 60: "42m",
        5 * 3600 + 600: "5h10m",
        20 * 3600: "20h",
        3 * 86400 + 4 * 3600: "3d4h",
        12 * 86400: "12d",
        800 * 86400: "2y70d",
    }
    assert {seconds: view.human_duration(seconds) for seconds in cases} == cases
