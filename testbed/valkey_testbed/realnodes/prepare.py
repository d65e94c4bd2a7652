"""Build the real nodes' binaries and write their images (`build --nodes-runtime containerd`), so a
test bed of real nodes starts in seconds: the cold builds take minutes, more than a test's timeout."""

from __future__ import annotations

from valkey_testbed.build import BuildError
from valkey_testbed.realnodes import build, images


def main() -> int:
    def progress(line: str) -> None:
        print(line, flush=True)

    try:
        images.archives(build.build(progress), progress)
    except BuildError as exc:
        print(exc)
        return 1
    return 0
