"""Where a peer build lives and what it tells find_peer (pure)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from valkey_testbed import peerbuild
from valkey_testbed.peer import ENV_CRDS, ENV_OPERATOR, Peer, find_peer


def test_a_build_is_keyed_by_ref_and_commit_and_exports_what_find_peer_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VALKEY_OPERATOR_CACHE", str(tmp_path))
    built = peerbuild.peer_build("v0.5.0", "d46e70a523d941ff312952bb00bb3c542a4b61b5")
    assert built.root == tmp_path / "peer" / "v0.5.0-d46e70a523d9"
    assert peerbuild.peer_build("refs/tags/x y", "0" * 40).root.name == "refs_tags_x_y-000000000000"
    built.manager.parent.mkdir(parents=True)
    built.manager.write_text("")
    built.manager.chmod(0o755)
    built.crds.mkdir(parents=True)
    (built.crds / "valkey.io_valkeyclusters.yaml").write_text("")
    exported = dict(line.removeprefix("export ").split("=", 1) for line in built.exports().splitlines())
    assert exported == {ENV_OPERATOR: str(built.manager), ENV_CRDS: str(built.crds)}
    assert isinstance(find_peer(exported), Peer)


def test_an_unknown_ref_fails_with_gits_words(tmp_path: Path) -> None:
    source = tmp_path / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", str(source)], check=True, env={**os.environ})
    with pytest.raises(peerbuild.PeerBuildError, match="rev-parse"):
        peerbuild.build(source, "v9.9.9", lambda _: None)
