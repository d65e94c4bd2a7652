"""The operator process: `python -m valkey_operator` (console script `valkey-operator`).

`valkey-operator selftest ...` runs the chart's `helm test` check instead (valkey_operator.selftest);
`valkey-operator restore-fetch ...` a restoring pod's init container (valkey_operator.restore_fetch);
`valkey-operator archive ...` a Valkey pod's archiver (valkey_operator.archiver.command).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

SELFTEST, RESTORE_FETCH, ARCHIVE = "selftest", "restore-fetch", "archive"


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 2 with one line on stderr for any invalid flag, before anything starts.

    Each command imports only its own module: restore-fetch starts in every restoring pod, and
    the operator's imports (its controllers, the API client) would add most of a second there."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == [SELFTEST]:
        from valkey_operator import selftest

        return selftest.main(args[1:])
    if args[:1] == [RESTORE_FETCH]:
        from valkey_operator import restore_fetch

        return restore_fetch.main(args[1:])
    if args[:1] == [ARCHIVE]:
        from valkey_operator.archiver import command

        return command.main(args[1:])
    import asyncio

    from valkey_operator import operator, settings
    from valkey_operator.validation import InvalidValue, fail

    try:
        parsed = settings.parse(args)
    except (InvalidValue, settings.UsageError) as exc:
        fail(str(exc))
        return 2
    return asyncio.run(operator.run(parsed))


if __name__ == "__main__":
    sys.exit(main())
