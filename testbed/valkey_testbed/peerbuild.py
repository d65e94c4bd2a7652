"""Build the official operator (the comparisons' peer) from a git repository of its source.

The Go module proxy refuses `github.com/valkey-io/valkey-operator` (403 "This
module version is not available", every version, 2026-12-04), so its manager
is built from a clone of its repository instead: `git archive` of the ref into
a cache outside this repository, then `go build ./cmd` in module mode with its
dependencies from the Go module proxy, as the test bed builds everything else
(build.go_env). What `find_peer` needs is printed as two exports:

    python -m valkey_testbed peer-build --source /path/to/valkey-operator.git --ref v0.5.0
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import attrs

from valkey_testbed.build import BuildError, Progress, cache_root, run_step
from valkey_testbed.peer import ENV_CRDS, ENV_OPERATOR


class PeerBuildError(RuntimeError):
    """A step of the peer's build failed; the message carries the tool's output."""


@attrs.frozen
class PeerBuild:
    """Where one ref's build lives: the manager binary and its CRD directory."""

    root: Path

    @property
    def source(self) -> Path:
        return self.root / "src"

    @property
    def manager(self) -> Path:
        return self.root / "manager"

    @property
    def crds(self) -> Path:
        return self.source / "config" / "crd" / "bases"

    def exports(self) -> str:
        """Shell exports that point find_peer at this build."""
        return "\n".join(
            f"export {name}={shlex.quote(str(path))}"
            for name, path in ((ENV_OPERATOR, self.manager), (ENV_CRDS, self.crds))
        )


def peer_build(ref: str, commit: str) -> PeerBuild:
    """The build of ref at commit (the commit in the path: a moved tag builds anew)."""
    safe = "".join(c if c.isalnum() or c in ".-_" else "_" for c in ref)
    return PeerBuild(cache_root() / "peer" / f"{safe}-{commit[:12]}")


def _resolve(source: Path, ref: str) -> str:
    """The commit ref names in the git repository at source."""
    argv = ["git", "--git-dir", str(source), "rev-parse", "--verify", f"{ref}^{{commit}}"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise PeerBuildError(f"{' '.join(argv)} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout.strip()


def build(source: Path, ref: str, progress: Progress = print) -> PeerBuild:
    """Build (or reuse) the peer's manager at ref from the git repository at source."""
    commit = _resolve(source, ref)
    built = peer_build(ref, commit)
    if built.manager.is_file() and built.crds.is_dir():
        progress(f"peer {ref} ({commit[:12]}): cached at {built.root}")
        return built
    progress(f"peer {ref} ({commit[:12]}): building into {built.root} ...")
    built.source.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "--git-dir", str(source), "archive", commit], capture_output=True, check=False
    )
    if archive.returncode != 0:
        raise PeerBuildError(f"git archive {commit} failed: {archive.stderr.decode()[-2000:]}")
    subprocess.run(["tar", "-x", "-C", str(built.source)], input=archive.stdout, check=True)
    partial = built.manager.with_suffix(".partial")
    run_step(
        ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial), "./cmd"], built.source, progress
    )
    partial.rename(built.manager)
    return built


def main(source: Path, ref: str) -> int:
    """Progress and errors on stderr, the exports alone on stdout (for `eval`)."""
    try:
        built = build(source, ref, lambda line: print(line, file=sys.stderr))
    except (PeerBuildError, BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(built.exports())
    return 0
