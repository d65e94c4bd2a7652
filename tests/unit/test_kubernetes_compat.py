"""The chart's kubeVersion is the oldest Kubernetes minor whose latest `python -m
valkey_testbed compat` run passed, with no upper bound, and docs/install.md shows every
minor tested (docs/kubernetes-compat.json)."""

from __future__ import annotations

from pathlib import Path

from valkey_testbed import compat, kubeversion

ROOT = Path(__file__).resolve().parents[2]


def test_the_record_names_pinned_releases_and_the_default_passed() -> None:
    record = compat.load_record(ROOT / compat.RECORD)
    for minor, entry in record.items():
        assert kubeversion.parse(minor).kubernetes == entry.kubernetes, minor
        assert kubeversion.parse(minor).etcd == entry.etcd, minor
    assert record[kubeversion.default_release().minor].passed


def test_the_chart_admits_the_oldest_minor_that_passed_and_every_newer_one() -> None:
    record = compat.load_record(ROOT / compat.RECORD)
    chart = compat.chart_kube_version((ROOT / compat.CHART_FILE).read_text())
    assert chart == compat.kube_version_floor(compat.passed_minors(record))
    assert "<" not in chart, "an upper bound fails every helm upgrade once the cluster moves past it"


def test_install_md_shows_the_recorded_table_and_the_charts_claim() -> None:
    record = compat.load_record(ROOT / compat.RECORD)
    text = (ROOT / compat.INSTALL_DOC).read_text()
    assert compat.with_table(text, compat.render_table(record)) == text
    chart = compat.chart_kube_version((ROOT / compat.CHART_FILE).read_text())
    assert f"`{chart}`" in text, f"docs/install.md does not state the chart's kubeVersion {chart}"
