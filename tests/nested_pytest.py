"""A real pytest session under xdist in a subprocess, as an embedder's run would be: this package's
plugin loads from the environment, TMPDIR points at a directory of the test's own (so the session's
state dir and processes are told apart from any other session's on this machine), and this run's
own xdist and addopts settings do not leak into it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def run_pytest_n2(
    project: Path, tmp: Path, *args: str, env: Mapping[str, str] = {}, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`pytest -n 2 ARGS project` in project with TMPDIR=tmp; stdout and stderr captured."""
    environ = {**os.environ, "TMPDIR": str(tmp), **env}
    environ.pop("PYTEST_XDIST_WORKER", None)
    environ.pop("PYTEST_ADDOPTS", None)
    argv = [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-p", "no:randomly"]
    return subprocess.run(
        [*argv, *args, str(project)],
        cwd=project,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
