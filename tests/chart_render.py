"""The chart as `helm template` renders it, for the tests that read or apply what it renders."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from valkey_testbed.build import binaries
from valkey_testbed.versions import KUBERNETES

CHART = Path(__file__).resolve().parents[1] / "charts" / "valkey-operator"


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The test bed's helm binary, offline (template, lint, package)."""
    done = subprocess.run([str(binaries().helm), *args], capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def render(
    *values: str, chart: Path = CHART, namespace: str = "ops", only: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The documents of release `vo` in namespace for the test bed's Kubernetes version; only names
    templates (`rbac.yaml`) to render alone."""
    shown = [arg for template in only for arg in ("--show-only", f"templates/{template}")]
    text = helm(
        "template", "vo", str(chart), "-n", namespace, "--kube-version", KUBERNETES, *values, *shown
    ).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]
