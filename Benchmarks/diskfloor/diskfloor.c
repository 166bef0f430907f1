/* The file floor under a disk-tier hit: open + fstat + read + close of cache files, in C.
 *
 * Reads every regular file of one folder (names starting with '.' left out: temporary
 * files) with T threads, each walking its own slice of the list in order, for P passes,
 * and prints the process's CPU time (user + system, getrusage) per read. The cost of a
 * disk hit in halcyond set against this is what the daemon adds to the kernel's own work
 * for the same files.
 *
 * usage: diskfloor --dir DIR [--threads T] [--passes P] [--warmup-passes W]
 * prints: files=N threads=T reads=R bytes=B seconds=S reads_per_s=X cpu_us=Y
 *         (cpu_us: CPU µs per read over the measured passes)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char **paths;
static long nfiles;
static int passes = 3;
static _Atomic long total_bytes;
static _Atomic long failures;

static void die(const char *what) {
    fprintf(stderr, "diskfloor: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* One read as a cache read makes it: open without touching atime, size from fstat, the
 * whole file into a buffer, close. */
static long read_one(const char *path, char **buf, size_t *cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) { close(fd); return -1; }
    size_t size = (size_t)st.st_size;
    if (size > *cap) {
        free(*buf);
        *cap = size;
        *buf = malloc(size ? size : 1);
        if (!*buf) die("malloc");
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, *buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    return got == size ? (long)got : -1;
}

struct slice { long lo, hi; int passes; };

static void *walker(void *arg) {
    struct slice *s = arg;
    char *buf = NULL;
    size_t cap = 0;
    long bytes = 0, failed = 0;
    for (int p = 0; p < s->passes; p++) {
        for (long i = s->lo; i < s->hi; i++) {
            long n = read_one(paths[i], &buf, &cap);
            if (n < 0) failed++; else bytes += n;
        }
    }
    free(buf);
    atomic_fetch_add(&total_bytes, bytes);
    atomic_fetch_add(&failures, failed);
    return NULL;
}

/* Runs `rounds` passes over the list with `threads` threads and waits for them. */
static void run(int threads, int rounds) {
    pthread_t tid[threads];
    struct slice sl[threads];
    for (int t = 0; t < threads; t++) {
        sl[t].lo = nfiles * t / threads;
        sl[t].hi = nfiles * (t + 1) / threads;
        sl[t].passes = rounds;
        if (pthread_create(&tid[t], NULL, walker, &sl[t]) != 0) die("pthread_create");
    }
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    int threads = 1, warmup = 1;
    static struct option longopts[] = {
        {"dir", required_argument, 0, 'd'}, {"threads", required_argument, 0, 't'},
        {"passes", required_argument, 0, 'p'}, {"warmup-passes", required_argument, 0, 'w'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 't': threads = atoi(optarg); break;
        case 'p': passes = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: diskfloor --dir DIR [--threads T] [--passes P] [--warmup-passes W]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (!dir || threads < 1 || threads > 1024 || passes < 1 || warmup < 0) {
        fprintf(stderr, "diskfloor: --dir is required; --threads 1...1024, --passes >= 1, --warmup-passes >= 0\n");
        return 2;
    }
    DIR *d = opendir(dir);
    if (!d) die(dir);
    long cap = 1024;
    paths = malloc(sizeof(char *) * (size_t)cap);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *path;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) die("asprintf");
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) { free(path); continue; }
        if (nfiles == cap) {
            cap *= 2;
            paths = realloc(paths, sizeof(char *) * (size_t)cap);
            if (!paths) die("realloc");
        }
        paths[nfiles++] = path;
    }
    closedir(d);
    if (nfiles == 0) { fprintf(stderr, "diskfloor: no files in %s\n", dir); return 2; }

    if (warmup > 0) run(threads, warmup);
    atomic_store(&total_bytes, 0);
    atomic_store(&failures, 0);
    double c0 = cpu_seconds(), t0 = now_seconds();
    run(threads, passes);
    double c1 = cpu_seconds(), t1 = now_seconds();
    long reads = nfiles * passes;
    printf("files=%ld threads=%d reads=%ld bytes=%ld failures=%ld seconds=%.3f reads_per_s=%.0f cpu_us=%.2f\n",
           nfiles, threads, reads, atomic_load(&total_bytes), atomic_load(&failures), t1 - t0,
           reads / (t1 - t0), (c1 - c0) * 1e6 / reads);
    return atomic_load(&failures) ? 1 : 0;
}
