#!/usr/bin/env python3
"""An echo server c1m did not write, for the message-rate tests: Python `websockets`
echoing every data message as it came (text as text, binary as binary), or with --raw
plain TCP echoing every byte. Prints `listening` once it listens; SIGTERM ends it.
"""

import argparse
import asyncio
import signal
import sys

from websockets.asyncio.server import serve


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--raw", action="store_true", help="plain TCP echo")
    a = p.parse_args()
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
    echoed = 0

    async def ws_echo(ws):
        nonlocal echoed
        async for m in ws:
            await ws.send(m)
            echoed += 1

    async def raw_echo(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    if a.raw:
        server = await asyncio.start_server(raw_echo, "127.0.0.1", a.port, backlog=1024)
    else:
        server = await serve(
            ws_echo, "127.0.0.1", a.port, backlog=1024, ping_interval=None, max_queue=None
        )
    print("listening", flush=True)
    await stop
    server.close()
    print(f"echoed {echoed}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
