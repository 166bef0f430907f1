/*
 * loadgen: one load generator for three cache protocols over a Unix socket.
 *
 * The point is a fair comparison: halcyond (newline-delimited JSON-RPC 2.0),
 * Redis (RESP) and memcached (text protocol) are driven by exactly the same
 * client loop; only the few functions that format a request and frame a reply
 * differ. Each connection runs on its own thread and works in batches: it
 * queues `--pipeline` requests, writes them, and reads until that many replies
 * have been framed. The time of one batch (first byte written to last reply
 * read) is the latency sample, so with --pipeline 1 it is the round trip of
 * one request.
 *
 * Output: one line of key=value pairs (see usage()).
 *
 * Build: cc -O2 -pthread -o loadgen loadgen.c   (Benchmarks/loadgen/build.sh)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum proto { P_HALCYON, P_REDIS, P_MEMCACHED };
enum op { OP_GET, OP_SET, OP_MIXED, OP_MGET, OP_INCR, OP_PING };
enum req { R_GET, R_SET, R_EVICT, R_MGET, R_INCR, R_PING };

/* Outcome of one framed reply. */
enum status { S_OK, S_HIT, S_MISS, S_ERROR };

static struct {
    enum proto proto;
    const char *socket_path;
    enum op op;
    int conns;
    int pipeline;
    double seconds;
    long requests;       /* 0: run for `seconds` */
    double warmup;
    int value_size;
    long keys;
    int prefill;
    int evict_first;     /* halcyon: drop every key from the memory tier before each round */
    int rounds;
    int sequential;      /* each connection walks its own slice of the key space in order */
    int mixed_set_pct;
    const char *configure;   /* halcyon: params object of connection.configure */
    const char *get_params;  /* halcyon: extra members for cache.get params */
    const char *set_params;  /* halcyon: extra members for cache.set params */
    const char *prefill_params; /* halcyon: extra members for the prefill's cache.set params */
    const char *key_prefix;
    const char *label;
    int batch_keys;      /* mget: keys per request (cache.getMany / MGET) */
} opt = {
    .proto = P_HALCYON, .socket_path = NULL, .op = OP_GET, .conns = 1, .pipeline = 1,
    .seconds = 3.0, .requests = 0, .warmup = 0.5, .value_size = 100, .keys = 10000,
    .prefill = 1, .evict_first = 0, .rounds = 1, .sequential = 0, .mixed_set_pct = 10,
    .configure = NULL, .get_params = NULL, .set_params = NULL, .prefill_params = NULL, .key_prefix = "key:",
    .label = NULL, .batch_keys = 100,
};

static char *value_bytes;  /* opt.value_size printable bytes, no JSON escaping needed */

/* 0 warm-up, 1 measuring, 2 stop: written by the main thread, read by workers. */
static _Atomic int phase;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "loadgen: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- buffers */

typedef struct {
    char *p;
    size_t len, cap, off; /* off: bytes already written (out) or consumed (in) */
} buf_t;

static void buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + extra) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) die("out of memory");
    b->cap = cap;
}

static void buf_append(buf_t *b, const char *s, size_t n) {
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void buf_printf(buf_t *b, const char *fmt, ...) {
    for (;;) {
        size_t room = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) die("vsnprintf failed");
        if ((size_t)n < room) { b->len += (size_t)n; return; }
        buf_reserve(b, (size_t)n + 1);
    }
}

/* ---------------------------------------------------------------- latency samples */

typedef struct {
    uint64_t *v;
    size_t n, cap;
} samples_t;

static void samples_add(samples_t *s, uint64_t x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4096;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v) die("out of memory");
    }
    s->v[s->n++] = x;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---------------------------------------------------------------- connection */

typedef struct {
    int index;
    int fd;
    int is_setup;                  /* the untimed prefill/evict connection */
    buf_t out, in;
    uint64_t next_id;
    uint64_t rng;
    long key_lo, key_hi, key_next; /* sequential walk over [lo, hi) */
    long quota;                    /* requests left in this round (requests mode) */
    _Atomic uint64_t done;         /* replies framed while measuring (read by main) */
    uint64_t hits, misses, errors, disk_hits, oks;
    samples_t lat;
    char first_error[160];
} conn_t;

static int connect_unix(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) die("socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("connect %s: %s", path, strerror(errno));
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    return fd;
}

static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---------------------------------------------------------------- request formats */

static void put_request(conn_t *c, enum req kind, long key) {
    char k[64];
    int kl = snprintf(k, sizeof k, "%s%ld", opt.key_prefix, key);
    buf_t *o = &c->out;
    switch (opt.proto) {
    case P_HALCYON: {
        uint64_t id = ++c->next_id;
        if (kind == R_MGET) {
            /* --batch-keys consecutive keys from `key` (wrapping), as one cache.getMany. */
            buf_printf(o, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"cache.getMany\",\"params\":{\"keys\":[",
                       (unsigned long long)id);
            for (int i = 0; i < opt.batch_keys; i++)
                buf_printf(o, "%s\"%s%ld\"", i ? "," : "", opt.key_prefix, (key + i) % opt.keys);
            buf_printf(o, "]%s%s}}\n", opt.get_params ? "," : "", opt.get_params ? opt.get_params : "");
            break;
        }
        if (kind == R_PING) {
            buf_printf(o, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"server.ping\"}\n", (unsigned long long)id);
            break;
        }
        if (kind == R_INCR) {
            buf_printf(o, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"cache.incr\",\"params\":{\"key\":\"%s\"%s%s}}\n",
                       (unsigned long long)id, k, opt.set_params ? "," : "", opt.set_params ? opt.set_params : "");
            break;
        }
        if (kind == R_GET) {
            buf_printf(o, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"cache.get\",\"params\":{\"key\":\"%s\"%s%s}}\n",
                       (unsigned long long)id, k, opt.get_params ? "," : "", opt.get_params ? opt.get_params : "");
        } else if (kind == R_SET) {
            buf_printf(o, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"cache.set\",\"params\":{\"key\":\"%s\",\"value\":\"",
                       (unsigned long long)id, k);
            buf_append(o, value_bytes, (size_t)opt.value_size);
            const char *extra = c->is_setup && opt.prefill_params ? opt.prefill_params : opt.set_params;
            buf_printf(o, "\"%s%s}}\n", extra ? "," : "", extra ? extra : "");
        } else {
            buf_printf(o, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"cache.remove\",\"params\":{\"key\":\"%s\",\"fromDisk\":false}}\n",
                       (unsigned long long)id, k);
        }
        break;
    }
    case P_REDIS:
        if (kind == R_MGET) {
            buf_printf(o, "*%d\r\n$4\r\nMGET\r\n", opt.batch_keys + 1);
            for (int i = 0; i < opt.batch_keys; i++) {
                char kk[64];
                int kkl = snprintf(kk, sizeof kk, "%s%ld", opt.key_prefix, (key + i) % opt.keys);
                buf_printf(o, "$%d\r\n%s\r\n", kkl, kk);
            }
        } else if (kind == R_PING) {
            buf_printf(o, "*1\r\n$4\r\nPING\r\n");
        } else if (kind == R_INCR) {
            buf_printf(o, "*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n", kl, k);
        } else if (kind == R_GET) {
            buf_printf(o, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", kl, k);
        } else if (kind == R_SET) {
            buf_printf(o, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", kl, k, opt.value_size);
            buf_append(o, value_bytes, (size_t)opt.value_size);
            buf_append(o, "\r\n", 2);
        } else {
            die("--evict-first is only for halcyon");
        }
        break;
    case P_MEMCACHED:
        if (kind == R_MGET || kind == R_INCR) die("--op mget/incr: halcyon and redis only");
        if (kind == R_PING) {
            /* memcached's cheapest round trip: no key, a one-line reply */
            buf_printf(o, "version\r\n");
        } else if (kind == R_GET) {
            buf_printf(o, "get %s\r\n", k);
        } else if (kind == R_SET) {
            buf_printf(o, "set %s 0 0 %d\r\n", k, opt.value_size);
            buf_append(o, value_bytes, (size_t)opt.value_size);
            buf_append(o, "\r\n", 2);
        } else {
            die("--evict-first is only for halcyon");
        }
        break;
    }
}

/* ---------------------------------------------------------------- reply framing */

/* Where a JSON member's value starts, given the end of its quoted name: past the
 * colon and any whitespace around it. */
static const char *member_value(const char *p, const char *end) {
    while (p < end && (*p == ':' || *p == ' ' || *p == '\t')) p++;
    return p;
}

/* The first occurrence of the quoted name q (quotes included, qn bytes) in
 * p[0..end), or NULL: memchr from quote to quote, which for a line of a few
 * dozen quotes costs less than memmem's setup for each call. */
static const char *find_quoted(const char *p, const char *end, const char *q, size_t qn) {
    while ((size_t)(end - p) >= qn) {
        p = memchr(p, '"', (size_t)(end - p) - qn + 1);
        if (!p) return NULL;
        if (!memcmp(p, q, qn)) return p;
        p++;
    }
    return NULL;
}

/*
 * Frames one reply at the start of p[0..n). Returns its length, or 0 when the
 * reply is not complete yet. *st says what it was; *disk is set when halcyond
 * says the value came from the disk tier.
 */
static size_t frame_reply(const char *p, size_t n, enum status *st, int *disk) {
    *disk = 0;
    switch (opt.proto) {
    case P_HALCYON: {
        const char *nl = memchr(p, '\n', n);
        if (!nl) return 0;
        size_t len = (size_t)(nl - p) + 1;
        /* One pass along the line, as RESP's framing reads its header once: the
         * "result" member (none: an error), then the "found" members (getMany has
         * one per key, and any false is a miss), then the hit's "cacheType". A
         * value cannot hold these quoted names: its own quotes are escaped. */
        const char *end = p + len;
        const char *at = find_quoted(p, end, "\"result\"", 8);
        if (!at) { *st = S_ERROR; return len; }
        at += 8;
        int found = 0;
        for (;;) {
            const char *f = find_quoted(at, end, "\"found\"", 7);
            if (!f) break;
            found = 1;
            at = member_value(f + 7, end);
            if (at < end && *at == 'f') { *st = S_MISS; return len; }
            if (opt.op != OP_MGET) break;
        }
        if (!found) { *st = S_OK; return len; }
        *st = S_HIT;
        const char *t = find_quoted(at, end, "\"cacheType\"", 11);
        if (t) {
            t = member_value(t + 11, end);
            *disk = (size_t)(end - t) >= 6 && !memcmp(t, "\"disk\"", 6);
        }
        return len;
    }
    case P_REDIS: {
        const char *crlf = memmem(p, n, "\r\n", 2);
        if (!crlf) return 0;
        size_t head = (size_t)(crlf - p) + 2;
        if (p[0] == '+' || p[0] == ':') { *st = S_OK; return head; }
        if (p[0] == '*') {
            /* An array of bulk strings (MGET): complete when every element is. */
            long count = strtol(p + 1, NULL, 10);
            size_t at = head;
            int missing = 0;
            for (long i = 0; i < count; i++) {
                const char *e = memmem(p + at, n - at, "\r\n", 2);
                if (!e) return 0;
                size_t eh = (size_t)(e - (p + at)) + 2;
                long len = strtol(p + at + 1, NULL, 10);
                if (len < 0) { missing = 1; at += eh; continue; }
                if (n < at + eh + (size_t)len + 2) return 0;
                at += eh + (size_t)len + 2;
            }
            *st = missing ? S_MISS : S_HIT;
            return at;
        }
        if (p[0] == '-') { *st = S_ERROR; return head; }
        if (p[0] == '$') {
            long len = strtol(p + 1, NULL, 10);
            if (len < 0) { *st = S_MISS; return head; }
            size_t total = head + (size_t)len + 2;
            if (n < total) return 0;
            *st = S_HIT;
            return total;
        }
        *st = S_ERROR;
        return head;
    }
    case P_MEMCACHED: {
        const char *crlf = memmem(p, n, "\r\n", 2);
        if (!crlf) return 0;
        size_t head = (size_t)(crlf - p) + 2;
        if (n >= 6 && memcmp(p, "VALUE ", 6) == 0) {
            /* VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n */
            const char *sp = crlf;
            while (sp > p && sp[-1] != ' ') sp--;
            long len = strtol(sp, NULL, 10);
            size_t total = head + (size_t)len + 2 + 5;
            if (n < total) return 0;
            *st = memcmp(p + total - 5, "END\r\n", 5) == 0 ? S_HIT : S_ERROR;
            return total;
        }
        if (head == 5 && memcmp(p, "END", 3) == 0) { *st = S_MISS; return head; }
        if (head > 8 && memcmp(p, "VERSION ", 8) == 0) { *st = S_OK; return head; }
        if ((head == 8 && memcmp(p, "STORED", 6) == 0) || (head == 9 && memcmp(p, "DELETED", 7) == 0) ||
            (head == 11 && memcmp(p, "NOT_FOUND", 9) == 0)) {
            *st = S_OK;
            return head;
        }
        *st = S_ERROR;
        return head;
    }
    }
    return 0;
}

/*
 * Writes everything queued in c->out and reads until `expect` replies are
 * framed. Same loop for every protocol: try to write, try to read, and only
 * when neither can progress wait in poll().
 */
static void pump(conn_t *c, long expect) {
    long got = 0;
    while (got < expect || c->out.off < c->out.len) {
        int progressed = 0;
        if (c->out.off < c->out.len) {
            ssize_t w = send(c->fd, c->out.p + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
            if (w > 0) { c->out.off += (size_t)w; progressed = 1; }
            else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                die("conn %d: send: %s", c->index, strerror(errno));
        }
        if (got < expect) {
            buf_reserve(&c->in, 65536);
            ssize_t r = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
            if (r > 0) {
                c->in.len += (size_t)r;
                progressed = 1;
                for (;;) {
                    enum status st;
                    int disk;
                    size_t len = frame_reply(c->in.p + c->in.off, c->in.len - c->in.off, &st, &disk);
                    if (len == 0) break;
                    switch (st) {
                    case S_OK: c->oks++; break;
                    case S_HIT: c->hits++; break;
                    case S_MISS: c->misses++; break;
                    case S_ERROR:
                        if (c->errors++ == 0) {
                            size_t m = len < sizeof c->first_error - 1 ? len : sizeof c->first_error - 1;
                            memcpy(c->first_error, c->in.p + c->in.off, m);
                            c->first_error[m] = 0;
                            for (size_t i = 0; i < m; i++)
                                if (c->first_error[i] == '\r' || c->first_error[i] == '\n') c->first_error[i] = ' ';
                        }
                        break;
                    }
                    if (disk) c->disk_hits++;
                    c->in.off += len;
                    got++;
                }
                if (c->in.off == c->in.len) {
                    c->in.off = c->in.len = 0;
                } else if (c->in.off > c->in.cap / 2) {
                    memmove(c->in.p, c->in.p + c->in.off, c->in.len - c->in.off);
                    c->in.len -= c->in.off;
                    c->in.off = 0;
                }
            } else if (r == 0) {
                die("conn %d: server closed the connection", c->index);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                die("conn %d: recv: %s", c->index, strerror(errno));
            }
        }
        if (!progressed) {
            struct pollfd pfd = { .fd = c->fd, .events = 0 };
            if (got < expect) pfd.events |= POLLIN;
            if (c->out.off < c->out.len) pfd.events |= POLLOUT;
            if (poll(&pfd, 1, 10000) == 0) die("conn %d: no progress for 10 s (%ld of %ld replies)", c->index, got, expect);
        }
    }
    c->out.off = c->out.len = 0;
}

static long next_key(conn_t *c) {
    if (opt.sequential) {
        long k = c->key_next++;
        if (c->key_next >= c->key_hi) c->key_next = c->key_lo;
        return k;
    }
    return (long)(xorshift(&c->rng) % (uint64_t)opt.keys);
}

static enum req next_kind(conn_t *c) {
    switch (opt.op) {
    case OP_GET: return R_GET;
    case OP_SET: return R_SET;
    case OP_MIXED: return (long)(xorshift(&c->rng) % 100) < opt.mixed_set_pct ? R_SET : R_GET;
    case OP_MGET: return R_MGET;
    case OP_INCR: return R_INCR;
    case OP_PING: return R_PING;
    }
    return R_GET;
}

/* ---------------------------------------------------------------- worker */

static void *worker(void *arg) {
    conn_t *c = arg;
    for (;;) {
        int ph = atomic_load_explicit(&phase, memory_order_acquire);
        if (ph == 2) break;
        long n = opt.pipeline;
        if (opt.requests > 0) {
            if (c->quota == 0) break;
            if (n > c->quota) n = c->quota;
            c->quota -= n;
        }
        for (long i = 0; i < n; i++) put_request(c, next_kind(c), next_key(c));
        uint64_t t0 = now_ns();
        pump(c, n);
        uint64_t t1 = now_ns();
        if (opt.requests > 0 || (ph == 1 && atomic_load_explicit(&phase, memory_order_acquire) == 1)) {
            samples_add(&c->lat, t1 - t0);
            atomic_fetch_add_explicit(&c->done, (uint64_t)n, memory_order_relaxed);
        }
    }
    return NULL;
}

/* Runs `count` requests of one kind over keys [lo, hi) on c, pipelined 64 deep. */
static void bulk(conn_t *c, enum req kind, long lo, long hi) {
    uint64_t errors_before = c->errors;
    for (long k = lo; k < hi;) {
        long n = 0;
        for (; n < 64 && k < hi; n++, k++) put_request(c, kind, k);
        pump(c, n);
    }
    if (c->errors != errors_before) die("%s failed: %s", kind == R_SET ? "prefill" : "evict", c->first_error);
}

static void configure(conn_t *c) {
    if (!opt.configure) return;
    if (opt.proto != P_HALCYON) die("--configure is only for halcyon");
    buf_printf(&c->out, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"connection.configure\",\"params\":%s}\n", opt.configure);
    pump(c, 1);
    if (c->errors) die("connection.configure failed: %s", c->first_error);
    c->oks = c->hits = c->misses = 0;
}

/* ---------------------------------------------------------------- main */

static void usage(void) {
    fprintf(stderr,
        "usage: loadgen --proto halcyon|redis|memcached --socket PATH [options]\n"
        "  --op get|set|mixed|mget|incr|ping  request mix (mixed: --set-pct %% sets, default 10;\n"
        "                          mget: cache.getMany / MGET of --batch-keys keys; incr: cache.incr / INCR;\n"
        "                          ping: server.ping / PING / version, the transport alone)\n"
        "  --batch-keys N          keys per mget request (100)\n"
        "  --conns N               connections, one thread each (1)\n"
        "  --pipeline P            requests in flight per connection (1)\n"
        "  --seconds S             measure for S seconds after --warmup (3, warm-up 0.5)\n"
        "  --requests R            or: exactly R requests in all, timed from the first\n"
        "  --value-size B          value bytes for sets and prefill (100)\n"
        "  --keys K                key space; keys are <prefix><0..K-1> (10000)\n"
        "  --no-prefill            do not set every key before measuring\n"
        "  --sequential            each connection walks its own slice of the keys in order\n"
        "  --evict-first           halcyon: before each round remove every key from memory only\n"
        "                          (cache.remove fromDisk:false), so gets read the disk tier\n"
        "  --rounds N              repeat the measured part N times (with --requests)\n"
        "  --configure JSON        halcyon: params of connection.configure sent on each connection\n"
        "  --get-params MEMBERS    halcyon: extra members of cache.get params, e.g. '\"options\":{...}'\n"
        "  --set-params MEMBERS    halcyon: extra members of cache.set params, e.g. '\"toDisk\":false'\n"
        "  --prefill-params MEMBERS halcyon: the same for the prefill's sets (default: --set-params)\n"
        "  --key-prefix S          (key:)\n"
        "  --label S               copied into the output line\n"
        "prints: proto op conns pipeline value requests seconds rps p50_us p99_us hits misses errors disk_hits replies\n");
    exit(2);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"proto", required_argument, 0, 'p'},  {"socket", required_argument, 0, 's'},
        {"op", required_argument, 0, 'o'},     {"conns", required_argument, 0, 'c'},
        {"pipeline", required_argument, 0, 'P'}, {"seconds", required_argument, 0, 't'},
        {"requests", required_argument, 0, 'n'}, {"warmup", required_argument, 0, 'w'},
        {"value-size", required_argument, 0, 'v'}, {"keys", required_argument, 0, 'k'},
        {"no-prefill", no_argument, 0, 'N'},   {"sequential", no_argument, 0, 'S'},
        {"evict-first", no_argument, 0, 'E'},  {"rounds", required_argument, 0, 'r'},
        {"set-pct", required_argument, 0, 'm'}, {"configure", required_argument, 0, 'C'},
        {"get-params", required_argument, 0, 'G'}, {"set-params", required_argument, 0, 'T'},
        {"prefill-params", required_argument, 0, 'F'}, {"key-prefix", required_argument, 0, 'K'}, {"label", required_argument, 0, 'L'},
        {"batch-keys", required_argument, 0, 'B'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            if (!strcmp(optarg, "halcyon")) opt.proto = P_HALCYON;
            else if (!strcmp(optarg, "redis")) opt.proto = P_REDIS;
            else if (!strcmp(optarg, "memcached")) opt.proto = P_MEMCACHED;
            else die("unknown --proto %s", optarg);
            break;
        case 's': opt.socket_path = optarg; break;
        case 'o':
            if (!strcmp(optarg, "get")) opt.op = OP_GET;
            else if (!strcmp(optarg, "set")) opt.op = OP_SET;
            else if (!strcmp(optarg, "mixed")) opt.op = OP_MIXED;
            else if (!strcmp(optarg, "mget")) opt.op = OP_MGET;
            else if (!strcmp(optarg, "incr")) opt.op = OP_INCR;
            else if (!strcmp(optarg, "ping")) opt.op = OP_PING;
            else die("unknown --op %s", optarg);
            break;
        case 'c': opt.conns = atoi(optarg); break;
        case 'P': opt.pipeline = atoi(optarg); break;
        case 't': opt.seconds = atof(optarg); break;
        case 'n': opt.requests = atol(optarg); break;
        case 'w': opt.warmup = atof(optarg); break;
        case 'v': opt.value_size = atoi(optarg); break;
        case 'k': opt.keys = atol(optarg); break;
        case 'N': opt.prefill = 0; break;
        case 'S': opt.sequential = 1; break;
        case 'E': opt.evict_first = 1; break;
        case 'r': opt.rounds = atoi(optarg); break;
        case 'm': opt.mixed_set_pct = atoi(optarg); break;
        case 'C': opt.configure = optarg; break;
        case 'G': opt.get_params = optarg; break;
        case 'T': opt.set_params = optarg; break;
        case 'F': opt.prefill_params = optarg; break;
        case 'K': opt.key_prefix = optarg; break;
        case 'L': opt.label = optarg; break;
        case 'B': opt.batch_keys = atoi(optarg); break;
        default: usage();
        }
    }
    if (!opt.socket_path || opt.conns < 1 || opt.pipeline < 1 || opt.keys < 1 || opt.value_size < 0 ||
        opt.rounds < 1 || (opt.requests <= 0 && opt.seconds <= 0))
        usage();
    if (opt.rounds > 1 && opt.requests <= 0) die("--rounds needs --requests");
    signal(SIGPIPE, SIG_IGN);

    value_bytes = malloc((size_t)opt.value_size + 1);
    for (int i = 0; i < opt.value_size; i++) value_bytes[i] = (char)('a' + i % 26);

    conn_t *conns = calloc((size_t)opt.conns, sizeof *conns);
    for (int i = 0; i < opt.conns; i++) {
        conn_t *c = &conns[i];
        c->index = i;
        c->fd = connect_unix(opt.socket_path);
        c->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        c->key_lo = opt.keys * i / opt.conns;
        c->key_hi = opt.keys * (i + 1) / opt.conns;
        if (c->key_hi <= c->key_lo) c->key_hi = c->key_lo + 1;
        c->key_next = c->key_lo;
        configure(c);
    }

    /* Prefill and eviction run on a connection of their own, not timed. */
    conn_t setup = {.index = -1, .is_setup = 1};
    setup.fd = connect_unix(opt.socket_path);
    if (opt.prefill) bulk(&setup, R_SET, 0, opt.keys);

    uint64_t total_ns = 0, total_done = 0;
    for (int round = 0; round < opt.rounds; round++) {
        if (opt.evict_first) {
            if (opt.proto != P_HALCYON) die("--evict-first is only for halcyon");
            bulk(&setup, R_EVICT, 0, opt.keys);
        }
        for (int i = 0; i < opt.conns; i++) {
            conn_t *c = &conns[i];
            c->key_next = c->key_lo;
            if (opt.requests > 0) c->quota = opt.requests / opt.conns + (i < opt.requests % opt.conns ? 1 : 0);
            atomic_store(&c->done, 0);
        }
        atomic_store(&phase, opt.requests > 0 ? 1 : 0);
        pthread_t *th = calloc((size_t)opt.conns, sizeof *th);
        uint64_t start = now_ns();
        for (int i = 0; i < opt.conns; i++) pthread_create(&th[i], NULL, worker, &conns[i]);
        uint64_t t0 = start, t1;
        uint64_t d0 = 0, d1 = 0;
        if (opt.requests > 0) {
            for (int i = 0; i < opt.conns; i++) pthread_join(th[i], NULL);
            t1 = now_ns();
            for (int i = 0; i < opt.conns; i++) d1 += atomic_load(&conns[i].done);
        } else {
            struct timespec w = {(time_t)opt.warmup, (long)((opt.warmup - (long)opt.warmup) * 1e9)};
            nanosleep(&w, NULL);
            t0 = now_ns();
            atomic_store(&phase, 1);
            struct timespec m = {(time_t)opt.seconds, (long)((opt.seconds - (long)opt.seconds) * 1e9)};
            nanosleep(&m, NULL);
            atomic_store(&phase, 2);
            t1 = now_ns();
            for (int i = 0; i < opt.conns; i++) d1 += atomic_load(&conns[i].done);
            for (int i = 0; i < opt.conns; i++) pthread_join(th[i], NULL);
        }
        free(th);
        total_ns += t1 - t0;
        total_done += d1 - d0;
    }

    samples_t all = {0};
    uint64_t hits = 0, misses = 0, errors = 0, disk = 0, replies = 0;
    const char *first_error = NULL;
    for (int i = 0; i < opt.conns; i++) {
        conn_t *c = &conns[i];
        for (size_t j = 0; j < c->lat.n; j++) samples_add(&all, c->lat.v[j]);
        hits += c->hits; misses += c->misses; errors += c->errors; disk += c->disk_hits;
        replies += c->oks + c->hits + c->misses + c->errors;
        if (c->errors && !first_error) first_error = c->first_error;
        close(c->fd);
    }
    close(setup.fd);
    qsort(all.v, all.n, sizeof *all.v, cmp_u64);
    double p50 = all.n ? all.v[all.n / 2] / 1e3 : 0;
    double p99 = all.n ? all.v[(size_t)((double)(all.n - 1) * 0.99)] / 1e3 : 0;
    double secs = total_ns / 1e9;
    static const char *pn[] = {"halcyon", "redis", "memcached"};
    static const char *on[] = {"get", "set", "mixed", "mget", "incr", "ping"};
    printf("proto=%s op=%s conns=%d pipeline=%d value=%d requests=%llu seconds=%.3f rps=%.0f p50_us=%.1f p99_us=%.1f "
           "hits=%llu misses=%llu errors=%llu disk_hits=%llu replies=%llu%s%s\n",
           pn[opt.proto], on[opt.op], opt.conns, opt.pipeline, opt.value_size, (unsigned long long)total_done, secs,
           secs > 0 ? total_done / secs : 0, p50, p99, (unsigned long long)hits, (unsigned long long)misses,
           (unsigned long long)errors, (unsigned long long)disk, (unsigned long long)replies, opt.label ? " label=" : "", opt.label ? opt.label : "");
    if (errors) {
        fprintf(stderr, "loadgen: %llu error replies; first: %s\n", (unsigned long long)errors, first_error);
        return 3;
    }
    return 0;
}
