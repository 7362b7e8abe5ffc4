// Reference WebSocket server (Node.js, ws): see ../PROTOCOL.md.
'use strict';
const cluster = require('cluster');
const fs = require('fs');
const http = require('http');
const https = require('https');
const tls = require('tls');
const { WebSocketServer } = require('ws');

function arg(name, env, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : process.env[env] || dflt;
}

// Half a TLS configuration is a mistake, not a request for plain ws.
const tlsCert = arg('--tls-cert', 'C1M_TLS_CERT', '');
const tlsKey = arg('--tls-key', 'C1M_TLS_KEY', '');
if (!tlsCert !== !tlsKey) {
  const [given, missing] = tlsCert ? ['--tls-cert', '--tls-key'] : ['--tls-key', '--tls-cert'];
  console.error(`error: ${missing} missing (${given} given; TLS needs both)`);
  process.exit(2);
}
const workersArg = arg('--workers', 'C1M_WORKERS', '1');
const workers = Number(workersArg);
if (!Number.isInteger(workers) || workers < 1) {
  console.error(`error: --workers ${workersArg}: give 1 or more`);
  process.exit(2);
}

function parsePorts(spec) {
  const ports = [];
  for (const part of spec.split(',')) {
    const [lo, hi] = part.split('-').map(Number);
    for (let p = lo; p <= (hi || lo); p++) ports.push(p);
  }
  return ports;
}

// With --workers N the primary (the PID started) speaks the protocol; its workers serve.
const say = cluster.isWorker ? () => {} : (line) => console.log(line);

say(`version: runtime=node@${process.versions.node} library=ws@${require('ws/package.json').version}`);

const host = arg('--host', 'C1M_HOST', '127.0.0.1');
const spec = arg('--ports', 'C1M_PORTS', '8000-8099');
const ports = parsePorts(spec);

let tlsOptions = null;
if (tlsCert) {
  tlsOptions = { cert: fs.readFileSync(tlsCert), key: fs.readFileSync(tlsKey), minVersion: 'TLSv1.2' };
  // Parses both and checks that they match now, before `tls: on`, not at the first client.
  tls.createSecureContext(tlsOptions);
  say('tls: on');
}

if (workers > 1 && cluster.isPrimary) {
  supervise();
} else {
  serve();
}

// node:cluster (Node 20's `net` has no SO_REUSEPORT; `reusePort` came in 22.12): the
// primary opens every listening socket and shares it; each worker accepts on it itself
// (SCHED_NONE). The default round-robin has the primary accept every connection and pass
// it on over IPC: one process for all accepts, 826 conn/s at 1M (the seeds' plan asks
// 10,000/s), and the ramp stalled at 901,612 with the primary behind.
function supervise() {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  const counts = new Map();
  let listening = 0;
  let stopping = false;
  for (let i = 0; i < workers; i++) counts.set(cluster.fork().id, 0);
  cluster.on('listening', () => {
    if (++listening === workers * ports.length) console.log(`listening: ${host}:${spec}`);
  });
  cluster.on('message', (w, n) => counts.set(w.id, n));
  const alive = () => Object.keys(cluster.workers).length;
  cluster.on('exit', (w, code, signal) => {
    counts.delete(w.id);
    if (!stopping) {
      const how = signal ? `killed by ${signal}` : `exit status ${code}`;
      console.error(`error: worker ${w.id} (pid ${w.process.pid}) ended: ${how}`);
      stop(1);
    }
    if (alive() === 0) process.exit(process.exitCode);
  });
  // A worker ends when its IPC channel closes, which the primary's exit does too.
  function stop(code) {
    stopping = true;
    process.exitCode = code;
    for (const w of Object.values(cluster.workers)) w.process.disconnect();
    setTimeout(() => process.exit(code), 10_000).unref();
  }
  process.on('SIGUSR1', () => {
    for (const w of Object.values(cluster.workers)) w.process.kill('SIGUSR1');
  });
  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => stop(0));
  setInterval(() => {
    // Counts follow `listening:`, as from one process.
    if (listening < workers * ports.length) return;
    let sum = 0;
    for (const n of counts.values()) sum += n;
    console.log(`connections: ${sum}`);
  }, 2000);
}

function serve() {
  // One WebSocket server for every port: each HTTP listener hands it its upgrades.
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: true });
  wss.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
    ws.on('error', () => {});
  });

  let listening = 0;
  for (const port of ports) {
    const answer = (req, res) => res.writeHead(426).end();
    const server = tlsOptions ? https.createServer(tlsOptions, answer) : http.createServer(answer);
    server.on('upgrade', (req, socket, head) => {
      socket.on('error', () => {});
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
    });
    server.listen({ host, port, backlog: 4096 }, () => {
      if (++listening === ports.length) say(`listening: ${host}:${spec}`);
    });
  }

  // Node reserves SIGUSR1 for its inspector; a listener takes it over. The wall clock is
  // pinned at each push, not once: this box's wall clock ran 0.5% ahead of the monotonic
  // one (15 ms in 3 s), so a pin from the start put stamps seconds before the signal.
  process.on('SIGUSR1', () => {
    const stamp = Buffer.alloc(8);
    stamp.writeBigUInt64LE(process.hrtime.bigint() / 1000n + pinWallToMono());
    for (const ws of wss.clients) ws.send(stamp, { binary: true });
  });

  if (cluster.isWorker) {
    // The primary ends its workers (a SIGTERM to the process group reaches both).
    for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => {});
    setInterval(() => process.send(wss.clients.size), 2000);
  } else {
    for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
    setInterval(() => console.log(`connections: ${wss.clients.size}`), 2000);
  }
}

// The wall clock in µs. performance.timeOrigin + performance.now() was measured up to
// 3.4 ms behind it (stamps from before the signal): instead the monotonic clock is pinned
// to the wall clock at an instant Date.now() turns to its next millisecond. The edge falls
// between two monotonic readings; the narrowest of up to 200 tries wins (taking the last
// try on a loaded box once pinned it milliseconds off: stamps from before the signal, CI).
// Up to 200 tries, as many as a pin at start took: on a loaded box 20 left the best
// window wide enough to put a push's stamps before its signal (CI).
function pinWallToMono() {
  let best = null;
  for (let tries = 0; tries < 200; tries++) {
    const start = Date.now();
    let now = start;
    let before = process.hrtime.bigint();
    let after = before;
    while (now === start) {
      before = after;
      now = Date.now();
      after = process.hrtime.bigint();
    }
    const window = after - before;
    if (best === null || window < best.window) {
      best = { window, offset: BigInt(now) * 1000n - (before + after) / 2000n };
    }
    if (window <= 5_000n) break;
  }
  return best.offset;
}
