"""The catalog's redis_exporter: the real binary of the pinned version, run as its image user, serving
a real valkey-server's INFO on a loopback listener."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from valkey_testbed import images, processes, redisexporter, versions
from valkey_testbed.valkeyproc import server_base_dir, start_server, stop_servers

pytestmark = pytest.mark.timeout(120)

HOST = "127.0.43.21"


@pytest.fixture
def base_dir() -> Iterator[Path]:
    base = server_base_dir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_exporter_image_scrapes_a_real_valkey_as_its_image_user(base_dir: Path) -> None:
    entry = images.resolve_image(images.EXPORTER_IMAGE)
    assert entry is not None, "run python -m valkey_testbed build"
    assert (entry.user, entry.group) == (images.EXPORTER_UID, images.EXPORTER_UID)
    stamp = (entry.bin_dir.parent / ".stamp").read_text()
    assert stamp.startswith(f"redis_exporter {versions.REDIS_EXPORTER} module ")
    valkey_image = images.resolve_image(images.newest_image())
    assert valkey_image is not None
    server = start_server(valkey_image, HOST, base_dir=base_dir, cluster=True, password="exporter-test-pw")
    record = None
    try:
        server.command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        record = redisexporter.start_exporter(
            entry,
            server.address,
            (HOST, redisexporter.PORT),
            base_dir / "exporter.log",
            username="default",
            password="exporter-test-pw",
        )
        uid_line = next(
            line
            for line in Path(f"/proc/{record.pid}/status").read_text().splitlines()
            if line.startswith("Uid:")
        )
        assert int(uid_line.split()[1]) == images.EXPORTER_UID
        samples = redisexporter.scrape((HOST, redisexporter.PORT)).samples()
        assert samples["redis_up"] == 1
        assert samples["redis_cluster_enabled"] == 1
        assert samples["redis_cluster_slots_assigned"] == 16384
        info = next(series for series in samples if series.startswith("redis_instance_info{"))
        assert f'valkey_version="{server.info()["valkey_version"]}"' in info
        # The sidecar's flags: no Go runtime series, and no CONFIG GET (no config_* series).
        assert not any(series.startswith(("go_", "process_", "redis_config_")) for series in samples)
    finally:
        if record is not None:
            processes.stop([record], grace=5)
        stop_servers([server])
