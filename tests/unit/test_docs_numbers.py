"""Numbers in the docs come from one source each, and these tests keep them equal to it.

Hand-copied numbers drift (the 3x1 roll was once 74 s, 72 s and 51 s in three
places; the readiness period 5 s in the docs and 2 s in the pod). The sources:
- the 3x1 rolling update: the saved output of `bench/rollout.py --output
  bench/results/rollout.json`, which docs/performance.md (its table and
  prose), docs/upgrading.md and the ValkeyCluster reference cite; after a new
  bench run, rewrite the sentences these tests print;
- the Valkey pods' probes: the pod the operator renders.
"""

from __future__ import annotations

import importlib
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from controllers.cluster.render.context import RenderContext
from controllers.cluster.render.pods import render_pod
from controllers.shared.config_resolve import ResolvedConfig, ResolvedImage
from valkey_operator.api.cluster import ValkeyCluster

ROOT = Path(__file__).resolve().parents[2]
ROLLOUT = ROOT / "bench" / "results" / "rollout.json"
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def text(relative: str) -> str:
    """A doc with its line breaks and runs of spaces folded, so a sentence may wrap anywhere."""
    return " ".join((ROOT / relative).read_text().split())


def rollout() -> dict[str, Any]:
    """Per side, the medians and the keys lost and acknowledged over every round; plus the record's
    date, cores, load average, rounds and image versions."""
    record = json.loads(ROLLOUT.read_text())
    sides: dict[str, Any] = {}
    for side, rounds in record["results"].items():
        assert rounds and all("error" not in result for result in rounds), (side, rounds)
        sides[side] = {
            **{name: statistics.median(result[name] for result in rounds) for name in rounds[0]},
            "lost": sum(result["lost"] + result["unreadable"] for result in rounds),
            "acknowledged": sum(result["acknowledged"] for result in rounds),
        }
    args = record["args"]
    return {
        **sides,
        "measured": record["measured"],
        "cpus": record["cpus"],
        "load": record["load_average"],
        "rounds": args["rounds"],
        "old": args["old"].rpartition(":")[2],
        "new": args["new"].rpartition(":")[2],
    }


def rollout_claims() -> dict[str, list[str]]:
    """What each doc must say about the 3x1 roll, from the bench record."""
    data = rollout()
    ours, naive = data["ours"], data["naive"]
    assert ours["lost"] == 0, "the docs say no acknowledged write was lost"
    rounds = "one round" if data["rounds"] == 1 else f"median of {data['rounds']} rounds"

    def row(side: str, values: dict[str, Any]) -> str:
        return (
            f"| {side} | {values['seconds']:.1f} s | {values['gap_max']:.2f} s "
            f"| {values['gap_median']:.2f} s | {values['acked_gap_max']:.2f} s "
            f"| {values['lost']} of {values['acknowledged']:,} |"
        )

    roll = (
        f"a 3x1 cluster rolled in {ours['seconds']:.0f} s with the longest pause of any shard "
        f"{ours['gap_max']:.2f} s"
    )
    return {
        "docs/performance.md": [
            f"(load average {data['load'][2]:.1f} over the 15 minutes before it ended), "
            f"{data['measured']}, {data['cpus']} cores, {rounds}:",
            row("ours", ours),
            row("naive", naive),
            f"The naive roll's worst shard took no write for {naive['gap_max']:.1f} s",
            f"acknowledged none with WAIT 1 for {naive['acked_gap_max']:.1f} s",
            f"ours paused each shard for at most {ours['gap_max']:.2f} s: "
            f"{naive['gap_max'] / ours['gap_max']:.0f}x shorter",
        ],
        "docs/upgrading.md": [roll + " and no acknowledged write lost"],
        "docs/reference/valkeycluster.md": [
            f"a 3x1 cluster from {data['old']} to {data['new']} under continuous writes in "
            f"{ours['seconds']:.0f} s, every pod replaced, the longest write gap of any shard "
            f"{ours['gap_max']:.2f} s, no acknowledged write lost"
        ],
    }


def test_rollout_numbers_in_the_docs_are_the_bench_record() -> None:
    missing = [
        f"{doc}: {claim}"
        for doc, claims in rollout_claims().items()
        for claim in claims
        if claim not in text(doc)
    ]
    assert not missing, "write these as the bench record says (bench/results/rollout.json):\n" + "\n".join(
        missing
    )


_PARAGRAPH = re.compile(r"\n\s*\n|\n(?=\s*[#|-])")
"""Blank lines, and the starts of headings, table rows and list items."""
_SENTENCE = re.compile(r"(?<=[.;:])\s+(?=[A-Z(`])")
_SECONDS = re.compile(r"\b(\d+(?:\.\d+)?) ?s\b")


def test_no_other_3x1_roll_time_is_written_anywhere() -> None:
    """A sentence about rolling a 3x1 cluster quotes only the bench record's numbers."""
    data = rollout()
    allowed = {
        f"{value:.{digits}f}"
        for side in ("ours", "naive")
        for name in ("seconds", "gap_max", "gap_median", "acked_gap_max", "acked_gap_median")
        for value in [data[side][name]]
        for digits in (0, 1, 2)
    }
    stray = []
    for path in DOCS:
        sentences = [
            sentence
            for paragraph in _PARAGRAPH.split(path.read_text())
            for sentence in _SENTENCE.split(" ".join(paragraph.split()))
        ]
        for sentence in sentences:
            if re.search(r"\b3x1\b", sentence) and re.search(r"\broll", sentence, re.IGNORECASE):
                stray += [
                    f"{path.relative_to(ROOT)}: {number} s in {sentence[:160]!r}"
                    for number in _SECONDS.findall(sentence)
                    if number not in allowed
                ]
    assert not stray, "\n".join(stray)


def rendered_probes() -> dict[str, dict[str, Any]]:
    cluster = ValkeyCluster.from_dict(
        {"metadata": {"name": "c", "namespace": "n", "uid": "u", "generation": 1}, "spec": {"configRef": "c"}}
    )
    config = ResolvedConfig(
        ("c",), ResolvedImage("v", "valkey/valkey", "9.1.2", "9.1.2"), {"cpu": "1", "memory": "1Gi"}, {}, {}
    )
    pod = render_pod(RenderContext(cluster=cluster, config=config), 0, "c-0-abcde")
    (container,) = pod["spec"]["containers"]
    return {kind: container[f"{kind}Probe"] for kind in ("readiness", "liveness")}


def test_probe_numbers_in_the_docs_are_the_rendered_pods() -> None:
    probes = rendered_probes()
    ready, live = probes["readiness"], probes["liveness"]
    claim = (
        f"for readiness (every {ready['periodSeconds']} s, not ready after {ready['failureThreshold']} "
        f"failures) and liveness (generous: after {live['initialDelaySeconds']} s, "
        f"{live['failureThreshold']} failures {live['periodSeconds']} s apart)"
    )
    assert claim in text("docs/cluster-internals.md"), claim


def test_monitoring_shows_the_node_metrics_bench_record() -> None:
    """docs/monitoring.md shows bench/valkey_metrics.py's own table of
    bench/results/valkey-metrics.json."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        bench = importlib.import_module("valkey_metrics")
    finally:
        sys.path.remove(str(ROOT / "bench"))
    record = json.loads((ROOT / "bench" / "results" / "valkey-metrics.json").read_text())
    assert record["nodes_up"] == record["nodes"] == 100
    table = bench.table(record)
    assert table in (ROOT / "docs" / "monitoring.md").read_text(), table
