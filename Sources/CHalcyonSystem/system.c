#define _GNU_SOURCE
#include "CHalcyonSystem.h"
#include <sys/stat.h>
#include <fcntl.h>
#include <errno.h>
#include <unistd.h>

int hc_open_noatime(const char *path) {
    int fd;
    do {
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME);
    } while (fd < 0 && errno == EINTR);
    if (fd >= 0 || errno != EPERM) return fd;
    // Not the owner: the kernel may then update atime under relatime, which the
    // caller accepts rather than failing the read.
    do {
        fd = open(path, O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

int hc_open_cache_file(const char *path, int writable) {
    int base = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    int fd;
    do {
        fd = open(path, base | O_NOATIME);
    } while (fd < 0 && errno == EINTR);
    if (fd >= 0 || errno != EPERM) return fd;
    do {
        fd = open(path, base);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

long hc_utime_now(void) { return UTIME_NOW; }
long hc_utime_omit(void) { return UTIME_OMIT; }

int hc_futimens(int fd, int64_t atime_sec, long atime_nsec, int64_t mtime_sec, long mtime_nsec) {
    struct timespec times[2];
    times[0].tv_sec = (time_t)atime_sec;
    times[0].tv_nsec = atime_nsec;
    times[1].tv_sec = (time_t)mtime_sec;
    times[1].tv_nsec = mtime_nsec;
    return futimens(fd, times);
}

int hc_utimensat(int dirfd, const char *path, int64_t atime_sec, long atime_nsec,
                 int64_t mtime_sec, long mtime_nsec) {
    struct timespec times[2];
    times[0].tv_sec = (time_t)atime_sec;
    times[0].tv_nsec = atime_nsec;
    times[1].tv_sec = (time_t)mtime_sec;
    times[1].tv_nsec = mtime_nsec;
    return utimensat(dirfd, path, times, AT_SYMLINK_NOFOLLOW);
}

int hc_syncfs(int fd) {
    return syncfs(fd);
}

int hc_reserve(int fd, int64_t length) {
    int r;
    do {
        r = fallocate(fd, 0, 0, (off_t)length);
    } while (r != 0 && errno == EINTR);
    return r;
}
