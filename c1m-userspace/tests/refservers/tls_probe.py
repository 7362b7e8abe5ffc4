#!/usr/bin/env python3
"""Checks a reference server serving wss (reference-servers/PROTOCOL.md, `tls`).

Opens N wss connections over the ports (even ones capped at TLS 1.2, odd ones at least
TLS 1.3), trusting exactly --ca, echoes one binary message on each, then tries one
plain ws connection per port (each must fail). Prints one line of counts and holds the
connections until a line arrives on stdin; then sends SIGUSR1 to --pid, waits for one
8-byte stamp per connection and checks that no second frame follows it (the next frame
must be the echo of a marker sent after the stamp). Prints a second line of counts.
Every wait is bounded.
"""

import argparse
import asyncio
import os
import signal
import ssl
import struct
import sys
import time

from websockets.asyncio.client import connect


def context(ca, tls12):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    if tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    else:
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx


async def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--ports", required=True, help="comma-separated list: 20000,20001")
    p.add_argument("-n", type=int, default=20)
    p.add_argument("--pid", type=int, required=True, help="server PID to signal")
    p.add_argument("--ca", required=True, help="the server's certificate, the only one trusted")
    p.add_argument("--timeout", type=float, default=20.0)
    a = p.parse_args()
    ports = [int(p) for p in a.ports.split(",")]
    contexts = [context(a.ca, True), context(a.ca, False)]

    def opener(scheme, i, **kw):
        url = f"{scheme}://{a.host}:{ports[i % len(ports)]}/probe/{i}"
        return asyncio.wait_for(
            connect(url, compression=None, ping_interval=None, open_timeout=None, **kw),
            a.timeout,
        )

    conns = [await opener("wss", i, ssl=contexts[i % 2]) for i in range(a.n)]
    versions = [ws.transport.get_extra_info("ssl_object").version() for ws in conns]

    async def echo(ws, i):
        msg = struct.pack("<I", i) + os.urandom(60)
        await ws.send(msg)
        return await asyncio.wait_for(ws.recv(), a.timeout) == msg

    echoed = sum(await asyncio.gather(*(echo(ws, i) for i, ws in enumerate(conns))))

    refused = hung = plain_open = 0
    for i in range(len(ports)):
        try:
            ws = await opener("ws", i)
        except asyncio.TimeoutError:
            hung += 1
        except Exception:
            refused += 1
        else:
            plain_open += 1
            await ws.close()
    print(
        f"open={len(conns)} tls12={versions.count('TLSv1.2')} tls13={versions.count('TLSv1.3')} "
        f"echoed={echoed} plain_refused={refused} plain_open={plain_open} plain_hung={hung}",
        flush=True,
    )

    loop = asyncio.get_running_loop()
    try:
        go = await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.readline), a.timeout)
    except asyncio.TimeoutError:
        go = ""
    if not go:
        print("no go on stdin", flush=True)
        # The reader thread is still blocked in readline: do not wait for it.
        os._exit(1)
    sent_us = time.time_ns() // 1000
    os.kill(a.pid, signal.SIGUSR1)

    async def push(ws, i):
        msg = await asyncio.wait_for(ws.recv(), a.timeout)
        if not isinstance(msg, bytes) or len(msg) != 8:
            return "bad_frame"
        (stamp,) = struct.unpack("<Q", msg)
        # Taken after the signal was sent, and not from the future, to within a
        # millisecond: Node's wall clock is Date.now()'s whole milliseconds, pinned to its
        # monotonic clock, and 6 of 20 stamps read up to 1 ms before the signal on a
        # loaded box (2026-12-04).
        if not sent_us - 1000 <= stamp <= time.time_ns() // 1000:
            return "bad_stamp"
        marker = b"after the push " + struct.pack("<I", i)
        await ws.send(marker)
        return "ok" if await asyncio.wait_for(ws.recv(), a.timeout) == marker else "extra"

    results = await asyncio.gather(*(push(ws, i) for i, ws in enumerate(conns)),
                                   return_exceptions=True)
    for ws in conns:
        await ws.close()
    print(
        f"pushed={results.count('ok')} extra={results.count('extra')} "
        f"bad_frame={results.count('bad_frame')} bad_stamp={results.count('bad_stamp')} "
        f"failed={sum(isinstance(r, BaseException) for r in results)}",
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main())
