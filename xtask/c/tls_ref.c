/* Minimal OpenSSL reference for `cargo xtask bench tls`: TLS 1.3 handshakes over
 * loopback with nothing else, so c1m's TLS setup rate reads as a ratio to it.
 *
 *   tls_ref server CERT KEY PROCS full|resume
 *       PROCS workers accept on one listener at 127.0.0.1 (an ephemeral port), each
 *       connection: TLS 1.3 handshake (X25519 only), one byte written, close_notify,
 *       close. full: no tickets issued; resume: one ticket per handshake. Prints
 *       "ready PORT"; on stdin EOF or any line it ends its workers and prints
 *       "server HANDSHAKES USER_S SYS_S" (its workers' CPU, getrusage).
 *   tls_ref client CA PORT PROCS N full|resume
 *       PROCS workers do N handshakes in all, one connection at a time each: connect,
 *       handshake (the cert verified against CA, host name localhost), read the byte,
 *       close_notify, close. resume: each offers the ticket of its previous handshake. Prints
 *       "client OK FAILED RESUMED ELAPSED_NS USER_S SYS_S".
 * Workers die with their parent (PR_SET_PDEATHSIG). Every socket has a 10 s timeout,
 * so a lost peer ends a worker instead of hanging it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXPROCS 64

/* Counters the workers share with their parent (MAP_SHARED). */
struct shared {
    long ok, failed, resumed;
};

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "tls_ref: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static void timeouts(int fd) {
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* TLS 1.3 only, X25519 only: the handshake the floor counts. */
static SSL_CTX *context(int server) {
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) die("SSL_CTX_new");
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION)) die("min version");
    if (!SSL_CTX_set1_groups_list(ctx, "X25519")) die("groups");
    return ctx;
}

static void server_worker(SSL_CTX *ctx, int lfd, struct shared *sh) {
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;
        timeouts(fd);
        SSL *ssl = SSL_new(ctx);
        if (!ssl) die("SSL_new");
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) == 1 && SSL_write(ssl, "x", 1) == 1) {
            __atomic_add_fetch(&sh->ok, 1, __ATOMIC_RELAXED);
            SSL_shutdown(ssl);
        } else {
            __atomic_add_fetch(&sh->failed, 1, __ATOMIC_RELAXED);
            ERR_clear_error();
        }
        SSL_free(ssl);
        close(fd);
    }
}

static void client_worker(SSL_CTX *ctx, int port, long n, int resume, struct shared *sh) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    SSL_SESSION *last = NULL;
    for (long i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        timeouts(fd);
        int ok = 0;
        SSL *ssl = NULL;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            ssl = SSL_new(ctx);
            if (!ssl) die("SSL_new");
            SSL_set_fd(ssl, fd);
            SSL_set_tlsext_host_name(ssl, "localhost");
            SSL_set1_host(ssl, "localhost");
            if (resume && last) SSL_set_session(ssl, last);
            char b;
            /* The read also takes the ticket, which TLS 1.3 sends after the handshake. */
            if (SSL_connect(ssl) == 1 && SSL_read(ssl, &b, 1) == 1) {
                ok = 1;
                if (SSL_session_reused(ssl))
                    __atomic_add_fetch(&sh->resumed, 1, __ATOMIC_RELAXED);
                if (resume) {
                    SSL_SESSION *s = SSL_get1_session(ssl);
                    if (s && SSL_SESSION_is_resumable(s)) {
                        SSL_SESSION_free(last);
                        last = s;
                    } else {
                        SSL_SESSION_free(s);
                    }
                }
                /* close_notify: freed without it, OpenSSL marks the session not
                 * resumable (a connection cut short may have been tampered with). */
                SSL_shutdown(ssl);
            }
        }
        __atomic_add_fetch(ok ? &sh->ok : &sh->failed, 1, __ATOMIC_RELAXED);
        if (!ok) ERR_clear_error();
        SSL_free(ssl);
        close(fd);
    }
    SSL_SESSION_free(last);
}

/* Starts `procs` workers running `work`; returns how many started. */
static int spawn(int procs, pid_t *pids, void (*work)(int, void *), void *arg) {
    int started = 0;
    for (int w = 0; w < procs; w++) {
        pid_t p = fork();
        if (p < 0) break;
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() == 1) _exit(1);
            work(w, arg);
            _exit(0);
        }
        pids[started++] = p;
    }
    return started;
}

struct job {
    SSL_CTX *ctx;
    int fd_or_port, procs, resume;
    long n;
    struct shared *sh;
};

static void server_job(int w, void *arg) {
    (void)w;
    struct job *j = arg;
    server_worker(j->ctx, j->fd_or_port, j->sh);
}

static void client_job(int w, void *arg) {
    struct job *j = arg;
    long share = j->n / j->procs + (w < j->n % j->procs ? 1 : 0);
    client_worker(j->ctx, j->fd_or_port, share, j->resume, j->sh);
}

static void children_cpu(double *user, double *sys) {
    struct rusage r;
    getrusage(RUSAGE_CHILDREN, &r);
    *user = r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6;
    *sys = r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
}

static int usage(void) {
    fprintf(stderr,
            "usage: tls_ref server CERT KEY PROCS full|resume\n"
            "       tls_ref client CA PORT PROCS N full|resume\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    int server = !strcmp(argv[1], "server");
    if (server ? argc != 6 : (argc != 7 || strcmp(argv[1], "client"))) return usage();
    int procs = atoi(argv[4]);
    const char *mode = argv[server ? 5 : 6];
    if (procs < 1 || procs > MAXPROCS) return usage();
    if (strcmp(mode, "full") && strcmp(mode, "resume")) return usage();
    int resume = !strcmp(mode, "resume");
    signal(SIGPIPE, SIG_IGN);

    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) die("mmap");
    memset(sh, 0, sizeof *sh);
    pid_t pids[MAXPROCS];
    struct job j = {.procs = procs, .resume = resume, .sh = sh};

    if (server) {
        j.ctx = context(1);
        if (SSL_CTX_use_certificate_chain_file(j.ctx, argv[2]) != 1) die("certificate");
        if (SSL_CTX_use_PrivateKey_file(j.ctx, argv[3], SSL_FILETYPE_PEM) != 1) die("key");
        /* full: no ticket at all, so each handshake is the full one and nothing more. */
        SSL_CTX_set_num_tickets(j.ctx, resume ? 1 : 0);
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096) ||
            getsockname(lfd, (struct sockaddr *)&a, &len))
            die("listen");
        j.fd_or_port = lfd;
        int started = spawn(procs, pids, server_job, &j);
        if (started != procs) die("fork");
        printf("ready %d\n", ntohs(a.sin_port));
        fflush(stdout);
        char line[64];
        (void)fgets(line, sizeof line, stdin);
        for (int w = 0; w < started; w++) kill(pids[w], SIGTERM);
        for (int w = 0; w < started; w++) waitpid(pids[w], NULL, 0);
        double user, sys;
        children_cpu(&user, &sys);
        printf("server %ld %.3f %.3f\n", sh->ok, user, sys);
        return 0;
    }

    j.ctx = context(0);
    if (SSL_CTX_load_verify_locations(j.ctx, argv[2], NULL) != 1) die("CA");
    SSL_CTX_set_verify(j.ctx, SSL_VERIFY_PEER, NULL);
    /* Sessions are kept by hand (SSL_get1_session), not in the context's cache. */
    SSL_CTX_set_session_cache_mode(j.ctx, SSL_SESS_CACHE_OFF);
    j.fd_or_port = atoi(argv[3]);
    j.n = atol(argv[5]);
    if (j.n < 1 || j.fd_or_port < 1) return usage();
    uint64_t t0 = now_ns();
    int started = spawn(procs, pids, client_job, &j);
    for (int w = 0; w < started; w++) waitpid(pids[w], NULL, 0);
    uint64_t elapsed = now_ns() - t0;
    if (started != procs) die("fork");
    double user, sys;
    children_cpu(&user, &sys);
    printf("client %ld %ld %ld %llu %.3f %.3f\n", sh->ok, sh->failed, sh->resumed,
           (unsigned long long)elapsed, user, sys);
    return 0;
}
