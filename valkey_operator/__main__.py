"""The operator process: `python -m valkey_operator` (console script `valkey-operator`)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from valkey_operator import operator, settings
from valkey_operator.validation import InvalidValue, fail


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 2 with one line on stderr for any invalid flag, before anything starts."""
    try:
        parsed = settings.parse(argv)
    except (InvalidValue, settings.UsageError) as exc:
        fail(str(exc))
        return 2
    return asyncio.run(operator.run(parsed))


if __name__ == "__main__":
    sys.exit(main())
