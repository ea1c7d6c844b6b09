"""A TCP relay: ``python relay.py LISTEN_HOST:LISTEN_PORT=TARGET_HOST:TARGET_PORT ...``.

The topology test's hosts live in network namespaces; PostgreSQL, Redis and the S3
server listen on 127.0.0.1 of the machine only. This relay listens on the machine's end
of each namespace's veth pair and forwards to those loopback services, so a host reaches
them exactly as it would reach a database server on its network. Prints ``ready`` once
every listener is bound; runs until it is terminated.
"""

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except (ConnectionError, OSError):
            pass


def _handler(target_host: str, target_port: int):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                target_host, target_port
            )
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    return handle


async def main(routes: list[str]) -> None:
    servers = []
    for route in routes:
        listen, target = route.split("=")
        listen_host, listen_port = listen.rsplit(":", 1)
        target_host, target_port = target.rsplit(":", 1)
        servers.append(
            await asyncio.start_server(
                _handler(target_host, int(target_port)), listen_host, int(listen_port)
            )
        )
    print("ready", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
