"""ValkeyImage reconciler: the image-protection finalizer, while any config references it."""

from __future__ import annotations

from controllers.indexes import ReferenceIndex
from controllers.protection import reconcile_protection
from valkey_operator.api.resources import IMAGE_PROTECTION_FINALIZER, VALKEY_CONFIGS, VALKEY_IMAGES
from valkey_operator.core.builder import build_controller
from valkey_operator.core.client import Client
from valkey_operator.core.controller import Controller
from valkey_operator.core.manager import Manager
from valkey_operator.core.reconcile import Request, Result
from valkey_operator.core.rest import Obj


class ImageReconciler:
    def __init__(self, client: Client, index: ReferenceIndex) -> None:
        self.client = client
        self.index = index

    async def reconcile(self, request: Request) -> Result:
        image = self.index.image(request.name)
        if image is None:
            return Result()
        referenced = bool(self.index.configs_using_image(request.name))
        await reconcile_protection(self.client, VALKEY_IMAGES, image, IMAGE_PROTECTION_FINALIZER, referenced)
        return Result()


def image_of_config(config: Obj) -> list[Request]:
    ref = config.get("spec", {}).get("imageRef")
    return [Request(ref)] if ref else []


def setup(manager: Manager, index: ReferenceIndex, workers: int) -> Controller:
    return (
        build_controller(manager, "valkeyimage")
        .for_(VALKEY_IMAGES)
        .watches(VALKEY_CONFIGS, image_of_config)
        .with_workers(workers)
        .complete(ImageReconciler(manager.client, index))
    )
