"""Under xdist the plugin starts the control plane only when a test uses it
(tests/unit/testing/test_plugin_starts_nothing.py): here tests on both workers use `kube_api`, and
get one plane, started by whichever worker came first, attached to by the other, and stopped by the
controller at the end of the session.

A real pytest subprocess with TMPDIR on a fresh directory, so its state dir and processes are told
apart from any other session's on this machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nested_pytest import run_pytest_n2

from valkey_testbed.plugin import STATE_DIR_PREFIX

pytestmark = pytest.mark.integration

USES_THE_API = """
import json
import os
from pathlib import Path

from kubernetes_asyncio import client


async def test_the_api_answers_NAME(kube_api, kube_control_plane):
    version = await client.VersionApi(kube_api).get_code()
    report = {
        "worker": os.environ["PYTEST_XDIST_WORKER"],
        "state_dir": str(kube_control_plane.state_dir),
        "pids": [record.pid for record in kube_control_plane.records()],
        "version": version.git_version,
    }
    Path(os.environ["REPORTS"], "NAME.json").write_text(json.dumps(report))
"""

INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_tests_on_two_workers_that_use_kube_api_share_one_plane_stopped_at_the_end(tmp_path: Path) -> None:
    project, tmp, reports = tmp_path / "project", tmp_path / "tmpdir", tmp_path / "reports"
    for directory in (project, tmp, reports):
        directory.mkdir()
    (project / "pytest.ini").write_text(INI)
    for name in ("one", "two"):  # --dist loadfile: one module per worker
        (project / f"test_{name}.py").write_text(USES_THE_API.replace("NAME", name))
    done = run_pytest_n2(
        project, tmp, "--dist", "loadfile", "--testbed-nodes", "0", env={"REPORTS": str(reports)}, timeout=270
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "2 passed" in output, output
    found = [json.loads(path.read_text()) for path in sorted(reports.glob("*.json"))]
    assert sorted(report["worker"] for report in found) == ["gw0", "gw1"], found
    state_dirs = {report["state_dir"] for report in found}
    assert len(state_dirs) == 1, found  # one plane for both workers
    state_dir = Path(state_dirs.pop())
    assert state_dir.parent == tmp.resolve() and state_dir.name.startswith(STATE_DIR_PREFIX), state_dir
    assert found[0]["pids"] and found[0]["pids"] == found[1]["pids"], found
    assert found[0]["version"].startswith("v1."), found
    assert not state_dir.exists()  # the controller stopped it and removed its dir
    assert not [pid for pid in found[0]["pids"] if _alive(pid)], found
