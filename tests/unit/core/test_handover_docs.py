"""The docs quote the handover bound the elector's timings give, not a hand-copied number."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from valkey_operator.core.leaderelection import JITTER_FACTOR, LeaderElector, longest_handover
from valkey_operator.core.manager import LeaderElectionConfig

ROOT = Path(__file__).resolve().parents[3]
QUOTING = ("docs/install.md", "docs/monitoring.md", "docs/embedding.md")


def default(name: str) -> float:
    value = attrs.fields_dict(LeaderElectionConfig)[name].default
    assert isinstance(value, float), name
    return value


BOUND = longest_handover(default("lease_duration"), default("retry_period"))


def test_the_bound_is_the_lease_plus_two_jittered_retry_periods() -> None:
    assert BOUND == 15.0 + 2 * 2.0 * JITTER_FACTOR == 19.8
    fields = attrs.fields_dict(LeaderElector)
    assert (fields["lease_duration"].default, fields["retry_period"].default) == (
        default("lease_duration"),
        default("retry_period"),
    ), "the manager and the elector must share their timings"


def test_every_doc_that_bounds_a_handover_quotes_the_computed_bound() -> None:
    for doc in QUOTING:
        text = (ROOT / doc).read_text()
        assert f"{BOUND:.1f} s" in text, doc


def test_no_doc_or_test_keeps_an_older_handover_number() -> None:
    """17 s (lease + one retry period) and 22 s (that plus a margin) were the numbers before."""
    stale = re.compile(
        r"(?i)(handover|take ?over|takes the lease)[^.|]*\b(17|22(\.4)?) s\b"
        r"|15 s \+ 2 s|\+ 2\.4 \+ 5|RETRY_PERIOD \+ 5\b"
    )
    places = [ROOT / doc for doc in QUOTING] + sorted((ROOT / "tests").rglob("test_*.py"))
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in places
        if path.name != Path(__file__).name
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if stale.search(line)
    ]
    assert found == []
