#!/usr/bin/env python3
"""A small WebSocket server c1m did not write, for the bring-your-own-server tests.

Any path upgrades. Pushes, by option: a broadcast of the time on SIGUSR1, a broadcast
on its own schedule (--every), or never. Prints `connections: N` every 2 s. Hostile
options: --mute accepts connections and never answers a byte; --spam MB writes that
many megabytes of numbered lines to stdout and to stderr before it listens.
"""

import argparse
import asyncio
import json
import resource
import signal
import struct
import sys
import time

from websockets.asyncio.server import broadcast, serve


def stamp(fmt):
    now_ns = time.time_ns()
    if fmt == "u64le-us":
        return struct.pack("<Q", now_ns // 1000)
    if fmt == "text-ms":
        return str(now_ns // 1_000_000)
    if fmt == "json":
        return json.dumps({"ts": now_ns // 1000, "kind": "tick"})
    raise SystemExit(f"unknown --format {fmt}")


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ports", default="9000", help="comma-separated")
    p.add_argument("--format", default="u64le-us")
    p.add_argument("--on-signal", action="store_true", help="broadcast on SIGUSR1")
    p.add_argument("--every", type=float, default=0, help="broadcast every N s")
    p.add_argument("--nofile", type=int, default=0, help="lower RLIMIT_NOFILE to N")
    p.add_argument("--mute", action="store_true", help="accept, never answer")
    p.add_argument("--spam", type=int, default=0, help="MB of lines to stdout and stderr")
    a = p.parse_args()
    if a.nofile:
        resource.setrlimit(resource.RLIMIT_NOFILE, (a.nofile, a.nofile))
    for name, out in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        lines = a.spam * 1_000_000 // 46
        for i in range(lines):
            out.write(f"spam {name} line {i:>12} of {lines:>12}\n")
        if lines:
            out.write(f"spam {name} done\n")
        out.flush()
    if a.mute:
        held = []

        async def hold(reader, writer):
            held.append(writer)
            await asyncio.Event().wait()

        servers = [
            await asyncio.start_server(hold, "127.0.0.1", int(port), backlog=1024)
            for port in a.ports.split(",")
        ]
        stop = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
        print(f"mute on {a.ports}", flush=True)
        await stop
        return
    clients = set()

    async def handler(ws):
        clients.add(ws)
        try:
            async for _ in ws:
                pass
        finally:
            clients.discard(ws)

    def push():
        broadcast(clients, stamp(a.format))

    loop = asyncio.get_running_loop()
    if a.on_signal:
        loop.add_signal_handler(signal.SIGUSR1, push)
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
    servers = [
        await serve(handler, "127.0.0.1", int(port), backlog=1024, ping_interval=None)
        for port in a.ports.split(",")
    ]

    async def report():
        while True:
            print(f"connections: {len(clients)}", flush=True)
            await asyncio.sleep(2)

    async def schedule():
        while a.every > 0:
            await asyncio.sleep(a.every)
            push()

    tasks = [asyncio.create_task(report()), asyncio.create_task(schedule())]
    await stop
    for t in tasks:
        t.cancel()
    for s in servers:
        s.close()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
