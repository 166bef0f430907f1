// Journal I/O measurements in C so the numbers are the system
// calls' and not a harness's. The framing and checksum are the journal's own (the C
// CRC32C of Sources/CHalcyonSystem); the Swift writer adds encoding overhead on top.
//
//   cc -O2 -I../../Sources/CHalcyonSystem/include journal_bench.c ../../Sources/CHalcyonSystem/crc32c.c -o /tmp/journal_bench -lpthread
//   /tmp/journal_bench [folder]    (default: a fresh folder under /tmp; use the cache's file system)
//
// Prints: appends/s for 100-byte records singly and in groups of 16 and 64 (writev),
// the same groups copied into one buffer for one write(2), the same groups copied into a
// reserved, mapped segment (no system call but at rotation), an fdatasync's cost, and for
// values of 64 KiB .. 4 MiB the cost of journal-then-file against the file alone.
#define _GNU_SOURCE
#include "CHalcyonSystem.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static char folder[512];

// Frames one set record's head (length, CRC with salt, type, fields, key) into `head`;
// the value is a separate buffer, as the Swift writer hands it to writev.
static size_t frame(unsigned char *head, const char *key, const unsigned char *value, size_t vlen, uint32_t salt) {
    size_t klen = strlen(key), p = 8;
    head[p++] = 1;
    memset(head + p, 0, 28); p += 28;
    uint32_t k = (uint32_t)klen; memcpy(head + p, &k, 4); p += 4;
    memcpy(head + p, key, klen); p += klen;
    uint32_t length = (uint32_t)(p - 8 + vlen);
    memcpy(head, &length, 4);
    uint32_t crc = hc_crc32c(0, &salt, 4);
    crc = hc_crc32c(crc, head, 4);
    crc = hc_crc32c(crc, head + 8, p - 8);
    crc = hc_crc32c(crc, value, vlen);
    memcpy(head + 4, &crc, 4);
    return p;
}

static int open_segment(const char *name) {
    char path[600]; snprintf(path, sizeof path, "%s/%s", folder, name);
    unlink(path);
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
}

// A segment of 16 MiB reserved (fallocate) and mapped shared, as `Journal.Writer` maps one.
#define MAPPED_SEGMENT (16 << 20)
static unsigned char *map_segment(int *fd) {
    char path[600]; snprintf(path, sizeof path, "%s/%s", folder, "bench-mapped.log");
    unlink(path);
    *fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    if (*fd < 0 || fallocate(*fd, 0, 0, MAPPED_SEGMENT) != 0) { perror("fallocate"); exit(1); }
    void *m = mmap(NULL, MAPPED_SEGMENT, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (m == MAP_FAILED) { perror("mmap"); exit(1); }
    return m;
}

enum mode { WRITEV, WRITE, MAPPED };
static const char *mode_names[] = {"writev", "write", "mapped"};

// Appends groups of `group` records for `seconds`: with one writev (head and value per
// record), one write of a copied buffer, or copied into a mapped segment, payloads first,
// then the 8-byte frame headers (the writer's order), a full segment unmapped, cut back and
// replaced as a rotation.
static void appends(int group, enum mode mode, double seconds) {
    int fd = -1; unsigned char *map = NULL; size_t off = 0;
    if (mode == MAPPED) map = map_segment(&fd); else fd = open_segment("bench-seg.log");
    unsigned char value[100]; memset(value, 'v', sizeof value);
    unsigned char heads[64][128]; size_t lens[64]; struct iovec iov[128]; unsigned char joined[64 * 256];
    long records = 0; double t0 = now(), t = t0;
    while (t - t0 < seconds) {
        for (int r = 0; r < 1000 / group + 1; r++) {
            size_t total = 0;
            for (int i = 0; i < group; i++) {
                char key[32]; snprintf(key, sizeof key, "key-%ld", records + i);
                lens[i] = frame(heads[i], key, value, sizeof value, 0x12345678);
                iov[2 * i].iov_base = heads[i]; iov[2 * i].iov_len = lens[i];
                iov[2 * i + 1].iov_base = value; iov[2 * i + 1].iov_len = sizeof value;
                total += lens[i] + sizeof value;
            }
            if (mode == WRITEV) {
                if (writev(fd, iov, 2 * group) != (ssize_t)total) { perror("writev"); exit(1); }
            } else if (mode == WRITE) {
                size_t at = 0;
                for (int i = 0; i < 2 * group; i++) { memcpy(joined + at, iov[i].iov_base, iov[i].iov_len); at += iov[i].iov_len; }
                if (write(fd, joined, at) != (ssize_t)at) { perror("write"); exit(1); }
            } else {
                if (off + total > MAPPED_SEGMENT) {
                    munmap(map, MAPPED_SEGMENT); ftruncate(fd, (off_t)off); close(fd);
                    map = map_segment(&fd); off = 0;
                }
                size_t at = off;
                for (int i = 0; i < group; i++) {
                    memcpy(map + at + 8, heads[i] + 8, lens[i] - 8); at += lens[i];
                    memcpy(map + at, value, sizeof value); at += sizeof value;
                }
                __atomic_thread_fence(__ATOMIC_RELEASE);
                at = off;
                for (int i = 0; i < group; i++) { memcpy(map + at, heads[i], 8); at += lens[i] + sizeof value; }
                off += total;
            }
            records += group;
        }
        t = now();
        if (mode != MAPPED && lseek(fd, 0, SEEK_END) > (256 << 20)) { close(fd); fd = open_segment("bench-seg.log"); }
    }
    if (map) munmap(map, MAPPED_SEGMENT);
    close(fd);
    double elapsed = t - t0;
    printf("| %-4d | %-7s | %10.0f | %10.0f | %6.2f |\n", group, mode_names[mode],
           records / elapsed, records / elapsed / group, elapsed / (records / (double)group) * 1e6);
}

// Per-key file as the disk tier writes it: temp file, header+key+value, futimens, rename.
static void write_file(const char *name, const unsigned char *value, size_t vlen, int n) {
    char tmp[600], path[600];
    snprintf(tmp, sizeof tmp, "%s/.tmp-bench-%d", folder, n);
    snprintf(path, sizeof path, "%s/%s", folder, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    unsigned char head[128]; size_t h = frame(head, name, value, vlen, 0);
    struct iovec iov[2] = {{head, h}, {(void *)value, vlen}};
    size_t left = h + vlen;
    ssize_t w = writev(fd, iov, 2);
    if (w != (ssize_t)left) { perror("writev file"); exit(1); }
    struct timespec times[2] = {{1700000000, 0}, {1800000000, 0}};
    futimens(fd, times);
    close(fd);
    rename(tmp, path);
}

static void large(size_t vlen) {
    unsigned char *value = malloc(vlen); memset(value, 'x', vlen);
    unsigned char head[128];
    int rounds = (int)(64.0 * 1024 * 1024 / vlen); if (rounds < 16) rounds = 16; if (rounds > 400) rounds = 400;
    // File alone (replacing the same 8 names, as a hot key set would).
    double t0 = now();
    for (int i = 0; i < rounds; i++) { char name[32]; snprintf(name, sizeof name, "large-%d", i % 8); write_file(name, value, vlen, i); }
    double file_only = (now() - t0) / rounds;
    // Journal append (writev), then the same file write behind it.
    int fd = open_segment("bench-large.log");
    double journal = 0, t1;
    t0 = now();
    for (int i = 0; i < rounds; i++) {
        double a = now();
        size_t h = frame(head, "large", value, vlen, 1);
        struct iovec iov[2] = {{head, h}, {value, vlen}};
        if (writev(fd, iov, 2) != (ssize_t)(h + vlen)) { perror("writev large"); exit(1); }
        journal += now() - a;
        char name[32]; snprintf(name, sizeof name, "large-%d", i % 8);
        write_file(name, value, vlen, i);
        if (lseek(fd, 0, SEEK_END) > (256 << 20)) { close(fd); fd = open_segment("bench-large.log"); }
    }
    t1 = now();
    close(fd);
    double both = (t1 - t0) / rounds;
    printf("| %5zu KiB | %8.1f | %8.1f | %8.1f | %5.2f |\n", vlen / 1024, journal / rounds * 1e6, file_only * 1e6, both * 1e6,
           both / file_only);
    free(value);
}

int main(int argc, char **argv) {
    if (argc > 1) snprintf(folder, sizeof folder, "%s", argv[1]);
    else snprintf(folder, sizeof folder, "/tmp/halcyon-journal-bench-%d", getpid());
    mkdir(folder, 0700);
    printf("CRC32C: %s\n\n", hc_crc32c_is_hardware() ? "SSE4.2" : "portable tables");
    {
        size_t n = 1 << 20; unsigned char *b = malloc(n); memset(b, 3, n);
        volatile uint32_t s = 0; double t0 = now(); for (int r = 0; r < 500; r++) s ^= hc_crc32c(0, b, n);
        double hw = 500.0 * n / (now() - t0) / 1e9;
        t0 = now(); for (int r = 0; r < 100; r++) s ^= hc_crc32c_portable(0, b, n);
        double pt = 100.0 * n / (now() - t0) / 1e9;
        printf("CRC32C throughput over 1 MiB: hc_crc32c %.2f GB/s, portable slicing-by-8 %.2f GB/s\n\n", hw, pt);
        free(b);
    }
    printf("100-byte values, 9-byte keys (frames of 150 bytes), no fsync (the everysec path):\n\n");
    printf("| group | call | records/s | calls/s | µs/call |\n|---|---|---|---|---|\n");
    int groups[] = {1, 16, 64};
    for (int g = 0; g < 3; g++) for (int m = WRITEV; m <= MAPPED; m++) appends(groups[g], (enum mode)m, 2.0);
    {
        int fd = open_segment("bench-sync.log"); unsigned char b[150]; memset(b, 1, sizeof b);
        double t0 = now(); int n = 50;
        for (int i = 0; i < n; i++) { write(fd, b, sizeof b); fdatasync(fd); }
        printf("\nwrite(150 B) + fdatasync (the `always` path): %.0f µs each\n\n", (now() - t0) / n * 1e6);
        close(fd);
    }
    printf("Large values: journal append, per-key file alone, journal then file (µs per value):\n\n");
    printf("| value | journal | file only | journal + file | ratio |\n|---|---|---|---|---|\n");
    size_t sizes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
    for (int i = 0; i < 4; i++) large(sizes[i]);
    char cmd[700]; snprintf(cmd, sizeof cmd, "rm -rf '%s'", folder); if (argc <= 1) system(cmd);
    return 0;
}
