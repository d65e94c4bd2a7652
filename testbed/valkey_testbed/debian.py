"""Debian's `valkey` source package: which version to build, and fetching it with a private apt config.

The TLS image is built from Debian unstable, which keeps one upload of a
package and moves on. The pin in `versions.py` is what was tested; when
unstable no longer offers it, `pick_source_version` picks the newest release
of the same major instead, so a fresh machine still builds an image. It is a
pure function of the archive's listing (`apt-cache showsrc valkey`) and the
pin; `SourceArchive` asks the archive with a throwaway apt configuration.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from valkey_testbed import versions
from valkey_testbed.build import BuildError, Progress

PACKAGE = "valkey"
# Override for the Debian mirror the source is fetched from; by default it is
# the one the machine's own apt sources use.
MIRROR_ENV = "VALKEY_OPERATOR_DEBIAN_MIRROR"

# An upstream release, MAJOR.MINOR.PATCH, optionally repacked (+dfsg1); `~` pre-releases are not.
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(\+[A-Za-z0-9.+]+)?")


class SourceError(BuildError):
    """The archive offers no buildable source, or asking it failed."""


class PackageError(BuildError):
    """A Debian package a build needs is missing and could not be installed."""


def install_packages(missing: Sequence[str], purpose: str, progress: Progress) -> None:
    """apt-get install the missing packages from the machine's own apt sources (as root), once more
    after an apt-get update if the first try fails (a stale package list); nothing if none is."""
    if not missing:
        return
    if os.geteuid() != 0:
        raise PackageError(f"{purpose} needs {' '.join(missing)}: install them (apt-get install)")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    progress("  $ " + " ".join(install))
    if subprocess.run(install, capture_output=True, check=False).returncode == 0:
        return
    subprocess.run(["apt-get", "-q", "update"], capture_output=True, check=False)
    done = subprocess.run(install, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
        raise PackageError(f"{purpose}: {' '.join(install)} failed (exit {done.returncode}):\n{tail}")


MINBASE_EXCLUDES = ("/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*")
"""Left out of an image's base: documentation, manuals and translations (a third of minbase)."""


def minbase_argv(include: Sequence[str], target: Path, *, purge: Sequence[str] = ()) -> list[str]:
    """mmdebstrap making an image's root filesystem (a tar at target) from Debian's minbase of
    versions.DEBIAN_BASE_SUITE plus include; licences stay (they travel with the binaries), apt's
    lists and caches and the logs go, and so do the purge packages once the root is made."""
    argv = ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(include)]
    argv += [f"--dpkgopt=path-exclude={pattern}" for pattern in MINBASE_EXCLUDES]
    argv += ["--dpkgopt=path-include=/usr/share/doc/*/copyright"]
    if purge:
        argv += [f"--customize-hook=chroot $1 dpkg --purge {' '.join(purge)}"]
    argv += ["--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/* $1/var/log/*"]
    return [*argv, versions.DEBIAN_BASE_SUITE, str(target)]


def not_installed(packages: Sequence[str]) -> list[str]:
    """The packages dpkg does not know as installed."""
    return [
        name for name in packages
        if subprocess.run(["dpkg", "-s", name], capture_output=True, check=False).returncode != 0
    ]  # fmt: skip


# --- which version to build (pure) ---------------------------------------------------------------


def pick_source_version(listing: str, pinned: str) -> str:
    """The pin when the listing offers it, else the newest release with the pin's major version.

    Raises SourceError, naming what is offered, when no release of that major is.
    """
    offered = offered_versions(listing)
    if pinned in offered:
        return pinned
    major = release_major(pinned)
    if major is None:
        raise SourceError(
            f"the pinned {PACKAGE} source {pinned} is not an upstream release (MAJOR.MINOR.PATCH)"
        )
    candidates = [version for version in offered if release_major(version) == major]
    if not candidates:
        shown = ", ".join(sorted(offered, key=version_key)) or "nothing"
        raise SourceError(
            f"Debian unstable offers no {PACKAGE} {major}.x release to build the TLS image from "
            f"(pinned {pinned}; offered: {shown}); set testbed/valkey_testbed/versions.py "
            "VALKEY_DEBIAN_SOURCE to a version the archive serves"
        )
    return max(candidates, key=version_key)


def offered_versions(listing: str) -> list[str]:
    """Versions of the `valkey` source package in `apt-cache showsrc` output (stanzas of fields)."""
    versions = []
    for stanza in re.split(r"\n\s*\n", listing):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1].isspace() or ":" not in line:
                continue  # continuation lines of Files:, Checksums-*:, Package-List:
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if fields.get("package") == PACKAGE and fields.get("version"):
            versions.append(fields["version"])
    return versions


def upstream_version(debian_version: str) -> str:
    """The upstream Valkey version of a Debian version: 1:9.1.3+dfsg1-2 -> 9.1.3."""
    match = _RELEASE.fullmatch(_split(debian_version)[1])
    if match is None:
        raise SourceError(f"{PACKAGE} {debian_version} is not an upstream release (MAJOR.MINOR.PATCH)")
    return ".".join(match.groups()[:3])


def release_major(debian_version: str) -> int | None:
    """MAJOR of an upstream release, or None for a pre-release or anything else."""
    match = _RELEASE.fullmatch(_split(debian_version)[1])
    return int(match.group(1)) if match else None


def source_file_stem(debian_version: str) -> str:
    """`valkey_<version>` as the archive names the .dsc: the epoch is not part of file names."""
    return f"{PACKAGE}_{debian_version.split(':', 1)[-1]}"


def _split(version: str) -> tuple[int, str, str]:
    """(epoch, upstream, revision) as dpkg splits a version."""
    epoch, _, rest = version.partition(":") if ":" in version else ("0", "", version)
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, ""
    return int(epoch or 0), upstream, revision


def _order(char: str) -> int:
    if char.isdigit():
        return 0
    if char.isalpha():
        return ord(char)
    return -1 if char == "~" else ord(char) + 256


def _compare_part(a: str, b: str) -> int:
    """dpkg's verrevcmp: non-digit runs by `_order` (~ before the end), digit runs as numbers."""
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) else 0
            bc = _order(b[j]) if j < len(b) else 0
            if ac != bc:
                return ac - bc
            i, j = i + 1, j + 1
        start_a, start_b = i, j
        while i < len(a) and a[i].isdigit():
            i += 1
        while j < len(b) and b[j].isdigit():
            j += 1
        number_a, number_b = int(a[start_a:i] or 0), int(b[start_b:j] or 0)
        if number_a != number_b:
            return number_a - number_b
    return 0


def compare_versions(a: str, b: str) -> int:
    """Negative, zero or positive as Debian version a sorts before, with or after b."""
    epoch_a, upstream_a, revision_a = _split(a)
    epoch_b, upstream_b, revision_b = _split(b)
    if epoch_a != epoch_b:
        return epoch_a - epoch_b
    return _compare_part(upstream_a, upstream_b) or _compare_part(revision_a, revision_b)


version_key = functools.cmp_to_key(compare_versions)


# --- asking the archive --------------------------------------------------------------------------


class SourceArchive:
    """Debian unstable's source index in a throwaway apt configuration under work.

    The machine's apt sources, lists and caches are left untouched; the mirror
    is the Debian mirror the machine already uses. The index is fetched once,
    on first use.
    """

    def __init__(self, work: Path) -> None:
        self._root = work
        self._updated = False

    def listing(self) -> str:
        """`apt-cache showsrc valkey`: every version of the source the archive offers."""
        return self._apt("apt-cache", "showsrc", PACKAGE)

    def download(self, debian_version: str, dest: Path) -> Path:
        """Fetch the source package at exactly debian_version into dest; the path of its .dsc."""
        self._apt("apt-get", "source", "--download-only", f"{PACKAGE}={debian_version}", cwd=dest)
        return dest / f"{source_file_stem(debian_version)}.dsc"

    def _apt(self, tool: str, *args: str, cwd: Path | None = None) -> str:
        options = self._options()
        if not self._updated:
            _run(["apt-get", *options, "-q", "update"], "apt-get update (private unstable deb-src)")
            self._updated = True
        return _run([tool, *options, *args], f"{tool} {' '.join(args)}", cwd)

    def _options(self) -> list[str]:
        root = self._root
        mirror, keyring = _debian_mirror()
        for sub in ("lists/partial", "cache/archives/partial", "etc/parts", "etc/preferences.d"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        signed = f" [signed-by={keyring}]" if keyring else ""
        (root / "etc" / "sources.list").write_text(f"deb-src{signed} {mirror} unstable main\n")
        return [
            "-o", f"Dir::Etc::SourceList={root / 'etc' / 'sources.list'}",
            "-o", f"Dir::Etc::SourceParts={root / 'etc' / 'parts'}",
            "-o", f"Dir::Etc::PreferencesParts={root / 'etc' / 'preferences.d'}",
            "-o", f"Dir::State::Lists={root / 'lists'}",
            "-o", f"Dir::Cache={root / 'cache'}",
            "-o", "APT::Sandbox::User=root",
        ]  # fmt: skip


def _run(argv: list[str], what: str, cwd: Path | None = None) -> str:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise SourceError(f"{what} failed (exit {result.returncode}):\n{tail}")
    return result.stdout


def _debian_mirror() -> tuple[str, str | None]:
    """(URI, keyring) of the machine's Debian archive, from its apt sources."""
    keyring_default = "/usr/share/keyrings/debian-archive-keyring.gpg"
    default_keyring = keyring_default if Path(keyring_default).exists() else None
    explicit = os.environ.get(MIRROR_ENV)
    if explicit:
        return explicit, default_keyring
    for stanza in _apt_stanzas():
        types = stanza.get("types", "").split()
        suites = stanza.get("suites", "").split()
        signed = stanza.get("signed-by", "")
        if stanza.get("enabled", "yes") == "no" or not ({"deb", "deb-src"} & set(types)):
            continue
        if signed and "debian-archive-keyring" not in signed:
            continue
        if not any("-" not in suite and "/" not in suite for suite in suites):
            continue  # security and updates suites live elsewhere
        return stanza["uris"].split()[0], signed or default_keyring
    raise SourceError(
        f"no Debian mirror found in the machine's apt sources; set {MIRROR_ENV} "
        "to the URI of a Debian archive"
    )


def _apt_stanzas() -> list[dict[str, str]]:
    """The machine's apt sources as deb822-like dicts (one-line entries converted)."""
    etc = Path("/etc/apt")
    stanzas: list[dict[str, str]] = []
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        for block in path.read_text().split("\n\n"):
            fields: dict[str, str] = {}
            for line in block.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
            if "uris" in fields:
                stanzas.append(fields)
    for path in [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) < 3 or words[0] not in ("deb", "deb-src"):
                continue
            options = {}
            if words[1].startswith("["):
                end = next((i for i, word in enumerate(words) if word.endswith("]")), 0)
                for option in " ".join(words[1 : end + 1]).strip("[]").split():
                    key, _, value = option.partition("=")
                    options[key.lower()] = value
                words = [words[0], *words[end + 1 :]]
            stanzas.append(
                {"types": words[0], "uris": words[1], "suites": words[2], **options},
            )
    return stanzas
