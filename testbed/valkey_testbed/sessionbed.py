"""The test session's bed: its kubelet's nodes and timings.

Shared by the pytest plugin (plugin.py) and `python -m valkey_testbed chaos`, which runs
the same bed without pytest installed: so this module imports nothing from pytest.
"""

from __future__ import annotations

# Three zoned nodes, and timings shortened for tests.
NODES = 3
SYNC_DELAY = 2.0
BACKOFF_BASE = 1.0
BACKOFF_MAX = 10.0
KUBELET_ARGS = (
    f"--sync-delay={SYNC_DELAY}",
    f"--backoff-base={BACKOFF_BASE}",
    f"--backoff-max={BACKOFF_MAX}",
)
