"""`python -m valkey_testbed compat`: the chart's scenario on each Kubernetes minor.

For each minor of versions.KUBERNETES_MINORS (or those asked for), oldest first: build its control
plane (cached), then run tests/e2e/test_compat_scenario.py through pytest against it (helm install
of the chart in both RBAC modes, a 2x1 TLS cluster Active, a scale, a spread move, a rolling update,
a certificate rotation, delete, helm uninstall). Each result goes into docs/kubernetes-compat.json
(one entry per minor, the latest run's), and from there into the table in docs/install.md and the
chart's kubeVersion: the oldest minor that passed, with no upper bound
(tests/unit/test_kubernetes_compat.py keeps them equal). Needs a checkout: the scenario is one of its tests.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

from valkey_testbed import kubeversion
from valkey_testbed.build import BuildError, build
from valkey_testbed.kubeversion import KubeRelease

REPO = Path(__file__).resolve().parents[2]
SCENARIO = Path("tests/e2e/test_compat_scenario.py")
RECORD = Path("docs/kubernetes-compat.json")
CHART_FILE = Path("charts/valkey-operator/Chart.yaml")
INSTALL_DOC = Path("docs/install.md")
TABLE_BEGIN = "<!-- kubernetes-compat table: written by `python -m valkey_testbed compat` -->"
TABLE_END = "<!-- end of kubernetes-compat table -->"
CANDIDATE = "VALKEY_OPERATOR_COMPAT_CANDIDATE"
"""Set by `compat` for the scenario: when the chart's kubeVersion does not claim the server's minor
yet, install a copy that does (the run decides whether the claim is earned). Unset (CI), the chart
is installed as it is, so a chart that does not claim the default minor fails."""
PASSED = "passed"

_FLOOR = re.compile(r"^>=\s*(\d+)\.(\d+)\.0-0$")
_KUBE_VERSION_LINE = re.compile(r'^kubeVersion:\s*"[^"\n]*"\s*$', re.MULTILINE)

Progress = Callable[[str], None]


@attrs.frozen
class Outcome:
    """One minor's latest compat run."""

    minor: str
    kubernetes: str
    etcd: str
    result: str
    build_seconds: int
    scenario_seconds: int
    date: str

    @property
    def passed(self) -> bool:
        return self.result == PASSED


def _minor_key(minor: str) -> tuple[int, int]:
    major, number = minor.split(".")
    return int(major), int(number)


# -- the chart's kubeVersion -------------------------------------------------------------------


def kube_version_floor(minors: Iterable[str]) -> str:
    """The chart's kubeVersion: the oldest minor that passed, and no upper bound (`>=1.34.0-0`; `-0`
    admits providers' pre-release-tagged builds). An upper bound would fail every `helm upgrade` and
    GitOps sync of a release the day its cluster moves to a newer minor; which minors were tested is
    the table's to say, not the constraint's."""
    ordered = sorted(set(minors), key=_minor_key)
    if not ordered:
        raise ValueError("no minor passed: the chart cannot claim any Kubernetes version")
    major, number = _minor_key(ordered[0])
    return f">={major}.{number}.0-0"


def floor_minor(constraint: str) -> str:
    """The oldest minor a kubeVersion written by kube_version_floor admits."""
    match = _FLOOR.match(constraint.strip())
    if match is None:
        raise ValueError(f"kubeVersion {constraint!r} is not of the form '>=1.A.0-0'")
    return f"{match.group(1)}.{match.group(2)}"


def admits(constraint: str, minor: str) -> bool:
    return _minor_key(minor) >= _minor_key(floor_minor(constraint))


def chart_kube_version(chart_yaml: str) -> str:
    match = _KUBE_VERSION_LINE.search(chart_yaml)
    if match is None:
        raise ValueError('Chart.yaml has no kubeVersion line of the form kubeVersion: "..."')
    return match.group(0).split(":", 1)[1].strip().strip('"')


def with_kube_version(chart_yaml: str, constraint: str) -> str:
    """Chart.yaml text with only its kubeVersion line replaced."""
    if _KUBE_VERSION_LINE.search(chart_yaml) is None:
        raise ValueError('Chart.yaml has no kubeVersion line of the form kubeVersion: "..."')
    return _KUBE_VERSION_LINE.sub(f'kubeVersion: "{constraint}"', chart_yaml, count=1)


# -- the record and the table ------------------------------------------------------------------


def load_record(path: Path) -> dict[str, Outcome]:
    if not path.exists():
        return {}
    entries = json.loads(path.read_text())
    return {entry["minor"]: Outcome(**entry) for entry in entries}


def save_record(path: Path, record: dict[str, Outcome]) -> None:
    entries = [attrs.asdict(record[minor]) for minor in sorted(record, key=_minor_key)]
    path.write_text(json.dumps(entries, indent=2) + "\n")


def render_table(record: dict[str, Outcome]) -> str:
    """The Markdown table docs/install.md shows between TABLE_BEGIN and TABLE_END."""
    lines = [
        "| Kubernetes | release tested | etcd | result | date | scenario run |",
        "|---|---|---|---|---|---|",
    ]
    for minor in sorted(record, key=_minor_key):
        entry = record[minor]
        lines.append(
            f"| {minor} | {entry.kubernetes} | {entry.etcd} | {entry.result} | {entry.date} "
            f"| {entry.scenario_seconds} s |"
        )
    return "\n".join(lines)


def with_table(document: str, table: str) -> str:
    """document with the text between TABLE_BEGIN and TABLE_END replaced by table."""
    begin, end = document.find(TABLE_BEGIN), document.find(TABLE_END)
    if begin < 0 or end < begin:
        raise ValueError(f"no {TABLE_BEGIN!r} ... {TABLE_END!r} markers")
    return document[: begin + len(TABLE_BEGIN)] + "\n" + table + "\n" + document[end:]


def passed_minors(record: dict[str, Outcome]) -> list[str]:
    return sorted((minor for minor, entry in record.items() if entry.passed), key=_minor_key)


# -- running -----------------------------------------------------------------------------------


def run_scenario(release: KubeRelease, repo: Path, extra_args: Sequence[str] = ()) -> int:
    """pytest on the scenario against release's control plane (a fresh one); its exit status."""
    env = dict(os.environ)
    env[kubeversion.ENV] = release.kubernetes
    env[CANDIDATE] = "1"
    # -s: the scenario prints each step's time as it goes.
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-n",
        "0",
        "-s",
        "-p",
        "no:cacheprovider",
        str(SCENARIO),
        *extra_args,
    ]
    return subprocess.run(argv, cwd=repo, env=env, check=False).returncode


def run_compat(
    releases: Sequence[KubeRelease],
    repo: Path = REPO,
    progress: Progress = print,
    today: datetime.date | None = None,
) -> list[Outcome]:
    """Build and run the scenario for each release; record, print and publish the results."""
    if not (repo / SCENARIO).exists():
        raise FileNotFoundError(f"{repo / SCENARIO} is missing: run `compat` from a checkout of the project")
    date = (today or datetime.date.today()).isoformat()
    outcomes = []
    for release in releases:
        progress(f"== Kubernetes {release.minor}: {release.kubernetes}, etcd {release.etcd}")
        started = time.monotonic()
        try:
            build(progress, release)
        except BuildError as exc:
            progress(str(exc))
            result, built, ran = "build failed", time.monotonic() - started, 0.0
        else:
            built = time.monotonic() - started
            progress(f"== {release.kubernetes} built (or cached) in {built:.0f}s; running {SCENARIO}")
            started = time.monotonic()
            status = run_scenario(release, repo)
            ran = time.monotonic() - started
            result = PASSED if status == 0 else f"failed (pytest exit {status})"
        outcome = Outcome(
            release.minor, release.kubernetes, release.etcd, result, round(built), round(ran), date
        )
        progress(f"== Kubernetes {release.minor}: {result} (build {built:.0f}s, scenario {ran:.0f}s)")
        outcomes.append(outcome)
        publish(repo, {outcome.minor: outcome})  # after each minor: a later failure keeps this one
    record = load_record(repo / RECORD)
    progress(render_table({o.minor: record[o.minor] for o in outcomes}))
    return outcomes


def publish(repo: Path, outcomes: dict[str, Outcome]) -> None:
    """Merge outcomes into the record, then write the chart's kubeVersion line and the docs' table
    from the whole record."""
    record = {**load_record(repo / RECORD), **outcomes}
    save_record(repo / RECORD, record)
    passed = passed_minors(record)
    if passed:
        chart = repo / CHART_FILE
        chart.write_text(with_kube_version(chart.read_text(), kube_version_floor(passed)))
    doc = repo / INSTALL_DOC
    text = doc.read_text()
    if TABLE_BEGIN in text:
        doc.write_text(with_table(text, render_table(record)))


def main(minors: str | None) -> int:
    try:
        releases = (
            [kubeversion.parse(minor) for minor in minors.split(",")] if minors else kubeversion.releases()
        )
        outcomes = run_compat(releases, progress=lambda line: print(line, flush=True))
    except (kubeversion.UnknownKubernetesVersion, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if all(outcome.passed for outcome in outcomes) else 1
