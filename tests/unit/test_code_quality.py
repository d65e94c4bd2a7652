"""ruff and mypy are part of the suite, so CI fails on lint or type errors."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_clean() -> None:
    """ruff and mypy come with the dev extra the README's test command installs: never skipped."""
    lint = run(sys.executable, "-m", "ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    formatting = run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert formatting.returncode == 0, formatting.stdout + formatting.stderr


@pytest.mark.timeout(600)
def test_mypy_clean() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_test_modules_have_unique_basenames() -> None:
    """pytest imports test modules by basename (rootdir-relative prepend mode): two files of one
    name in different folders stop the whole collection."""
    seen: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name in {"conftest.py", "__init__.py"}:
            continue
        assert path.name not in seen, f"{path} and {seen[path.name]} share a module name"
        seen[path.name] = path


def test_the_checkers_cover_the_operator_and_the_test_bed() -> None:
    """The test bed is a distribution of its own (testbed/): mypy's file list names it beside the
    operator's packages, and ruff sorts its imports as first-party (its `src`)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    files = config["tool"]["mypy"]["files"]
    assert {"valkey_operator", "controllers", "testbed/valkey_testbed"} <= set(files), files
    assert "testbed" in config["tool"]["ruff"]["src"]
