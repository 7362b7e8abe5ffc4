#!/usr/bin/env python3
"""Reference WebSocket server (Python, websockets): see ../PROTOCOL.md."""

import argparse
import asyncio
import os
import platform
import resource
import signal
import ssl
import struct
import sys
import time

import websockets
from websockets.asyncio.server import broadcast, serve


def parse_ports(spec):
    ports = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        ports.extend(range(int(lo), int(hi or lo) + 1))
    return ports


async def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--host", default=os.environ.get("C1M_HOST", "127.0.0.1"))
    p.add_argument("--ports", default=os.environ.get("C1M_PORTS", "8000-8099"))
    p.add_argument("--tls-cert", default=os.environ.get("C1M_TLS_CERT") or None)
    p.add_argument("--tls-key", default=os.environ.get("C1M_TLS_KEY") or None)
    args = p.parse_args()
    # Half a TLS configuration is a mistake, not a request for plain ws.
    if bool(args.tls_cert) != bool(args.tls_key):
        given, missing = ("--tls-cert", "--tls-key") if args.tls_cert else ("--tls-key", "--tls-cert")
        print(f"error: {missing} missing ({given} given; TLS needs both)", file=sys.stderr)
        sys.exit(2)
    print(
        f"version: runtime=python@{platform.python_version()} library=websockets@{websockets.__version__}",
        flush=True,
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    ctx = None
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        print("tls: on", flush=True)

    clients = set()

    async def handler(ws):
        clients.add(ws)
        try:
            async for message in ws:
                await ws.send(message)
        finally:
            clients.discard(ws)

    def push():
        stamp = struct.pack("<Q", time.time_ns() // 1000)
        broadcast(clients, stamp)

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, push)
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.cancel)

    servers = [
        await serve(
            handler, args.host, port, compression=None, ping_interval=None, backlog=4096, ssl=ctx
        )
        for port in parse_ports(args.ports)
    ]
    print(f"listening: {args.host}:{args.ports}", flush=True)

    async def report():
        while True:
            await asyncio.sleep(2)
            print(f"connections: {len(clients)}", flush=True)

    reporter = asyncio.create_task(report())
    try:
        await stop
    except asyncio.CancelledError:
        pass
    reporter.cancel()
    for s in servers:
        s.close()


if __name__ == "__main__":
    asyncio.run(main())
