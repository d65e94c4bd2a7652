"""The console script's commands: one name each, and restore-fetch starting without the operator."""

from __future__ import annotations

import subprocess
import sys

from controllers.cluster.render import restore as render_restore
from valkey_operator import __main__ as entry
from valkey_operator import restore_fetch, selftest


def test_command_names_agree_with_their_modules_and_the_rendered_init_container() -> None:
    assert entry.RESTORE_FETCH == restore_fetch.COMMAND == render_restore.COMMAND
    assert entry.SELFTEST == selftest.COMMAND


def test_restore_fetch_imports_neither_the_operator_nor_an_s3_library() -> None:
    """Every restoring pod starts it: the operator's imports, or botocore's, cost about a second of
    CPU there (bench/restore_fetch.py)."""
    probe = (
        "import sys\n"
        "from valkey_operator.__main__ import main\n"
        "try:\n"
        "    main(['restore-fetch', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'controllers'"
        " or m.startswith(('valkey_operator.core', 'valkey_operator.operator', 'kubernetes_asyncio',"
        " 'botocore', 'aiobotocore', 'aiohttp')))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "usage: valkey-operator restore-fetch" in done.stdout
    assert "HEAVY []" in done.stderr, done.stderr
