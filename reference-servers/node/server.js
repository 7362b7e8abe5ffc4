// Reference WebSocket server (Node.js, ws): see ../PROTOCOL.md.
'use strict';
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

function parsePorts(spec) {
  const ports = [];
  for (const part of spec.split(',')) {
    const [lo, hi] = part.split('-').map(Number);
    for (let p = lo; p <= (hi || lo); p++) ports.push(p);
  }
  return ports;
}

console.log(`version: runtime=node@${process.versions.node} library=ws@${require('ws/package.json').version}`);

const host = arg('--host', 'C1M_HOST', '127.0.0.1');
const spec = arg('--ports', 'C1M_PORTS', '8000-8099');

// One WebSocket server for every port: each HTTP listener hands it its upgrades.
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: true });
wss.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
  ws.on('error', () => {});
});

let tlsOptions = null;
if (tlsCert) {
  tlsOptions = { cert: fs.readFileSync(tlsCert), key: fs.readFileSync(tlsKey), minVersion: 'TLSv1.2' };
  // Parses both and checks that they match now, before `tls: on`, not at the first client.
  tls.createSecureContext(tlsOptions);
  console.log('tls: on');
}

const ports = parsePorts(spec);
let listening = 0;
for (const port of ports) {
  const answer = (req, res) => res.writeHead(426).end();
  const server = tlsOptions ? https.createServer(tlsOptions, answer) : http.createServer(answer);
  server.on('upgrade', (req, socket, head) => {
    socket.on('error', () => {});
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  server.listen({ host, port, backlog: 4096 }, () => {
    if (++listening === ports.length) console.log(`listening: ${host}:${spec}`);
  });
}

// The wall clock in µs. performance.timeOrigin + performance.now() was measured up to
// 3.4 ms behind it (stamps from before the signal): instead the monotonic clock is pinned
// to the wall clock at an instant Date.now() turns to its next millisecond. The edge falls
// between two monotonic readings; the narrowest of up to 200 tries wins (taking the last
// try on a loaded box once pinned it milliseconds off: stamps from before the signal, CI).
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
const wallMinusMono = pinWallToMono();

// Node reserves SIGUSR1 for its inspector; a listener takes it over.
process.on('SIGUSR1', () => {
  const stamp = Buffer.alloc(8);
  stamp.writeBigUInt64LE(process.hrtime.bigint() / 1000n + wallMinusMono);
  for (const ws of wss.clients) ws.send(stamp, { binary: true });
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));

setInterval(() => console.log(`connections: ${wss.clients.size}`), 2000);
