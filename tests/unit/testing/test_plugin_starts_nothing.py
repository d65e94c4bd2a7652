"""The plugin loads in every pytest run of an environment that has this package (pytest11 entry
point). An embedder's own unit tests under xdist (`pytest -n 2`) must start no control plane: the
xdist controller built and booted one in pytest_configure, used by no test.

A real pytest subprocess runs plain tests with TMPDIR pointing at a fresh directory: a session's
state dir (valkey-operator-testbed-*) is made there, and every control-plane process names it on its
command line (kube-apiserver's certificates, the kubelet's --state-dir). The tests themselves look,
while the session runs, and the outer test looks again after it ends.
"""

from __future__ import annotations

from pathlib import Path

from nested_pytest import run_pytest_n2

from valkey_testbed.plugin import STATE_DIR_PREFIX

PLAIN_TESTS = '''
import os
import tempfile
from pathlib import Path


def processes_naming(text):
    """pid and command line of every process whose command line contains text."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append((proc.name, cmdline))
    return found


def test_nothing_of_the_test_bed_runs_while_the_tests_do():
    tmp = tempfile.gettempdir()
    assert tmp == os.environ["TMPDIR"]
    assert not list(Path(tmp).glob("PREFIX*")), os.listdir(tmp)
    assert not processes_naming(tmp)


def test_plain_one():
    assert 1 + 1 == 2


def test_plain_two():
    assert "a".upper() == "A"
'''


def _processes_naming(text: str) -> list[tuple[str, str]]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append((proc.name, cmdline))
    return found


def test_an_embedders_unit_tests_under_xdist_start_no_control_plane(tmp_path: Path) -> None:
    project, tmp = tmp_path / "project", tmp_path / "tmpdir"
    project.mkdir()
    tmp.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "test_embedder.py").write_text(PLAIN_TESTS.replace("PREFIX", STATE_DIR_PREFIX))
    done = run_pytest_n2(project, tmp, timeout=240)
    output = done.stdout + done.stderr
    assert "test bed: Kubernetes" in output, output  # the plugin was loaded (its session header)
    assert "created: 2/2 workers" in output, output  # and xdist ran the tests
    assert done.returncode == 0 and "3 passed" in output, output
    assert not list(tmp.glob(f"{STATE_DIR_PREFIX}*")), list(tmp.iterdir())
    assert not _processes_naming(str(tmp))
