"""Build the operator's OCI image from the repository's Containerfile, with no registry.

These machines reach package registries only, so each input comes from one:
1. the base: a Debian root filesystem with python3 made by mmdebstrap from
   Debian's packages, imported into buildah's local store;
2. the wheels: `pip wheel` of this checkout and its dependencies, run by the
   base's own Python (its version decides environment markers) in a chroot of
   the base, with the host's CA bundle and pip settings;
3. the image: `buildah bud` of the Containerfile with the network off (the
   wheels are in the build context), saved as an OCI archive under the cache.

Every step is skipped when its inputs are unchanged: the base by its package
list, the image by the checkout's content and revision. `load` unpacks the
archive into the image store the test bed's kubelet runs images from
(`ocistore`), under the chart's default reference and the manifest digest.
"""

from __future__ import annotations

import configparser
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from valkey_testbed import debian, ocistore, versions
from valkey_testbed.build import BuildError, cache_root, file_lock

Progress = Callable[[str], None]

IMAGE_NAME = "valkey-operator"
# Packages of the base beyond Debian's minbase: the runtime and its venv module (ensurepip).
BASE_PACKAGES = ("python3", "python3-venv", "usr-is-merged")
# Removed from the base once made: needed only while mmdebstrap merges /usr.
_BASE_PURGE = (
    "usrmerge", "libfile-find-rule-perl", "libnumber-compare-perl", "libtext-glob-perl", "perl",
    "perl-modules-5.36", "libperl5.36", "libgdbm-compat4",
)  # fmt: skip
# Tools the build needs, by the Debian package that brings each.
_TOOLS = {"mmdebstrap": "mmdebstrap", "buildah": "buildah", "runc": "runc"}
# Never part of the build context (besides what git ignores).
_CONTEXT_EXCLUDES = (".git", ".testbed", ".wheels")


class ImageBuildError(BuildError):
    """Building the operator image failed; the message carries the failing tool's output."""


@attrs.frozen
class BuiltImage:
    reference: str
    archive: Path
    digest: str
    size: int


def image_dir() -> Path:
    return cache_root() / "oci"


def package_version(checkout: Path) -> str:
    parser = configparser.ConfigParser()
    parser.read(checkout / "setup.cfg")
    return parser["metadata"]["version"]


def default_reference(checkout: Path) -> str:
    """What the chart's default values name: valkey-operator:<appVersion>."""
    return f"{IMAGE_NAME}:{package_version(checkout)}"


def _checkout() -> Path:
    return Path(__file__).resolve().parents[2]


def build_image(
    progress: Progress = print,
    *,
    checkout: Path | None = None,
    tag: str | None = None,
    revision: str | None = None,
) -> BuiltImage:
    """Build (or reuse) the image of `checkout` tagged `tag` (default: the package version), labelled
    with `revision` (default: the checkout's git HEAD)."""
    checkout = checkout or _checkout()
    tag = tag or package_version(checkout)
    _ensure_tools(progress)
    started = time.monotonic()
    image_dir().mkdir(parents=True, exist_ok=True)
    base = _base_image(progress)
    with tempfile.TemporaryDirectory(prefix="valkey-operator-image-") as tmp:
        context = Path(tmp) / "context"
        revision = revision or _revision(checkout)
        key = _copy_context(checkout, context, extra=f"{base}\0{tag}\0{revision}")
        archive = image_dir() / f"{IMAGE_NAME}-{tag}-{key[:16]}.oci.tar"
        if archive.is_file():
            progress(f"operator image {IMAGE_NAME}:{tag}: cached at {archive}")
        else:
            progress(f"operator image {IMAGE_NAME}:{tag}: building...")
            _build_wheels(base, context, progress)
            _bud(base, context, tag, revision, package_version(checkout), archive, progress)
            for old in image_dir().glob(f"{IMAGE_NAME}-{tag}-*.oci.tar"):
                if old != archive:
                    old.unlink()
    digest = ocistore.archive_digest(archive)
    size = archive.stat().st_size
    progress(
        f"  {IMAGE_NAME}:{tag} {digest[:19]} ({size / 2**20:.1f} MiB archive, "
        f"{time.monotonic() - started:.0f}s)"
    )
    return BuiltImage(f"{IMAGE_NAME}:{tag}", archive, digest, size)


def build_and_load(
    progress: Progress = print,
    *,
    checkout: Path | None = None,
    tag: str | None = None,
    revision: str | None = None,
) -> BuiltImage:
    """Build the image (of `checkout`, default this one) and unpack it into the kubelet's store
    under its tag and its digest.

    One at a time on the machine: a build of another checkout (another key) removes the archive
    this one found cached, and loads its own image under the same tag."""
    from valkey_testbed.images import image_prefix

    with file_lock(image_dir() / ".lock"):
        image = build_image(progress, checkout=checkout, tag=tag, revision=revision)
        ocistore.load(image.archive, [image.reference], progress, prefix=image_prefix())
        loaded = ocistore.resolve(image.reference, prefix=image_prefix())
    assert loaded is not None
    output, seconds = _smoke_check(loaded)
    progress(f"  ok (uid 65532, read-only root, runc): valkey-operator --help in {seconds:.2f}s: {output}")
    return image


def _smoke_check(image: ocistore.OciImage) -> tuple[str, float]:
    """`valkey-operator --help` in a container of the image as the chart runs it: its user, a
    read-only root, no capabilities, no_new_privs, RuntimeDefault seccomp. (first line, seconds)"""
    from valkey_testbed.kubelet import runc, runtime

    uid, gid = runc.image_user(image)
    secure = runc.Security(read_only_root=True, capabilities=(), seccomp_runtime_default=True)
    with tempfile.TemporaryDirectory(prefix="valkey-operator-smoke-") as tmp:
        bundle = runc.Bundle(Path(tmp) / "bundle", image)
        env = dict(item.split("=", 1) for item in image.env)
        config = runc.runtime_config(
            argv=[*image.entrypoint, "--help"],
            env=env,
            who=runtime.Identity(uid, gid, (), no_new_privs=True),
            mounts=(),
            secure=secure,
            hostname="smoke",
            working_dir=image.working_dir,
            rootfs=bundle.rootfs,
        )
        bundle.prepare(config)
        try:
            started = time.monotonic()
            argv = [runc.runc(), "--root", str(Path(tmp) / "state"), "run", "--bundle", str(bundle.directory)]
            done = subprocess.run(
                [*argv, f"smoke-{os.getpid()}"], capture_output=True, text=True, timeout=60, check=False
            )
            seconds = time.monotonic() - started
        finally:
            bundle.remove()
    if done.returncode != 0 or "usage: valkey-operator" not in done.stdout:
        failed = f"valkey-operator --help in the image failed ({done.returncode})"
        raise ImageBuildError(f"{failed}:\n{done.stderr}")
    return done.stdout.splitlines()[0][:80], seconds


# --- the base ---------------------------------------------------------------------------------------


def _mmdebstrap_argv(target: Path) -> list[str]:
    # usrmerge (and the perl it needs) only sets up the merged /usr while the root is made.
    return debian.minbase_argv(BASE_PACKAGES, target, purge=_BASE_PURGE)


def _base_image(progress: Progress) -> str:
    """The local name of the base image, made from Debian's packages unless already there."""
    stamp = hashlib.sha256(" ".join(_mmdebstrap_argv(Path("-"))).encode()).hexdigest()[:12]
    name = f"localhost/{IMAGE_NAME}-base:{versions.DEBIAN_BASE_SUITE}-{stamp}"
    exists = ["buildah", "inspect", "--type", "image", name]
    if _run(exists, progress, "buildah inspect", check=False, quiet=True, result=True) == "0":
        progress(f"operator image base {name}: cached")
        return name
    progress(f"operator image base {name}: making it from Debian packages...")
    with tempfile.TemporaryDirectory(prefix="valkey-operator-base-") as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        _run(_mmdebstrap_argv(rootfs), progress, "mmdebstrap")
        container = _run(["buildah", "from", "scratch"], progress, "buildah from", quiet=True).strip()
        try:
            _run(["buildah", "add", container, str(rootfs), "/"], progress, "buildah add")
            _run(["buildah", "commit", "--rm", container, name], progress, "buildah commit")
        except ImageBuildError:
            _run(["buildah", "rm", container], progress, "buildah rm", check=False, quiet=True)
            raise
    return name


# --- the context and its wheels ---------------------------------------------------------------------


def _context_files(checkout: Path) -> list[str]:
    """Tracked and untracked-but-not-ignored files (what a clean `git add -A` would hold), less
    what .containerignore leaves out of the context: what `podman build .` would send."""
    listed = subprocess.run(
        ["git", "-C", str(checkout), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        raise ImageBuildError(f"listing the files of {checkout} failed: {listed.stderr.decode()}")
    ignored = _container_ignore(checkout)
    names = [name for name in listed.stdout.decode().split("\0") if name]
    return sorted(
        name
        for name in names
        if not any(_ignores(pattern, name) for pattern in ignored) and (checkout / name).is_file()
    )


def _container_ignore(checkout: Path) -> list[str]:
    path = checkout / ".containerignore"
    lines = path.read_text().splitlines() if path.is_file() else []
    patterns = [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]
    return [*patterns, *_CONTEXT_EXCLUDES]


def _ignores(pattern: str, name: str) -> bool:
    """A .containerignore pattern (a path or glob, `**/` for any depth) matches name or a parent."""
    parts = name.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    if pattern.startswith("**/"):
        return any(fnmatch.fnmatchcase(part, pattern[3:]) for part in parts)
    return any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes)


def _copy_context(checkout: Path, context: Path, *, extra: str) -> str:
    """Copy the checkout's files into context; return a digest of their names, modes and bytes."""
    digest = hashlib.sha256(extra.encode())
    for name in _context_files(checkout):
        source = checkout / name
        target = context / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
        digest.update(name.encode() + b"\0" + oct(source.lstat().st_mode).encode() + b"\0")
        digest.update(os.readlink(source).encode() if source.is_symlink() else source.read_bytes())
    return digest.hexdigest()


def _host_ca_bundle() -> Path:
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise ImageBuildError("no CA bundle found for pip (set PIP_CERT or SSL_CERT_FILE)")


def _pip_env() -> dict[str, str]:
    """The host's pip and proxy settings, for the base's pip in the chroot."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PIP_CERT": "/tmp/host-ca.crt", "LANG": "C.UTF-8"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    for name, value in os.environ.items():
        upper = name.upper()
        if upper.endswith("_PROXY") or upper in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST"):
            env[name] = value
    env.setdefault("PIP_DEFAULT_TIMEOUT", "180")
    return env


def _build_wheels(base: str, context: Path, progress: Progress) -> None:
    """`pip wheel` of the context by the base's own Python, chrooted into a throw-away working
    container of the base (buildah mount): the wheels land in context/.wheels."""
    progress("  wheels: pip wheel by the base's python3 (chroot)")
    container = _run(["buildah", "from", "--pull=never", base], progress, "buildah from", quiet=True).strip()
    try:
        rootfs = Path(_run(["buildah", "mount", container], progress, "buildah mount", quiet=True).strip())
        shutil.copytree(context, rootfs / "src", symlinks=True)
        shutil.copy2(_host_ca_bundle(), rootfs / "tmp" / "host-ca.crt")
        resolv = Path("/etc/resolv.conf")
        if resolv.is_file():
            (rootfs / "etc" / "resolv.conf").unlink(missing_ok=True)
            shutil.copy2(resolv.resolve(), rootfs / "etc" / "resolv.conf")
        script = "python3 -m venv /tmp/pip && /tmp/pip/bin/pip wheel -q --wheel-dir /wheels /src"
        argv = ["chroot", str(rootfs), "/usr/bin/env", "-i"]
        argv += [f"{name}={value}" for name, value in sorted(_pip_env().items())]
        shown = f"chroot BASE {script}"
        _run([*argv, "/bin/sh", "-c", script], progress, "pip wheel in the base", shown=shown)
        wheels = sorted((rootfs / "wheels").glob("*.whl"))
        if not any(wheel.name.startswith("valkey_operator-") for wheel in wheels):
            raise ImageBuildError(f"pip wheel left no valkey_operator wheel: {[w.name for w in wheels]}")
        (context / ".wheels").mkdir()
        for wheel in wheels:
            shutil.copy2(wheel, context / ".wheels" / wheel.name)
    finally:
        _run(["buildah", "rm", container], progress, "buildah rm", check=False, quiet=True)


def _revision(checkout: Path) -> str:
    head = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return head.stdout.strip() if head.returncode == 0 else "unknown"


def _bud(
    base: str, context: Path, tag: str, revision: str, version: str, archive: Path, progress: Progress
) -> None:
    """buildah bud of the Containerfile with the network off, pushed to an OCI archive."""
    name = f"localhost/{IMAGE_NAME}:{tag}"
    argv = ["buildah", "bud", "--isolation", "oci", "--runtime", "runc", "--network", "none"]
    # The limits these machines let a container have (buildah's default nproc is refused).
    argv += ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"]
    argv += ["--pull=never", "--layers=false"]
    argv += ["--build-arg", f"BASE_IMAGE={base}", "--build-arg", f"VERSION={version}"]
    argv += ["--build-arg", f"REVISION={revision}", "--timestamp", "0"]
    argv += ["-f", str(context / "Containerfile"), "-t", name, str(context)]
    _run(argv, progress, "buildah bud")
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    push = ["buildah", "push", "--format", "oci", name, f"oci-archive:{partial}:{IMAGE_NAME}:{tag}"]
    _run(push, progress, "buildah push")
    partial.rename(archive)
    # The image this tag named before is dangling now: a long-lived machine would keep every one.
    _run(["buildah", "rmi", "--prune"], progress, "buildah rmi --prune", check=False, quiet=True)


# --- tools ------------------------------------------------------------------------------------------


def _ensure_tools(progress: Progress) -> None:
    missing = [package for tool, package in _TOOLS.items() if shutil.which(tool) is None]
    debian.install_packages(missing, "building the operator image", progress)


def _run(
    argv: Iterable[str],
    progress: Progress,
    what: str,
    *,
    check: bool = True,
    quiet: bool = False,
    shown: str = "",
    result: bool = False,
) -> str:
    argv = list(argv)
    if not quiet:
        progress("  $ " + (shown or " ".join(argv)))
    started = time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if done.returncode != 0 and check:
        tail = "\n".join(done.stdout.splitlines()[-40:])
        raise ImageBuildError(f"{what}: {' '.join(argv)} failed (exit {done.returncode}):\n{tail}")
    if not quiet:
        progress(f"    done in {time.monotonic() - started:.0f}s")
    return str(done.returncode) if result else done.stdout


def main() -> int:
    try:
        image = build_and_load()
    except BuildError as exc:
        print(f"error: {exc}")
        return 1
    print(json.dumps({"reference": image.reference, "archive": str(image.archive), "digest": image.digest}))
    return 0
