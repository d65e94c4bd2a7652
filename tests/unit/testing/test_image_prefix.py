"""The test bed refuses an image prefix its images' non-root users cannot reach (a cold CI put it
under a 0700 temporary directory: a pod's exec probe never ran, and nothing said why)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from valkey_testbed import images


def test_a_prefix_under_a_closed_directory_is_refused_by_name() -> None:
    top = Path(tempfile.mkdtemp(dir="/tmp"))  # /tmp lets everyone through; pytest's own root does not
    try:
        top.chmod(0o755)
        closed = top / "closed"
        prefix = closed / "images"
        prefix.mkdir(parents=True)
        closed.chmod(0o700)
        with pytest.raises(images.ImageError, match=f"reach: {closed} let no other user through"):
            images.check_reachable(prefix)
        closed.chmod(0o711)
        images.check_reachable(prefix)
    finally:
        shutil.rmtree(top)
