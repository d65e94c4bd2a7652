"""The operator process: `python -m valkey_operator` (console script `valkey-operator`)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from valkey_operator import operator, settings


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(operator.run(settings.parse(argv)))


if __name__ == "__main__":
    sys.exit(main())
