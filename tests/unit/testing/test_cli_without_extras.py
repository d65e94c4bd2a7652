"""The test bed's command line as a user has it after `pip install -e . -e testbed` (no testing extra):
every command it has, and every one the docs name, runs, or stops with one line naming the extra.

Each check runs in a fresh interpreter whose import system refuses the testing extra's modules
(pytest, pytest-asyncio, pytest-timeout, xdist, hypothesis), whether or not this virtualenv has
them. The commands come from the parser itself, so a new command is covered without a change here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from valkey_testbed.__main__ import INSTALL_TESTING, TESTING_EXTRA, command_line, subcommands

REPO = Path(__file__).resolve().parents[3]

WITHOUT_EXTRA = f"""
import sys


class WithoutTestingExtra:
    '''Refuses the testing extra's modules as an install without it would.'''

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {sorted(TESTING_EXTRA)!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, WithoutTestingExtra())
try:
    import pytest
except ModuleNotFoundError:
    pass
else:
    raise SystemExit("the testing extra is still importable: this check would prove nothing")
"""

RUN_MODULE = (
    WITHOUT_EXTRA
    + """
import runpy

module = sys.argv[1]
sys.argv = [module, *sys.argv[2:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""
)

LOAD_EVERY_COMMAND = (
    WITHOUT_EXTRA
    + """
import argparse
import json

from valkey_testbed.__main__ import MissingExtra, command_line, load, subcommands

results = {}
for name, sub in subcommands(command_line()).items():
    args = argparse.Namespace(
        command=name, implementation=sub.get_default("implementation"), needs=sub.get_default("needs")
    )
    try:
        load(args)
    except MissingExtra as exc:
        results[name] = str(exc)
    else:
        results[name] = "ok"
print(json.dumps(results))
"""
)

NEEDS_THE_EXTRA = {"fuzz": "hypothesis", "compat": "pytest", "realnodes": "pytest"}
"""The commands that cannot run without the testing extra, and the module they name."""

COMMANDS = sorted(subcommands(command_line()))


def _without_extra(script: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *argv], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def _documented() -> tuple[set[str], set[str]]:
    """(subcommands, modules) the README and docs/ tell users to run with `python -m`."""
    text = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    commands = set(re.findall(r"python -m valkey_testbed ([a-z][a-z-]*)", text))
    modules = set(re.findall(r"python -m (valkey_testbed\.[a-z_.]*[a-z_])", text))
    return commands, modules


def test_every_documented_command_is_a_command_of_the_parser() -> None:
    commands, modules = _documented()
    assert {"chaos", "demo", "up", "down", "env", "build", "compat", "fuzz"} <= commands, commands
    assert commands <= set(COMMANDS), commands - set(COMMANDS)
    assert modules, "the docs name no test-bed module to run: the regular expression is stale"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_every_command_without_the_extra(command: str) -> None:
    done = _without_extra(RUN_MODULE, "valkey_testbed", command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m valkey_testbed {command}"), done.stdout


@pytest.mark.parametrize("module", sorted(_documented()[1]))
def test_help_of_every_documented_module_without_the_extra(module: str) -> None:
    done = _without_extra(RUN_MODULE, module, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout


def test_every_command_loads_without_the_extra_or_names_it_in_one_line() -> None:
    """What each command imports when it runs (not only its --help): chaos imported the pytest
    plugin for two constants and died with ModuleNotFoundError: No module named 'pytest'."""
    done = _without_extra(LOAD_EVERY_COMMAND)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    assert sorted(results) == COMMANDS
    for command, result in results.items():
        if command not in NEEDS_THE_EXTRA:
            assert result == "ok", f"{command}: {result}"
            continue
        assert result == (
            f"error: `python -m valkey_testbed {command}` needs the testing extra "
            f"(no module named {NEEDS_THE_EXTRA[command]!r}): {INSTALL_TESTING}"
        ), result


def test_a_command_that_needs_the_extra_stops_with_one_line_and_starts_nothing(tmp_path: Path) -> None:
    state_dir = tmp_path / "bed"
    argv = ["fuzz", "--seed", "1", "--examples", "1", "--state-dir", str(state_dir)]
    done = _without_extra(RUN_MODULE, "valkey_testbed", *argv)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "needs the testing extra" in done.stderr, done.stderr
    assert not state_dir.exists()
