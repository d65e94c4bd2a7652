"""kubernetes-asyncio's credential loaders, imported without its generated API and model classes.

Why: `import kubernetes_asyncio.config` first runs kubernetes_asyncio/__init__.py, which imports
`kubernetes_asyncio.client`, whose __init__.py imports every API class and all 768 model modules:
about 32 MiB of RSS and 0.13 s of CPU (measured in the operator's process) that it never uses: it
needs only the loaders (restconfig) and sends its requests itself (transport). The loaders use none
of it either: they take the client package's Configuration, and kube_config names ApiClient only in
new_client_from_config.

How: `import_loaders()` makes the three packages (kubernetes_asyncio, .client, .config) from their
own specs without running their __init__.py, then imports the loaders' modules under them as usual.
Each package runs its own __init__.py, in place, at the first lookup of a name it lacks (a PEP 562
module `__getattr__`), so code that imports kubernetes-asyncio later in the process gets the whole
package, with the same Configuration class. kube_config's ApiClient is a function that imports the
real class when new_client_from_config calls it.

A kubernetes-asyncio laid out otherwise (a module moved, kube_config importing more from the client
package) is imported as usual, whole, with a RuntimeWarning naming its version: the operator then
pays the memory, never its start. tests/unit/core/test_restconfig_imports.py checks the installed
one.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import threading
import types
import warnings
from typing import Any

PACKAGES = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.config")
LOADERS = {
    "kubernetes_asyncio.client.configuration": ("Configuration",),
    "kubernetes_asyncio.config.config_exception": ("ConfigException",),
    "kubernetes_asyncio.config.incluster_config": ("InClusterConfigLoader",),
    "kubernetes_asyncio.config.kube_config": ("KubeConfigLoader", "load_kube_config", "_is_expired"),
}
"""The modules restconfig imports, and the names it takes from each."""

_completing = threading.RLock()  # re-entrant: the top package's __init__.py completes the client's


def import_loaders() -> None:
    """Import LOADERS: without the API and model classes unless kubernetes_asyncio was imported
    already (then as usual). If the installed kubernetes-asyncio is not laid out as this module
    knows, sys.modules is put back as it was and LOADERS are imported as usual, with a warning."""
    bare = "kubernetes_asyncio" not in sys.modules
    before = set(sys.modules)
    try:
        packages = _bare_packages() if bare else []
        for name, names in LOADERS.items():
            module = importlib.import_module(name)
            missing = [attribute for attribute in names if not hasattr(module, attribute)]
            if missing:
                raise ImportError(f"{name} has no {', '.join(missing)}")
    except (ImportError, AttributeError) as exc:
        if bare:
            for name in set(sys.modules) - before:
                del sys.modules[name]
        warnings.warn(
            f"kubernetes-asyncio {_version()} is not laid out as {__name__} expects "
            f"(written for 36.1): {type(exc).__name__}: {exc}; importing it whole",
            RuntimeWarning,
            stacklevel=2,
        )
        for name in LOADERS:
            importlib.import_module(name)
        return
    for package in packages:
        _complete_on_first_miss(package)


def _bare_packages() -> list[types.ModuleType]:
    """PACKAGES in sys.modules as the import system would make them, but with nothing run; kube_config
    imported under them with a stand-in ApiClient."""
    packages = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)  # a child's spec through its bare parent's __path__
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            raise ImportError(f"{name} is not a package")
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)
        packages.append(package)
    client = vars(sys.modules["kubernetes_asyncio.client"])
    client["Configuration"] = importlib.import_module(  # what client/__init__.py binds: the same class
        "kubernetes_asyncio.client.configuration"
    ).Configuration
    client["ApiClient"] = _api_client
    try:
        importlib.import_module("kubernetes_asyncio.config.kube_config")
    finally:
        del client["ApiClient"]  # client/__init__.py binds the real class
    return packages


def _api_client(*args: Any, **kwargs: Any) -> Any:
    """kube_config's ApiClient until first called (by new_client_from_config): then the real class,
    which imports the client package whole."""
    from kubernetes_asyncio.client import ApiClient

    vars(sys.modules["kubernetes_asyncio.config.kube_config"])["ApiClient"] = ApiClient
    return ApiClient(*args, **kwargs)


def _complete_on_first_miss(package: types.ModuleType) -> None:
    """Run the package's own __init__.py in place the first time a name it lacks is looked up."""

    def __getattr__(name: str) -> Any:
        with _completing:
            if vars(package).get("__getattr__") is __getattr__:
                del vars(package)["__getattr__"]  # a miss while __init__.py runs is a plain miss
                spec = package.__spec__
                assert spec is not None and spec.loader is not None
                try:
                    spec.loader.exec_module(package)
                except BaseException:
                    vars(package)["__getattr__"] = __getattr__  # the next lookup tries again
                    raise
        return getattr(package, name)

    vars(package)["__getattr__"] = __getattr__


def _version() -> str:
    try:
        return importlib.metadata.version("kubernetes_asyncio")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"
