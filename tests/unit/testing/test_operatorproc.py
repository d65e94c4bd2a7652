"""Running the operator from another checkout (benchmarks' --before / --operator-checkout)."""

from __future__ import annotations

from pathlib import Path

from valkey_testbed.operatorproc import from_checkout


def test_this_checkout_runs_as_it_is() -> None:
    assert from_checkout(None) == (None, None)


def test_another_checkout_comes_first_on_the_path_and_runs_in_its_own_directory() -> None:
    """`python -m` puts its working directory first on sys.path: started from this checkout's root,
    this checkout's modules would win over PYTHONPATH, so the child runs in the other one."""
    other = Path("/src/earlier")
    env, cwd = from_checkout(other)
    assert env is not None and env["PYTHONPATH"] == "/src/earlier"
    assert "PATH" in env  # the rest of the environment is kept
    assert cwd == other
