"""The chart's alert rules load in a real Prometheus's promtool, and their unit tests pass.

promtool comes from the test bed's build (`python -m valkey_testbed build`);
tests/prometheus/alerts_test.yaml holds, for every alert, series that fire it and
series that must not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from valkey_testbed.build import binaries

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "charts" / "valkey-operator" / "files" / "alerts.yaml"
ALERT_TESTS = ROOT / "tests" / "prometheus" / "alerts_test.yaml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    executable = binaries().promtool
    assert executable.exists(), f"{executable} is missing: run `python -m valkey_testbed build`"
    return subprocess.run(
        [str(executable), *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_alert_rules_are_valid() -> None:
    result = promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_every_alert_fires_and_stays_silent_where_its_unit_tests_say() -> None:
    result = promtool("test", "rules", str(ALERT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
