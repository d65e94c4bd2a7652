"""The kubelet process: `python -m valkey_testbed.kubelet --state-dir DIR --nodes N`.

`python -m valkey_testbed up` starts it in the background (recorded
in state.json, so `down` stops it); it uses the state dir's admin kubeconfig,
serves its control channel at DIR/kubelet/control.sock and, on SIGTERM,
stops every pod process before exiting.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from kubernetes_asyncio import client, config

from valkey_operator.core.client import Client
from valkey_operator.core.logging import configure_logging
from valkey_operator.core.rest import RestClient
from valkey_testbed.kubelet.control import ControlServer, socket_path
from valkey_testbed.kubelet.kubelet import Kubelet


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m valkey_testbed.kubelet", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--state-dir", type=Path, required=True, help="the test bed's state directory")
    parser.add_argument("--kubeconfig", type=Path, help="default: STATE_DIR/kubeconfig")
    parser.add_argument("--nodes", type=int, default=3, help="how many nodes to register")
    parser.add_argument("--zones", default="a,b,c", help="zones, assigned to nodes round-robin")
    parser.add_argument(
        "--sync-delay",
        type=float,
        default=10.0,
        help="seconds before a changed ConfigMap/Secret reaches volumes",
    )
    parser.add_argument("--backoff-base", type=float, default=10.0, help="first restart backoff, seconds")
    parser.add_argument("--backoff-max", type=float, default=300.0, help="restart backoff cap, seconds")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return parser


def _api_endpoint(kubeconfig: Path) -> tuple[str, int]:
    """Host and port of the API server, for the pods' KUBERNETES_SERVICE_HOST/PORT."""
    loaded = yaml.safe_load(kubeconfig.read_text())
    server = urlsplit(loaded["clusters"][0]["cluster"]["server"])
    return server.hostname or "127.0.0.1", server.port or 443


async def run(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir.resolve()
    kubeconfig: Path = args.kubeconfig or state_dir / "kubeconfig"
    host, port = _api_endpoint(kubeconfig)
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        kubelet = Kubelet(
            Client(RestClient(api), field_manager="testbed-kubelet"),
            nodes=args.nodes,
            zones=tuple(z for z in args.zones.split(",") if z),
            sync_delay=args.sync_delay,
            state_dir=state_dir,
            api_host=host,
            api_port=port,
            backoff_base=args.backoff_base,
            backoff_max=args.backoff_max,
        )
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        await kubelet.start()
        server = ControlServer(kubelet, socket_path(state_dir))
        await server.start()
        try:
            await stopping.wait()
        finally:
            await server.stop()
            await kubelet.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging("json", args.log_level)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
