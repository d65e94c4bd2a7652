"""Failpoints: named places where a test can make the operator process die at once.

`VALKEY_OPERATOR_FAILPOINTS` holds comma-separated names such as
`after:MigrateSlots`; the first time the operator reaches one it logs the name
and exits with status 137 (as if SIGKILLed), without cleanup, lease release or
status writes. Tests use it to prove that a restarted operator finishes any
step it was killed in (SPEC 5: progress is read from the world, not memory).
Unset (the default), `hit` is one set lookup.
"""

from __future__ import annotations

import os
import sys

ENV = "VALKEY_OPERATOR_FAILPOINTS"
EXIT_STATUS = 137

_armed = frozenset(name.strip() for name in os.environ.get(ENV, "").split(",") if name.strip())


def armed() -> frozenset[str]:
    return _armed


def hit(name: str) -> None:
    """Die here when the failpoint `name` is armed."""
    if name in _armed:
        sys.stderr.write(f"failpoint {name}: exiting\n")
        sys.stderr.flush()
        os._exit(EXIT_STATUS)
