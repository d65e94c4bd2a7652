"""Loading credentials imports kubernetes-asyncio's loaders, not its 768 model modules (about 32 MiB
of RSS and 0.13 s of CPU in the operator's process: valkey_operator/core/kubeloaders.py),
and kubernetes-asyncio imported as usual afterwards is whole. Every probe runs in a fresh interpreter:
this one has imported the client package already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml
from exec_plugin_support import ExecPluginScript, exec_credential

SERVER = "https://203.0.113.7:6443"

LOAD_EVERY_WAY = """
import asyncio, json, sys
from pathlib import Path
from valkey_operator.operator import load_config  # the entry point's import, which names RestConfig too
from valkey_operator.core.restconfig import in_cluster_config

async def refreshed(config):
    config.refresh_api_key_hook.expire()  # as the transport does after a 401
    await config.refresh_api_key_hook(config)
    return config

async def main():
    token, plugin, pod = sys.argv[1:4]
    loaded = {
        "token": await load_config(token),
        "plugin": await refreshed(await load_config(plugin)),
        "in-cluster": in_cluster_config(Path(pod)),
    }
    Path(pod, "token").write_text("rotated")
    await refreshed(loaded["in-cluster"])
    return {name: [c.host, await c.get_api_key_with_prefix("BearerToken")] for name, c in loaded.items()}

print(json.dumps({
    "loaded": asyncio.run(main()),
    "models": sorted(m for m in sys.modules if m.startswith("kubernetes_asyncio.client.models")),
}))
"""

THEN_THE_USUAL_IMPORTS = """
import asyncio, sys
from valkey_operator.core.restconfig import load_config
config = asyncio.run(load_config(sys.argv[1]))
from kubernetes_asyncio import client
import kubernetes_asyncio
from kubernetes_asyncio.config import new_client_from_config

async def new_client():
    api_client = await new_client_from_config(sys.argv[1])
    await api_client.close()
    return type(api_client) is client.ApiClient

print(client.V1Pod.__name__, isinstance(config, client.Configuration),
      kubernetes_asyncio.client.configuration.Configuration is client.Configuration,
      kubernetes_asyncio.watch.Watch.__name__, kubernetes_asyncio.__version__ == client.__version__,
      asyncio.run(new_client()))
"""


def probe(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def token_kubeconfig(path: Path, user: dict[str, Any]) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": SERVER}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_loading_credentials_every_way_imports_no_kubernetes_asyncio_model(tmp_path: Path) -> None:
    plugin = ExecPluginScript.write(tmp_path, [exec_credential("first"), exec_credential("second")])
    pod = tmp_path / "serviceaccount"
    pod.mkdir()
    (pod / "token").write_text("pod-token")
    (pod / "ca.crt").write_text("not parsed until a connection is made")
    env = {k: v for k, v in os.environ.items() if k not in {"KUBECONFIG", "http_proxy", "https_proxy"}}
    env |= {"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    answer = json.loads(
        probe(
            LOAD_EVERY_WAY,
            str(token_kubeconfig(tmp_path / "token.yaml", {"token": "secret"})),
            str(
                token_kubeconfig(
                    tmp_path / "plugin.yaml",
                    {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin.path)}},
                )
            ),
            str(pod),
            env=env,
        )
    )
    assert answer["loaded"] == {
        "token": [SERVER, "Bearer secret"],
        "plugin": [SERVER, "Bearer second"],  # run again by the refresh
        "in-cluster": ["https://10.0.0.1:443", "Bearer rotated"],  # read again by the refresh
    }
    assert answer["models"] == []


def test_kubernetes_asyncio_imported_after_the_loader_is_whole(tmp_path: Path) -> None:
    path = token_kubeconfig(tmp_path / "config", {"token": "secret"})
    whole = ["V1Pod", "True", "True", "Watch", "True", "True"]
    assert probe(THEN_THE_USUAL_IMPORTS, str(path)).split() == whole


def test_a_layout_it_does_not_know_is_imported_whole_with_a_warning_naming_the_version(
    tmp_path: Path,
) -> None:
    """A kubernetes-asyncio whose kube_config imports a model from the client package: the bare
    import is undone (nothing of it left in sys.modules) and the package is imported as usual,
    whole, with a RuntimeWarning naming the installed version: the operator starts either way."""
    fake = tmp_path / "kubernetes_asyncio"
    for package in (fake, fake / "client", fake / "config"):
        package.mkdir()
        (package / "__init__.py").write_text("")
    (fake / "client" / "__init__.py").write_text(
        "from .configuration import Configuration\nclass ApiClient: pass\nclass V1Status: pass\n"
    )
    (fake / "client" / "configuration.py").write_text("class Configuration: pass\n")
    (fake / "config" / "config_exception.py").write_text("class ConfigException(Exception): pass\n")
    (fake / "config" / "incluster_config.py").write_text("class InClusterConfigLoader: pass\n")
    (fake / "config" / "kube_config.py").write_text(
        "from kubernetes_asyncio.client import ApiClient, Configuration, V1Status\n"
        "class KubeConfigLoader: pass\ndef load_kube_config(): pass\ndef _is_expired(): pass\n"
    )
    code = (
        "import sys, warnings\n"
        "from valkey_operator.core.kubeloaders import import_loaders\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import_loaders()\n"
        "print(caught[0].category.__name__, caught[0].message)\n"
        "from kubernetes_asyncio import client\n"
        "print(client.V1Status.__name__)\n"
    )
    first = [str(tmp_path), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, first)))
    warned, whole = probe(code, env=env).splitlines()
    assert warned.startswith(
        f"RuntimeWarning kubernetes-asyncio {version('kubernetes_asyncio')} is not laid out as"
    )
    assert "cannot import name 'V1Status'" in warned and warned.endswith("importing it whole")
    assert whole == "V1Status"
