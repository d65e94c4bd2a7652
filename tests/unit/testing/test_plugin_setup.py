"""The pytest plugin as an embedder installs it: without pytest-asyncio it still loads (pytest keeps
working for everything else) and its async fixtures say what to install; a bed with fewer nodes than
asked is named at once (tests/integration/testbed/test_plugin_nodes.py, on a real bed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN_WITHOUT_PYTEST_ASYNCIO = """
import sys

sys.path.insert(0, sys.argv[2])  # a pytest_asyncio that is not there: the testing extra is missing
import pytest

import valkey_testbed.plugin as plugin


def no_control_plane(*args):
    raise AssertionError("a control plane was asked for")


plugin._start_plane = no_control_plane
sys.exit(pytest.main(["-p", "no:asyncio", "-p", "no:cacheprovider", "-q", sys.argv[1]]))
"""

TESTS = """
def test_plain():
    assert True


def test_wants_a_namespace(namespace):
    pass
"""


def test_without_pytest_asyncio_the_plugin_loads_and_its_fixtures_say_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_embedder.py").write_text(TESTS)
    shadow = tmp_path / "shadow" / "pytest_asyncio"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pytest_asyncio'\", name='pytest_asyncio')\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN_WITHOUT_PYTEST_ASYNCIO,
            str(tmp_path / "test_embedder.py"),
            str(shadow.parent),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = done.stdout + done.stderr
    assert "1 passed" in output and "1 error" in output, output
    assert "pip install -e 'testbed[testing]'" in output and 'asyncio_mode = "auto"' in output, output
    assert "a control plane was asked for" not in output, output
