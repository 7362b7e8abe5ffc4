#!/usr/bin/env python3
"""Checks a reference server (reference-servers/PROTOCOL.md) from the client side.

Opens N WebSocket connections over the ports, echoes one text and one binary message
on each, sends SIGUSR1 to the server's PID, then waits for one 8-byte little-endian
µs timestamp per connection. Prints one line of counts; every wait is bounded.
"""

import argparse
import asyncio
import os
import signal
import struct
import sys
import time

from websockets.asyncio.client import connect


async def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--ports", required=True, help="comma-separated list: 20000,20001")
    p.add_argument("-n", type=int, default=200)
    p.add_argument("--pid", type=int, required=True, help="server PID to signal")
    p.add_argument("--timeout", type=float, default=20.0)
    a = p.parse_args()
    ports = [int(p) for p in a.ports.split(",")]
    conns = [
        await asyncio.wait_for(
            connect(f"ws://{a.host}:{ports[i % len(ports)]}/probe/{i}", compression=None,
                    ping_interval=None),
            a.timeout,
        )
        for i in range(a.n)
    ]

    async def echo(ws, i):
        ok = 0
        for msg in (f"text {i}", struct.pack("<I", i) * 3):
            await ws.send(msg)
            if await asyncio.wait_for(ws.recv(), a.timeout) == msg:
                ok += 1
        return ok == 2

    echoed = sum(await asyncio.gather(*(echo(ws, i) for i, ws in enumerate(conns))))
    sent_us = time.time_ns() // 1000
    os.kill(a.pid, signal.SIGUSR1)

    why_bad = []

    async def push(ws):
        msg = await asyncio.wait_for(ws.recv(), a.timeout)
        if not isinstance(msg, bytes) or len(msg) != 8:
            why_bad.append(f"a frame of {len(msg)} {type(msg).__name__}")
            return "bad"
        (stamp,) = struct.unpack("<Q", msg)
        now_us = time.time_ns() // 1000
        # Taken after the signal was sent, and not from the future, to within a
        # millisecond (Node's wall clock is Date.now()'s whole milliseconds: see
        # tls_probe.py).
        if sent_us - 1000 <= stamp <= now_us:
            return "ok"
        why_bad.append(f"stamp {stamp - sent_us} µs after the signal, received {now_us - sent_us} µs after it")
        return "bad"

    results = await asyncio.gather(*(push(ws) for ws in conns), return_exceptions=True)
    pushed = sum(r == "ok" for r in results)
    bad = sum(r == "bad" for r in results)
    for why in sorted(set(why_bad))[:5]:
        print(f"bad: {why}", file=sys.stderr)
    for ws in conns:
        await ws.close()
    print(f"connected={len(conns)} echoed={echoed} pushed={pushed} bad={bad}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
