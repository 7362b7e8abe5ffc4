// Reference WebSocket server (Node.js, ws): see ../PROTOCOL.md.
'use strict';
const http = require('http');
const { WebSocketServer } = require('ws');

function arg(name, env, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : process.env[env] || dflt;
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

const ports = parsePorts(spec);
let listening = 0;
for (const port of ports) {
  const server = http.createServer((req, res) => res.writeHead(426).end());
  server.on('upgrade', (req, socket, head) => {
    socket.on('error', () => {});
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  server.listen({ host, port, backlog: 4096 }, () => {
    if (++listening === ports.length) console.log(`listening: ${host}:${spec}`);
  });
}

// Node reserves SIGUSR1 for its inspector; a listener takes it over.
process.on('SIGUSR1', () => {
  const stamp = Buffer.alloc(8);
  stamp.writeBigUInt64LE(BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)));
  for (const ws of wss.clients) ws.send(stamp, { binary: true });
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));

setInterval(() => console.log(`connections: ${wss.clients.size}`), 2000);
