"""ruff and mypy are part of the suite, so CI fails on lint or type errors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff (dev extra) is not installed")
def test_ruff_clean() -> None:
    lint = run("ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    formatting = run("ruff", "format", "--check", ".")
    assert formatting.returncode == 0, formatting.stdout + formatting.stderr


@pytest.mark.timeout(600)
def test_mypy_clean() -> None:
    pytest.importorskip("mypy", reason="mypy (dev extra) is not installed")
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
