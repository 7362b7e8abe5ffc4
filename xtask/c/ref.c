/* Minimal C reference for `cargo xtask bench`: the same workload as c1m with nothing
 * but epoll, so c1m's figures can be read as ratios measured in the same run.
 *
 *   ref server hold|ws PORT_LO PORT_HI PROCS
 *       PROCS workers listen on 127.0.0.1:PORT_LO..PORT_HI (SO_REUSEPORT). ws: answer
 *       c1m's upgrade request with c1m's 101 response bytes. stdin: "push ID START_NS"
 *       makes every worker write c1m's push frame (0x82, 24, id, start, write-time, u64
 *       BE) to all its connections at once. Prints "ready" once listening.
 *   ref client hold|ws N PORT_LO PORT_HI PROCS SRC_FIRST SRC_COUNT IN_FLIGHT OUT_DIR
 *       PROCS workers open N connections (c1m's request bytes in ws mode), IN_FLIGHT at
 *       once in all. Prints "open OPEN FAILED ELAPSED_NS" when every worker ramped, and
 *       "got ID COUNT LAST_NS" when every open connection had push ID; per-message and
 *       fan-out latencies (us, u32 pairs) go to OUT_DIR/<worker>-<ID>.lat.
 * Workers die with their parent (PR_SET_PDEATHSIG); the parent ends at stdin EOF. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 65536
#define FRAME 26

static uint64_t now_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* ---- SHA-1 and base64, for Sec-WebSocket-Accept (RFC 6455 section 4.2.2) ---- */
static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

/* One 64-byte block into the state. */
static void sha1_block(uint32_t h[5], const uint8_t *p) {
    uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999;
        else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1;
        else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
        else f = b ^ c ^ d, k = 0xCA62C1D6;
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d, d = c, c = rol(b, 30), b = a, a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

static void sha1(const uint8_t *msg, size_t len, uint8_t out[20]) {
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t full = len / 64 * 64, rest = len - full;
    for (size_t off = 0; off < full; off += 64) sha1_block(h, msg + off);
    /* Padding: 0x80, zeros, the bit length (big endian) at the end of the last block. */
    uint8_t tail[128] = {0};
    memcpy(tail, msg + full, rest);
    tail[rest] = 0x80;
    size_t blocks = rest < 56 ? 1 : 2;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) tail[blocks * 64 - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t b = 0; b < blocks; b++) sha1_block(h, tail + 64 * b);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(h[i] >> (24 - 8 * j));
}

static void b64(const uint8_t *in, size_t len, char *out) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < len ? in[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < len ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? t[v & 63] : '=';
    }
    out[o] = 0;
}

/* c1m's 101 answer (workload/ws/handshake.rs response_accept) for `key`. */
static int upgrade_response(const char *key, size_t klen, char *out) {
    char buf[128];
    uint8_t dig[20];
    char acc[32];
    if (klen > 64) return -1;
    memcpy(buf, key, klen);
    memcpy(buf + klen, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
    sha1((uint8_t *)buf, klen + 36, dig);
    b64(dig, 20, acc);
    return sprintf(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", acc);
}

static void set_int(int fd, int level, int name, int v) {
    if (setsockopt(fd, level, name, &v, sizeof v) < 0) die("setsockopt");
}

static int mode_ws;

/* ---------------------------------- server ---------------------------------- */
static uint8_t kind[MAXFD]; /* 0 free, 1 listener, 2 handshake, 3 open/held, 4 command pipe */

static void server_worker(int lo, int hi, int cmd, int report) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    for (int port = lo; port <= hi; port++) {
        int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        set_int(l, SOL_SOCKET, SO_REUSEADDR, 1);
        set_int(l, SOL_SOCKET, SO_REUSEPORT, 1);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
        if (bind(l, (void *)&a, sizeof a) < 0) die("bind");
        if (listen(l, 65535) < 0) die("listen");
        kind[l] = 1;
        ev.data.fd = l;
        epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    }
    kind[cmd] = 4;
    ev.data.fd = cmd;
    epoll_ctl(ep, EPOLL_CTL_ADD, cmd, &ev);
    if (write(report, "r\n", 2) != 2) die("report");
    static int open_fds[MAXFD];
    int nopen = 0;
    struct epoll_event evs[512];
    char buf[4096], resp[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (kind[fd] == 1) {
                for (int k = 0; k < 256; k++) {
                    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (c < 0) break;
                    if (c >= MAXFD) { close(c); continue; }
                    if (mode_ws) set_int(c, IPPROTO_TCP, TCP_NODELAY, 1);
                    kind[c] = mode_ws ? 2 : 3;
                    ev.data.fd = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                }
            } else if (kind[fd] == 4) {
                ssize_t r = read(fd, buf, sizeof buf - 1);
                if (r <= 0) exit(0);
                buf[r] = 0;
                unsigned long long id, start;
                if (sscanf(buf, "push %llu %llu", &id, &start) == 2) {
                    uint8_t f[FRAME] = {0x82, 24};
                    for (int b = 0; b < 8; b++) f[2 + b] = (uint8_t)(id >> (56 - 8 * b)), f[10 + b] = (uint8_t)(start >> (56 - 8 * b));
                    for (int k = 0; k < nopen; k++) {
                        uint64_t t = now_ns(CLOCK_REALTIME);
                        for (int b = 0; b < 8; b++) f[18 + b] = (uint8_t)(t >> (56 - 8 * b));
                        if (send(open_fds[k], f, FRAME, MSG_NOSIGNAL) != FRAME) { /* counted by the client */ }
                    }
                }
            } else {
                ssize_t r = read(fd, buf, sizeof buf - 1);
                if (r <= 0) { kind[fd] = 0; close(fd); continue; }
                if (kind[fd] != 2) continue;
                buf[r] = 0;
                /* One read holds the whole request on loopback; a split one is not minimal. */
                char *k = strstr(buf, "Sec-WebSocket-Key: ");
                char *e = k ? strstr(k, "\r\n") : NULL;
                if (!e || !strstr(buf, "\r\n\r\n")) { kind[fd] = 0; close(fd); continue; }
                int len = upgrade_response(k + 19, (size_t)(e - k - 19), resp);
                if (len < 0 || send(fd, resp, (size_t)len, MSG_NOSIGNAL) != len) { kind[fd] = 0; close(fd); continue; }
                kind[fd] = 3;
                open_fds[nopen++] = fd;
            }
        }
    }
}

/* ---------------------------------- client ---------------------------------- */
struct conn { uint8_t state; uint8_t len; };
static struct conn cs[MAXFD];

static void client_worker(int w, int procs, long n, int lo, int hi, uint32_t src0, int nsrc, int in_flight, const char *dir,
                          int report) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int nports = hi - lo + 1;
    long share = n / procs + (w < n % procs), next = 0, done = 0, opened = 0, failed = 0, pending = 0;
    char req[256], buf[65536];
    uint8_t key[16];
    char kb[32];
    struct epoll_event evs[512];
    uint32_t *lat = NULL;
    long got = 0;
    uint64_t cur_id = 0, last = 0;
    int ramped = 0;
    for (;;) {
        while (next < share && pending < in_flight) {
            long g = w + next * procs;
            next++;
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0 || fd >= MAXFD) { if (fd >= 0) close(fd); failed++; done++; continue; }
            if (mode_ws) set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
            if (nsrc > 0) {
                set_int(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1);
                struct sockaddr_in s = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(src0 + (uint32_t)((g / nports) % nsrc))};
                if (bind(fd, (void *)&s, sizeof s) < 0) die("bind source");
            }
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(lo + g % nports), .sin_addr.s_addr = htonl(0x7f000001)};
            if (connect(fd, (void *)&a, sizeof a) < 0 && errno != EINPROGRESS) { close(fd); failed++; done++; continue; }
            cs[fd].state = 1;
            struct epoll_event ev = {.events = EPOLLOUT, .data.fd = fd};
            epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
            pending++;
        }
        if (!ramped && done == share) {
            ramped = 1;
            int l = snprintf(buf, sizeof buf, "o %ld %ld\n", opened, failed);
            if (write(report, buf, (size_t)l) != l) die("report");
            lat = malloc(sizeof(uint32_t) * 2 * (size_t)(opened + 1));
        }
        int m = epoll_wait(ep, evs, 512, -1);
        for (int i = 0; i < m; i++) {
            int fd = evs[i].data.fd;
            struct conn *c = &cs[fd];
            if (c->state == 1) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err || (evs[i].events & (EPOLLERR | EPOLLHUP))) { close(fd); c->state = 0; pending--; failed++; done++; continue; }
                struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
                epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
                if (!mode_ws) { c->state = 3; pending--; opened++; done++; continue; }
                /* c1m's request bytes (handshake.rs request, host "localhost", path "/"). */
                for (int b = 0; b < 16; b++) key[b] = (uint8_t)rand();
                b64(key, 16, kb);
                int l = sprintf(req, "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", kb);
                if (send(fd, req, (size_t)l, MSG_NOSIGNAL) != l) { close(fd); c->state = 0; pending--; failed++; done++; continue; }
                c->state = 2;
                continue;
            }
            ssize_t r = read(fd, buf, sizeof buf);
            if (r <= 0) { close(fd); if (c->state == 2) { pending--; failed++; done++; } else if (c->state == 3) opened--; c->state = 0; continue; }
            if (c->state == 2) {
                if (r < 12 || memcmp(buf, "HTTP/1.1 101", 12) || !memmem(buf, (size_t)r, "\r\n\r\n", 4)) { close(fd); c->state = 0; pending--; failed++; done++; continue; }
                c->state = 3; pending--; opened++; done++;
                continue;
            }
            /* Push frames: 26 bytes each, possibly split across reads. */
            uint64_t now = now_ns(CLOCK_REALTIME);
            static uint8_t part[MAXFD][FRAME];
            for (ssize_t off = 0; off < r;) {
                size_t take = FRAME - c->len;
                if ((size_t)(r - off) < take) take = (size_t)(r - off);
                memcpy(part[fd] + c->len, buf + off, take);
                c->len += (uint8_t)take;
                off += (ssize_t)take;
                if (c->len < FRAME) break;
                c->len = 0;
                uint64_t id = 0, start = 0, wt = 0;
                for (int b = 0; b < 8; b++) id = id << 8 | part[fd][2 + b], start = start << 8 | part[fd][10 + b], wt = wt << 8 | part[fd][18 + b];
                if (id != cur_id) { cur_id = id; got = 0; }
                if (lat && got <= opened) {
                    lat[2 * got] = (uint32_t)((now > wt ? now - wt : 0) / 1000);
                    lat[2 * got + 1] = (uint32_t)((now > start ? now - start : 0) / 1000);
                }
                got++;
                last = now;
                if (got == opened) {
                    char path[512];
                    snprintf(path, sizeof path, "%s/%d-%llu.lat", dir, w, (unsigned long long)id);
                    FILE *f = fopen(path, "wb");
                    if (!f || fwrite(lat, sizeof(uint32_t) * 2, (size_t)got, f) != (size_t)got) die("latency file");
                    fclose(f);
                    int l = snprintf((char *)buf, 128, "g %llu %ld %llu\n", (unsigned long long)id, got, (unsigned long long)last);
                    if (write(report, buf, (size_t)l) != l) die("report");
                }
            }
        }
    }
}

/* ------------------------------------ main ------------------------------------ */
int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: see the head of ref.c\n"); return 2; }
    int server = !strcmp(argv[1], "server");
    mode_ws = !strcmp(argv[2], "ws");
    int procs = server ? atoi(argv[5]) : atoi(argv[6]);
    if (!server && argc < 11) { fprintf(stderr, "usage: see the head of ref.c\n"); return 2; }
    int rep[2];
    if (pipe(rep) < 0) die("pipe");
    int *cmds = calloc((size_t)procs, sizeof(int));
    uint64_t t0 = now_ns(CLOCK_MONOTONIC);
    pid_t parent = getpid();
    for (int w = 0; w < procs; w++) {
        int cp[2];
        if (pipe(cp) < 0) die("pipe");
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) exit(0);
            close(cp[1]);
            close(rep[0]);
            srand((unsigned)(w * 7919 + 1));
            if (server) server_worker(atoi(argv[3]), atoi(argv[4]), cp[0], rep[1]);
            else {
                uint32_t src0 = ntohl(inet_addr(argv[7]));
                int inflight = atoi(argv[9]) / procs;
                client_worker(w, procs, atol(argv[3]), atoi(argv[4]), atoi(argv[5]), src0, atoi(argv[8]), inflight > 0 ? inflight : 1, argv[10], rep[1]);
            }
            exit(0);
        }
        close(cp[0]);
        cmds[w] = cp[1];
    }
    close(rep[1]);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = 0};
    epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev);
    ev.data.fd = rep[0];
    epoll_ctl(ep, EPOLL_CTL_ADD, rep[0], &ev);
    int ready = 0, ramped = 0;
    long open = 0, failed = 0;
    long got[64] = {0};
    int got_workers[64] = {0};
    unsigned long long last[64] = {0};
    char line[4096], acc[8192];
    size_t accn = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (;;) {
        struct epoll_event e;
        if (epoll_wait(ep, &e, 1, -1) < 1) continue;
        if (e.data.fd == 0) {
            ssize_t r = read(0, line, sizeof line);
            if (r <= 0) break;
            for (int w = 0; w < procs; w++)
                if (write(cmds[w], line, (size_t)r) != r) die("command");
            continue;
        }
        ssize_t r = read(rep[0], acc + accn, sizeof acc - accn - 1);
        if (r <= 0) break;
        accn += (size_t)r;
        acc[accn] = 0;
        char *s = acc, *nl;
        while ((nl = strchr(s, '\n'))) {
            *nl = 0;
            long a, b;
            unsigned long long id, t;
            if (s[0] == 'r' && ++ready == procs) printf("ready\n");
            if (sscanf(s, "o %ld %ld", &a, &b) == 2) {
                open += a, failed += b;
                if (++ramped == procs) printf("open %ld %ld %llu\n", open, failed, (unsigned long long)(now_ns(CLOCK_MONOTONIC) - t0));
            }
            if (sscanf(s, "g %llu %ld %llu", &id, &a, &t) == 3 && id < 64) {
                got[id] += a;
                if (t > last[id]) last[id] = t;
                if (++got_workers[id] == procs) printf("got %llu %ld %llu\n", id, got[id], last[id]);
            }
            s = nl + 1;
        }
        accn = (size_t)(acc + accn - s);
        memmove(acc, s, accn);
    }
    return 0;
}
