"""The test bed's xdist locks: which tests may run together (flock locks, so no server is needed)."""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path

import pytest

from valkey_testbed import plugin
from valkey_testbed.plugin import _group_lock, _module_lock


def free(path: Path, mode: int) -> bool:
    """Whether a new open file description could take the flock now (flock is per description)."""
    with path.open("a") as probe:
        try:
            fcntl.flock(probe, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(probe, fcntl.LOCK_UN)
        return True


def test_a_serial_group_admits_one_holder_and_leaves_other_groups_and_readers_alone(tmp_path: Path) -> None:
    with _group_lock(tmp_path, "helm"), _module_lock(tmp_path, exclusive=False):
        assert not free(tmp_path / ".xdist-serial-helm", fcntl.LOCK_EX)  # a second release waits
        assert free(tmp_path / ".xdist-serial-other", fcntl.LOCK_EX)
        assert free(tmp_path / ".xdist-rw", fcntl.LOCK_SH)  # an ordinary module runs beside it
        assert not free(tmp_path / ".xdist-rw", fcntl.LOCK_EX)  # an exclusive one waits
    assert free(tmp_path / ".xdist-serial-helm", fcntl.LOCK_EX)
    assert free(tmp_path / ".xdist-rw", fcntl.LOCK_EX)


@pytest.mark.parametrize("exclusive", [True, False])
def test_an_exclusive_module_keeps_every_other_module_out(tmp_path: Path, exclusive: bool) -> None:
    with _module_lock(tmp_path, exclusive=exclusive):
        assert free(tmp_path / ".xdist-rw", fcntl.LOCK_SH) is not exclusive


class Item:
    """What the plugin's pytest_runtest_protocol reads of a test: its config (an xdist worker's, the
    shared plane already up), module path, fixtures and marks."""

    def __init__(self, config: object, module: str, *, uses_plane: bool) -> None:
        self.config, self.path = config, Path(module)
        self.fixturenames = ["kube_control_plane"] if uses_plane else []

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == plugin.EXCLUSIVE else None


def worker_config(state_dir: Path) -> object:
    config = type("Config", (), {})()
    config.workerinput = {plugin.WORKER_STATE_DIR: str(state_dir), plugin.WORKER_SESSION: "session"}  # type: ignore[attr-defined]
    config.stash = pytest.Stash()  # type: ignore[attr-defined]
    config.stash[plugin._SHARED_START] = None  # type: ignore[attr-defined]
    return config


def run(item: Item, nextitem: Item | None) -> None:
    protocol = plugin.pytest_runtest_protocol(item, nextitem)  # type: ignore[arg-type]
    next(protocol)
    with contextlib.suppress(StopIteration):
        next(protocol)


def test_an_exclusive_modules_lock_ends_with_its_last_test_even_one_without_the_plane(tmp_path: Path) -> None:
    """The last test of a worker, in an exclusive module, used no fixture of the plane (a pure
    schema check): the worker, out of tests, kept the exclusive lock, and a test on the other worker
    waited for it while the controller waited for that test: the session hung."""
    config = worker_config(tmp_path)
    first, pure, last = (Item(config, "test_m.py", uses_plane=plane) for plane in (True, False, True))
    run(first, pure)
    assert not free(tmp_path / ".xdist-rw", fcntl.LOCK_SH)  # the module holds it from test to test
    run(pure, last)
    assert not free(tmp_path / ".xdist-rw", fcntl.LOCK_SH)  # a test without the plane in between
    run(last, pure)
    run(pure, None)
    assert free(tmp_path / ".xdist-rw", fcntl.LOCK_EX)
