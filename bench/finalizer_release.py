"""Finalizer release latency: delete an image's last referencing config, time until the image is gone.

With 10, 1,000 and 10,000 other ValkeyConfigs in the cache, the image
reconciler decides "still referenced?" from the shared index; the same
decision made with a LIST of every config is measured in the same run for
the ratio. Flat means p50 at 10,000 configs is at most 2x p50 at 10, plus
100 ms.

    python bench/finalizer_release.py [--sizes 10,1000,10000] [--trials 15] [--kubeconfig PATH]

Without --kubeconfig a control plane is started in a temporary directory
(build it first: `python -m valkey_testbed build`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from prometheus_client import CollectorRegistry

from controllers.image import ImageReconciler, image_of_config
from controllers.indexes import ReferenceIndex
from controllers.protection import reconcile_protection
from valkey_operator.api.resources import IMAGE_PROTECTION_FINALIZER, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import Client
from valkey_operator.core.logging import configure_logging
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.rest import RestClient
from valkey_testbed.crds import install_crds
from valkey_testbed.wait import eventually

Check = Callable[[], Awaitable[bool]]


class ListingImageReconciler(ImageReconciler):
    """The same decision, made with a LIST of every config (what the index replaces)."""

    async def reconcile(self, request: Request) -> Result:
        image = self.index.image(request.name)
        if image is None:
            return Result()
        configs = await self.client.list(VALKEY_CONFIGS)
        referenced = any(c.get("spec", {}).get("imageRef") == request.name for c in configs)
        await reconcile_protection(self.client, VALKEY_IMAGES, image, IMAGE_PROTECTION_FINALIZER, referenced)
        return Result()


async def ensure_other_configs(kube: Client, count: int, concurrency: int = 32) -> None:
    existing = {c["metadata"]["name"] for c in await kube.list(VALKEY_CONFIGS)}
    wanted = [f"bench-other-{index:05d}" for index in range(count)]
    missing = iter(name for name in wanted if name not in existing)

    async def creator() -> None:
        for name in missing:
            body = {
                "apiVersion": VALKEY_CONFIGS.api_version,
                "kind": VALKEY_CONFIGS.kind,
                "metadata": {"name": name},
                "spec": {"imageRef": "bench-other-image", "valkey": {"maxmemory-policy": "allkeys-lru"}},
            }
            await kube.create(VALKEY_CONFIGS, body)

    await asyncio.gather(*(creator() for _ in range(concurrency)))


POLL = 0.005
"""Seconds between checks: the release latency measured is well above it."""


async def measure(api: k8s.ApiClient, kube: Client, listing: bool, trials: int, label: str) -> list[float]:
    manager = Manager(
        api,
        field_manager="valkey-operator",
        metrics_bind_address="0",
        health_probe_bind_address="0",
        registry=CollectorRegistry(),
    )
    index = ReferenceIndex.install(manager)
    reconciler_type = ListingImageReconciler if listing else ImageReconciler
    build_controller(manager, "valkeyimage").for_(VALKEY_IMAGES).watches(
        VALKEY_CONFIGS, image_of_config
    ).with_workers(2).complete(reconciler_type(manager.client, index))
    running = asyncio.create_task(manager.run())
    await eventually(manager.ready, "the manager ready", 60, interval=POLL)
    samples = []
    try:
        for trial in range(trials):
            image, config = f"bench-img-{label}-{trial}", f"bench-ref-{label}-{trial}"
            await kube.create(
                VALKEY_IMAGES,
                {
                    "apiVersion": VALKEY_IMAGES.api_version,
                    "kind": VALKEY_IMAGES.kind,
                    "metadata": {"name": image},
                    "spec": {"repository": "valkey/valkey", "tag": "9.1.2", "version": "9.1.2"},
                },
            )
            await kube.create(
                VALKEY_CONFIGS,
                {
                    "apiVersion": VALKEY_CONFIGS.api_version,
                    "kind": VALKEY_CONFIGS.kind,
                    "metadata": {"name": config},
                    "spec": {"imageRef": image},
                },
            )
            await eventually(_protected(kube, image), f"{image} protected", 60, interval=POLL)
            await kube.delete(VALKEY_IMAGES, image)
            started = time.perf_counter()
            await kube.delete(VALKEY_CONFIGS, config)
            await eventually(_gone(kube, image), f"{image} released and gone", 60, interval=POLL)
            samples.append(time.perf_counter() - started)
    finally:
        manager.stop()
        await running
    return samples


def _protected(kube: Client, image: str) -> Check:
    async def check() -> bool:
        current = await kube.get(VALKEY_IMAGES, image)
        return IMAGE_PROTECTION_FINALIZER in current["metadata"].get("finalizers", [])

    return check


def _gone(kube: Client, image: str) -> Check:
    async def check() -> bool:
        return await kube.get_or_none(VALKEY_IMAGES, image) is None

    return check


async def drive(kubeconfig: str, sizes: list[int], trials: int) -> None:
    configure_logging("json", "warning")
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with k8s.ApiClient(configuration) as api:
        kube = Client(RestClient(api), field_manager="bench")
        await install_crds(kube)
        rows = []
        for size in sorted(sizes):
            started = time.perf_counter()
            await ensure_other_configs(kube, size)
            print(
                f"{size} other configs present ({time.perf_counter() - started:.0f}s to create)", flush=True
            )
            index_samples = await measure(api, kube, listing=False, trials=trials, label=f"i{size}")
            list_samples = await measure(api, kube, listing=True, trials=trials, label=f"l{size}")
            index_p50 = statistics.median(index_samples) * 1000
            list_p50 = statistics.median(list_samples) * 1000
            rows.append((size, index_p50, list_p50))
            print(
                f"  {size:>6} configs: index p50 {index_p50:7.1f} ms (max {max(index_samples) * 1000:.1f}), "
                f"list p50 {list_p50:7.1f} ms (max {max(list_samples) * 1000:.1f}), "
                f"list/index {list_p50 / index_p50:.1f}x",
                flush=True,
            )
        smallest, largest = rows[0], rows[-1]
        bound = 2 * smallest[1] + 100
        verdict = "flat" if largest[1] <= bound else "NOT flat"
        print(
            f"\nindex p50 at {largest[0]} = {largest[1]:.1f} ms vs bound 2 x {smallest[1]:.1f} + 100 = "
            f"{bound:.1f} ms: {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--kubeconfig")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.kubeconfig:
        asyncio.run(drive(args.kubeconfig, sizes, args.trials))
        return
    from valkey_testbed.controlplane import ControlPlane

    with tempfile.TemporaryDirectory(prefix="bench-") as state, ControlPlane(Path(state)) as plane:
        asyncio.run(drive(str(plane.kubeconfig), sizes, args.trials))


if __name__ == "__main__":
    main()
