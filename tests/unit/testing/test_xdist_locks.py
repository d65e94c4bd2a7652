"""The test bed's xdist locks: which tests may run together (flock locks, so no server is needed)."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from valkey_operator.testing.plugin import _group_lock, _module_lock


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
