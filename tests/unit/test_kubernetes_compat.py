"""The chart's kubeVersion and docs/install.md claim exactly the Kubernetes minors whose latest
`python -m valkey_operator.testing compat` run passed (docs/kubernetes-compat.json)."""

from __future__ import annotations

from pathlib import Path

from valkey_operator.testing import compat, kubeversion

ROOT = Path(__file__).resolve().parents[2]


def test_the_record_names_pinned_releases_and_the_default_passed() -> None:
    record = compat.load_record(ROOT / compat.RECORD)
    for minor, entry in record.items():
        assert kubeversion.parse(minor).kubernetes == entry.kubernetes, minor
        assert kubeversion.parse(minor).etcd == entry.etcd, minor
    assert record[kubeversion.default_release().minor].passed


def test_the_chart_claims_exactly_the_minors_that_passed() -> None:
    record = compat.load_record(ROOT / compat.RECORD)
    chart = compat.chart_kube_version((ROOT / compat.CHART_FILE).read_text())
    assert compat.claimed_minors(chart) == set(compat.passed_minors(record))


def test_install_md_shows_the_recorded_table_and_the_charts_claim() -> None:
    record = compat.load_record(ROOT / compat.RECORD)
    text = (ROOT / compat.INSTALL_DOC).read_text()
    assert compat.with_table(text, compat.render_table(record)) == text
    chart = compat.chart_kube_version((ROOT / compat.CHART_FILE).read_text())
    assert f"`{chart}`" in text, f"docs/install.md does not state the chart's kubeVersion {chart}"
