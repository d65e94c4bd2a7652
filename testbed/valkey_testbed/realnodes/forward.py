"""Forward the API server to the bridge: pods reach it at the gateway, the server stays on loopback.

python -m valkey_testbed.realnodes.forward LISTEN_HOST PORT TARGET_PORT

The `kubernetes` Service's endpoint is this listener (GATEWAY:PORT); kube-proxy
rewrites the Service address pods dial into it, and each connection is
spliced to 127.0.0.1:TARGET_PORT, TLS untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


async def _serve(host: str, port: int, target_port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pump(reader, upstream_writer), _pump(upstream_reader, writer))

    server = await asyncio.start_server(handle, host, port)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    host, port, target_port = argv[0], int(argv[1]), int(argv[2])
    asyncio.run(_serve(host, port, target_port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
