"""Fuzzed input (issue 21, part 4): hypothesis-drawn ValkeyImages, Configs, Roles and Clusters, valid,
near-valid and hostile, sent to the real API server while the real operator process runs.

Each write is refused at admission with causes naming fields of what was sent, or stored and then
explained by its status; the operator never dies, reconciles no object more than about once a
second when nothing changes, stays under half a core when idle, and its memory does not grow
between rounds; everything deleted goes (no protection finalizer holds on). The seed is fixed, so
CI sends the same objects every time; `python -m valkey_testbed fuzz` runs longer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from valkey_testbed.fuzz.runner import FuzzSettings, run_fuzz

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SEED = 21
EXAMPLES = 40
KINDS = ("ValkeyImage", "ValkeyConfig", "ValkeyRole", "ValkeyCluster")


def test_fuzzed_objects_are_refused_or_explained_and_the_operator_holds(
    kubeconfig_path: Path, tmp_path: Path
) -> None:
    settings = FuzzSettings(seed=SEED, examples=EXAMPLES, rounds=2, settle_timeout=45.0, quiet_seconds=8.0)
    report = run_fuzz(kubeconfig_path, settings, tmp_path, progress=print)
    summary = report.summary()
    print(summary)
    assert report.violations == [], summary
    assert report.crashes == 0 and report.exit_code == 0, summary
    assert report.rounds == 2, summary
    for kind in KINDS:  # the seed reaches both outcomes of every kind, so neither side is vacuous
        assert report.refused[kind] > 0, (kind, summary)
        assert report.accepted[kind] > 0, (kind, summary)
    for kind in ("ValkeyConfig", "ValkeyRole", "ValkeyCluster"):
        assert report.explained[kind] > 0, (kind, summary)
    assert report.passes > 0 and len(report.rss) == 3, summary
