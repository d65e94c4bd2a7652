"""Mount points nested in another volume's mount are made in that volume's directory first."""

from __future__ import annotations

from pathlib import Path

import pytest

from valkey_testbed.kubelet import runtime


def test_nested_mount_points_are_made_in_the_parent_volume(tmp_path: Path) -> None:
    config, users, hosts = tmp_path / "config", tmp_path / "users", tmp_path / "hosts"
    config.mkdir()
    users.mkdir()
    hosts.write_text("")
    deeper = tmp_path / "deeper"
    deeper.mkdir()
    runtime.make_nested_mount_points(
        [
            runtime.Mount(config, "/config", read_only=True),
            runtime.Mount(users, "/config/users/", read_only=True),
            runtime.Mount(deeper, "/config/users/more"),
            runtime.Mount(hosts, "/config/etc/hosts"),
            runtime.Mount(hosts, "/etc/hosts"),
        ]
    )
    assert (config / "users").is_dir()
    assert (users / "more").is_dir(), "made in the deepest enclosing volume"
    assert not (config / "users" / "more").exists()
    assert (config / "etc" / "hosts").is_file(), "a file mount gets an empty file"


def test_an_existing_entry_is_left_alone(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "users").symlink_to("..data/users")
    runtime.make_nested_mount_points(
        [runtime.Mount(config, "/config"), runtime.Mount(tmp_path, "/config/users")]
    )
    assert (config / "users").is_symlink()


def test_a_mount_point_that_cannot_be_made_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "users").write_text("a file in the way")
    with pytest.raises(runtime.ConfigError, match="cannot create mount point /config/users/x"):
        runtime.make_nested_mount_points(
            [runtime.Mount(config, "/config"), runtime.Mount(tmp_path, "/config/users/x")]
        )


def test_a_volume_over_the_hosts_files_the_container_runs_is_refused_by_name() -> None:
    """The cold CI script's image prefix under /work/tmp met a test's emptyDir at /work: the
    busybox pod never ran and the wait said only `last value: None`."""
    bin_dir = Path("/work/tmp/cold.x/images/busybox/bin")
    files = [bin_dir, bin_dir / "sh"]
    runtime.check_mounts_keep(
        files, [runtime.Mount(Path("/v"), "/probe-state"), runtime.Mount(Path("/v"), "/wor")]
    )
    with pytest.raises(runtime.StartError) as refused:
        runtime.check_mounts_keep(files, [runtime.Mount(Path("/v"), "/work")])
    assert str(refused.value) == (
        "the volume mounted at /work would hide /work/tmp/cold.x/images/busybox/bin, which this container "
        "runs from the host (the test bed's process runtime): mount it at another path"
    )
