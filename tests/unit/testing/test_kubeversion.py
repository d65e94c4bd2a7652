"""The test bed's Kubernetes release parameter: parsing, cache paths, version stamps, staging
replacements, and the chart kubeVersion and docs table the compat command writes."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from valkey_testbed import build, compat, kubeversion, versions
from valkey_testbed.kubeversion import KubeRelease, UnknownKubernetesVersion


def test_a_minor_means_its_pinned_release_and_etcd() -> None:
    for minor, (kubernetes, etcd) in versions.KUBERNETES_MINORS.items():
        for spelling in (minor, "v" + minor):
            assert kubeversion.parse(spelling) == KubeRelease(kubernetes, etcd)


def test_a_full_version_is_taken_as_written_with_its_minors_etcd() -> None:
    etcd = versions.KUBERNETES_MINORS["1.36"][1]
    assert kubeversion.parse("1.36.1") == KubeRelease("v1.36.1", etcd)
    assert kubeversion.parse(" v1.36.1 ") == KubeRelease("v1.36.1", etcd)


@pytest.mark.parametrize("spec", ["1.33", "v1.33.13", "1.38"])
def test_a_minor_not_pinned_is_refused_naming_those_that_are(spec: str) -> None:
    with pytest.raises(UnknownKubernetesVersion, match=r"1\.34, 1\.35, 1\.36, 1\.37"):
        kubeversion.parse(spec)


@pytest.mark.parametrize("spec", ["", "latest", "1", "2.0", "v1.36.3.1", "1.36-rc"])
def test_what_is_not_a_version_is_refused(spec: str) -> None:
    with pytest.raises(UnknownKubernetesVersion, match="not a Kubernetes version"):
        kubeversion.parse(spec)


def test_the_variable_selects_and_its_absence_means_the_default() -> None:
    assert kubeversion.selected({}) == kubeversion.default_release()
    assert kubeversion.selected({kubeversion.ENV: ""}) == kubeversion.default_release()
    assert kubeversion.selected({kubeversion.ENV: "1.36"}).kubernetes == "v1.36.3"
    assert kubeversion.default_release() == KubeRelease(versions.KUBERNETES, versions.ETCD)
    assert kubeversion.default_release().is_default and not kubeversion.parse("1.36").is_default


def test_the_default_is_one_of_the_pinned_minors_and_releases_run_oldest_first() -> None:
    assert kubeversion.parse(kubeversion.default_release().minor) == kubeversion.default_release()
    assert [release.minor for release in kubeversion.releases()] == ["1.34", "1.35", "1.36", "1.37"]


def test_staging_modules_publish_as_v0_of_the_same_release() -> None:
    release = KubeRelease("v1.36.3", "v3.6.16")
    assert (release.major, release.minor_number, release.minor, release.staging) == (1, 36, "1.36", "v0.36.3")
    gomod = (
        "module k8s.io/kubernetes\n\nreplace (\n"
        "\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n"
        "\tgithub.com/other/thing => github.com/fork/thing v1.0.0\n)\n"
    )
    assert build.staging_replacements(release, gomod) == [
        "\tk8s.io/api => k8s.io/api v0.36.3",
        "\tk8s.io/client-go => k8s.io/client-go v0.36.3",
    ]
    with pytest.raises(build.BuildError, match=r"v1\.36\.3"):
        build.staging_replacements(release, "module k8s.io/kubernetes\n")


def test_each_release_is_stamped_with_its_own_version() -> None:
    flags = build.version_ldflags(KubeRelease("v1.35.4", "v3.6.16"))
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.35.4" in flags
        assert f"-X {pkg}.gitMajor=1 " in flags
        assert f"-X {pkg}.gitMinor=35 " in flags
    assert "1.37" not in flags


def test_each_release_has_its_own_cache_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VALKEY_OPERATOR_CACHE", str(tmp_path))
    monkeypatch.delenv(kubeversion.ENV, raising=False)
    default = build.binaries()
    assert default.bin_dir == tmp_path / "k8s" / versions.KUBERNETES / "bin"
    assert (
        build.binaries(kubeversion.parse("1.36")).kubectl == tmp_path / "k8s" / "v1.36.3" / "bin" / "kubectl"
    )
    monkeypatch.setenv(kubeversion.ENV, "1.35")
    assert build.binaries().bin_dir == tmp_path / "k8s" / "v1.35.4" / "bin"


def test_the_charts_kube_version_is_the_oldest_passed_minor_with_no_upper_bound() -> None:
    assert compat.kube_version_floor(["1.37"]) == ">=1.37.0-0"
    assert compat.kube_version_floor(["1.36", "1.34", "1.35", "1.37"]) == ">=1.34.0-0"
    assert compat.floor_minor(">=1.34.0-0") == "1.34"
    assert compat.admits(">=1.34.0-0", "1.40") and compat.admits(">=1.34.0-0", "1.34")
    assert not compat.admits(">=1.34.0-0", "1.33")
    with pytest.raises(ValueError):
        compat.kube_version_floor([])
    with pytest.raises(ValueError):
        compat.floor_minor(">=1.34.0-0 <1.38.0-0")


def test_only_the_kube_version_line_of_chart_yaml_changes() -> None:
    text = 'name: x\n# a comment about kubeVersion: "no"\nkubeVersion: ">=1.37.0-0"\nkeywords: [a]\n'
    assert compat.chart_kube_version(text) == ">=1.37.0-0"
    changed = compat.with_kube_version(text, ">=1.36.0-0")
    assert changed == text.replace('kubeVersion: ">=1.37.0-0', 'kubeVersion: ">=1.36.0-0')
    with pytest.raises(ValueError):
        compat.with_kube_version("name: x\n", ">=1.36.0-0 <1.38.0-0")


def test_publish_merges_the_record_and_rewrites_chart_and_table(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "charts" / "valkey-operator").mkdir(parents=True)
    chart = tmp_path / compat.CHART_FILE
    chart.write_text('name: valkey-operator\nkubeVersion: ">=1.37.0-0"\nversion: 0.2.0\n')
    doc = tmp_path / compat.INSTALL_DOC
    doc.write_text(f"# Install\n\nbefore\n\n{compat.TABLE_BEGIN}\nold table\n{compat.TABLE_END}\n\nafter\n")
    day = datetime.date(2026, 12, 2).isoformat()
    first = compat.Outcome("1.37", "v1.37.2", "v3.7.3", compat.PASSED, 1, 300, day)
    compat.publish(tmp_path, {"1.37": first})
    second = compat.Outcome("1.36", "v1.36.3", "v3.6.16", compat.PASSED, 1200, 310, day)
    failed = compat.Outcome("1.35", "v1.35.4", "v3.6.16", "failed (pytest exit 1)", 1100, 200, day)
    compat.publish(tmp_path, {"1.36": second, "1.35": failed})

    record = compat.load_record(tmp_path / compat.RECORD)
    assert list(record) == ["1.35", "1.36", "1.37"] and record["1.37"] == first
    assert compat.chart_kube_version(chart.read_text()) == ">=1.36.0-0"
    assert chart.read_text().startswith("name: valkey-operator\n") and chart.read_text().endswith(
        "version: 0.2.0\n"
    )
    text = doc.read_text()
    assert "old table" not in text and text.startswith("# Install\n\nbefore\n") and text.endswith("after\n")
    assert "| 1.36 | v1.36.3 | v3.6.16 | passed | 2026-12-02 | 310 s |" in text
    assert "| 1.35 | v1.35.4 | v3.6.16 | failed (pytest exit 1) | 2026-12-02 | 200 s |" in text
