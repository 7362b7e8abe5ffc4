#!/usr/bin/env python3
"""A WebSocket server that completes the upgrade and then answers nothing: no pong, no
close reply. For the heartbeat tests: every ping a client sends it must count as missed.
With `--pong-delay S` it is slow instead of deaf: each ping is answered S seconds late,
and a close frame at once, so a client with a shorter --heartbeat-timeout counts every
pong late.

Prints `ping <monotonic seconds>` for each ping frame it reads, so a test can see how the
client spread its pings over the interval, and `listening` once it listens.
"""

import argparse
import asyncio
import base64
import hashlib
import signal
import sys
import time

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def frames(reader):
    """Yields (opcode, payload) of each client frame (masked, as RFC 6455 requires)."""
    while True:
        head = await reader.readexactly(2)
        op, n = head[0] & 0x0F, head[1] & 0x7F
        if n == 126:
            n = int.from_bytes(await reader.readexactly(2), "big")
        elif n == 127:
            n = int.from_bytes(await reader.readexactly(8), "big")
        mask = await reader.readexactly(4) if head[1] & 0x80 else b"\0\0\0\0"
        data = await reader.readexactly(n)
        yield op, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def frame(op, payload):
    """An unmasked server frame (payloads under 126 bytes: pings carry 8)."""
    return bytes([0x80 | op, len(payload)]) + payload


async def handle(reader, writer, pong_delay):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        key = next(
            line.split(b":", 1)[1].strip()
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        await writer.drain()
        async for op, data in frames(reader):
            if op == 0x9:
                print(f"ping {time.monotonic():.6f}", flush=True)
                if pong_delay is not None:
                    await asyncio.sleep(pong_delay)
                    writer.write(frame(0xA, data))
                    await writer.drain()
            elif op == 0x8 and pong_delay is not None:
                writer.write(frame(0x8, data[:2]))
                await writer.drain()
                break
    except (asyncio.IncompleteReadError, ConnectionError, StopIteration):
        pass
    finally:
        writer.close()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pong-delay", type=float, default=None)
    a = p.parse_args()
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, a.pong_delay), "127.0.0.1", a.port, backlog=1024
    )
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    print("listening", flush=True)
    await stop
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
