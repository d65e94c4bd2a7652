"""The kubelet log endpoint's tailLines: the last N lines, as a kubelet returns them."""

from __future__ import annotations

from valkey_testbed.kubelet.logserver import tail


def test_tail_keeps_the_last_lines_with_their_newlines() -> None:
    assert tail(b"a\nb\nc\n", 2) == b"b\nc\n"
    assert tail(b"a\nb\nc", 1) == b"c"
    assert tail(b"a\n", 5) == b"a\n"
    assert tail(b"a\nb\n", 0) == b""
