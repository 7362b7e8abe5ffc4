#!/usr/bin/env python3
"""Reference WebSocket server (Python, websockets): see ../PROTOCOL.md."""

import argparse
import asyncio
import os
import platform
import resource
import signal
import socket
import ssl
import struct
import sys
import time
import traceback

import websockets
from websockets.asyncio.server import broadcast, serve


def parse_ports(spec):
    ports = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        ports.extend(range(int(lo), int(hi or lo) + 1))
    return ports


async def serve_websockets(args, ctx, say, parent=None):
    """One server on every port. `say` prints a protocol line; a worker says it to its
    `parent` (a socket), which is also how it learns that the parent is gone."""
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
    if parent is None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.cancel)
    else:
        # The parent never writes: readable means it closed its end (it is stopping, or
        # gone), and so this worker ends.
        def parent_gone():
            loop.remove_reader(parent.fileno())
            stop.cancel()

        loop.add_reader(parent.fileno(), parent_gone)

    servers = [
        await serve(
            handler,
            args.host,
            port,
            compression=None,
            ping_interval=None,
            backlog=4096,
            ssl=ctx,
            reuse_port=parent is not None,
        )
        for port in parse_ports(args.ports)
    ]
    say(f"listening: {args.host}:{args.ports}")

    async def report():
        while True:
            await asyncio.sleep(2)
            say(f"connections: {len(clients)}")

    reporter = asyncio.create_task(report())
    try:
        await stop
    except asyncio.CancelledError:
        pass
    reporter.cancel()
    for s in servers:
        s.close()


def start_workers(args, ctx):
    """Forks the workers before any event loop; each serves every port (SO_REUSEPORT)
    and reports its lines over a socket pair. Returns [(pid, socket)] in the parent."""
    workers = []
    for _ in range(args.workers):
        mine, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            mine.close()
            for _, other in workers:
                other.close()
            # The parent ends its workers (a SIGTERM to the process group reaches both).
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)

            def say(line):
                theirs.sendall(f"{line}\n".encode())

            code = 0
            try:
                asyncio.run(serve_websockets(args, ctx, say, parent=theirs))
            except BaseException:
                traceback.print_exc()
                code = 1
            os._exit(code)
        theirs.close()
        workers.append((pid, mine))
    return workers


def exit_words(status):
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


async def supervise(args, workers):
    """The parent of `--workers N`: `listening:` once every worker listens, SIGUSR1 to
    every worker, their `connections:` summed; a worker that dies ends the server."""
    loop = asyncio.get_running_loop()
    counts = {pid: 0 for pid, _ in workers}
    listening = set()
    writers = {}
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(0))

    def forward_push():
        for pid, _ in workers:
            os.kill(pid, signal.SIGUSR1)

    loop.add_signal_handler(signal.SIGUSR1, forward_push)

    async def watch(i, pid, sock):
        reader, writers[pid] = await asyncio.open_connection(sock=sock)
        async for line in reader:
            key, _, value = line.decode().strip().partition(": ")
            if key == "listening":
                listening.add(pid)
                if len(listening) == len(workers):
                    print(f"listening: {args.host}:{args.ports}", flush=True)
            elif key == "connections":
                counts[pid] = int(value)
        # Its socket closed: the worker ended.
        writers[pid].close()
        _, status = os.waitpid(pid, 0)
        counts[pid] = 0
        if not stop.done():
            print(f"error: worker {i} (pid {pid}) ended: {exit_words(status)}", file=sys.stderr)
            stop.set_result(1)

    watchers = [asyncio.create_task(watch(i, pid, s)) for i, (pid, s) in enumerate(workers)]

    async def report():
        while True:
            await asyncio.sleep(2)
            # Counts follow `listening:`, as from one process.
            if len(listening) == len(workers):
                print(f"connections: {sum(counts.values())}", flush=True)

    reporter = asyncio.create_task(report())
    code = await stop
    reporter.cancel()
    # Their end reads EOF: each worker closes its listeners and exits.
    for writer in writers.values():
        if not writer.is_closing():
            writer.write_eof()
    await asyncio.wait(watchers, timeout=10)
    return code


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--host", default=os.environ.get("C1M_HOST", "127.0.0.1"))
    p.add_argument("--ports", default=os.environ.get("C1M_PORTS", "8000-8099"))
    p.add_argument("--tls-cert", default=os.environ.get("C1M_TLS_CERT") or None)
    p.add_argument("--tls-key", default=os.environ.get("C1M_TLS_KEY") or None)
    p.add_argument("--workers", type=int, default=int(os.environ.get("C1M_WORKERS") or 1))
    args = p.parse_args()
    # Half a TLS configuration is a mistake, not a request for plain ws.
    if bool(args.tls_cert) != bool(args.tls_key):
        given, missing = ("--tls-cert", "--tls-key") if args.tls_cert else ("--tls-key", "--tls-cert")
        print(f"error: {missing} missing ({given} given; TLS needs both)", file=sys.stderr)
        sys.exit(2)
    if args.workers < 1:
        print(f"error: --workers {args.workers}: give 1 or more", file=sys.stderr)
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

    if args.workers == 1:
        asyncio.run(serve_websockets(args, ctx, lambda line: print(line, flush=True)))
    else:
        sys.exit(asyncio.run(supervise(args, start_workers(args, ctx))))


if __name__ == "__main__":
    main()
