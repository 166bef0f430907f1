#ifndef HALCYON_SYSTEM_H
#define HALCYON_SYSTEM_H
// GNU/Linux-only system calls and constants that Swift's Glibc module does not
// import (O_NOATIME, UTIME_NOW/UTIME_OMIT). Each wrapper is a thin,
// thread-safe pass-through; errors are reported through errno as usual.
#include <sys/types.h>
#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Opens `path` read-only and close-on-exec with O_NOATIME, so that reading the file
/// never lets the kernel (relatime) overwrite the last-access time the disk tier keeps
/// in atime. O_NOATIME is refused with EPERM to anyone but the file's owner (or a
/// process with CAP_FOWNER); the call then retries without it.
/// Returns the descriptor, or -1 with errno set.
int hc_open_noatime(const char *path);

/// Flushes the file system holding the descriptor's file to the device (syncfs): the
/// journal's checkpoint vouches for per-key files only after this.
/// Returns 0, or -1 with errno set.
int hc_syncfs(int fd);

/// `fallocate(fd, 0, 0, length)`: reserves the file's first `length` bytes (the size grows
/// to it), retrying EINTR. 0, or -1 with errno (ENOSPC, EOPNOTSUPP, ...).
int hc_reserve(int fd, int64_t length);

/// Opens the process's signal pipe (close-on-exec, non-blocking) and returns its read end;
/// -1 with errno set (EBUSY: already open). Once per process.
int hc_signal_pipe_open(void);

/// Makes `sig` write its number, one byte, to the signal pipe (`sigaction`, SA_RESTART),
/// from now on. 0, or -1 with errno set (EBADF: the pipe is not open).
int hc_signal_pipe_catch(int sig);

/// The `UTIME_NOW` and `UTIME_OMIT` markers for `tv_nsec` in utimensat/futimens.
long hc_utime_now(void);
long hc_utime_omit(void);

/// Sets a file's access and modification times on an open descriptor (futimens).
/// Pass `hc_utime_omit()` as a nanosecond field to leave that time unchanged.
/// Returns 0, or -1 with errno set.
int hc_futimens(int fd, int64_t atime_sec, long atime_nsec, int64_t mtime_sec, long mtime_nsec);

/// Sets a file's access and modification times by path, relative to the directory
/// descriptor `dirfd` (utimensat, not following a final symbolic link).
/// Returns 0, or -1 with errno set.
int hc_utimensat(int dirfd, const char *path, int64_t atime_sec, long atime_nsec,
                 int64_t mtime_sec, long mtime_nsec);

/// Opens a cache file for reading without ever blocking or leaving the cache folder:
/// O_RDONLY | O_CLOEXEC | O_NOFOLLOW (a symbolic link fails with ELOOP) | O_NONBLOCK (a
/// FIFO opens at once instead of waiting for a writer) | O_NOATIME (dropped, as in
/// `hc_open_noatime`, when the kernel refuses it with EPERM). With `writable` non-zero
/// the file is opened O_RDWR instead (for setting times on it). The caller still checks
/// with fstat that it got a regular file. Returns the descriptor, or -1 with errno set.
int hc_open_cache_file(const char *path, int writable);

/// CRC32C (Castagnoli) of `length` bytes, continuing from `crc` (0 to start; pass the
/// previous result to checksum data in pieces). Uses SSE4.2 when the CPU has it.
/// Thread-safe.
uint32_t hc_crc32c(uint32_t crc, const void *buffer, size_t length);

/// The same checksum computed with the portable slicing-by-8 tables, whatever the CPU.
uint32_t hc_crc32c_portable(uint32_t crc, const void *buffer, size_t length);

/// 1 when `hc_crc32c` uses the SSE4.2 instruction, 0 when it uses the tables.
int hc_crc32c_is_hardware(void);

/// 1 when every one of the `length` bytes at `bytes` is ASCII, none below 0x20 and none
/// `"` or backslash: bytes a JSON string holds as they are. Any thread. AVX2 or SSE2 on
/// x86-64 (chosen once, by the CPU), word arithmetic elsewhere.
int hc_json_plain_ascii(const void *bytes, size_t length);

/// `hc_json_plain_ascii` with SSE2 only (the portable variant off x86-64), and with word
/// arithmetic only: the variants the CPU does not choose, for the tests.
int hc_json_plain_ascii_sse2(const void *bytes, size_t length);
int hc_json_plain_ascii_portable(const void *bytes, size_t length);

/// Terminal and signal helpers for `halcyon top`'s live view (terminal.c): the calls
/// Swift cannot make itself (variadic `ioctl`, the `c_cc` array, `signalfd`).

/// Puts the terminal on `fd` into cbreak mode: keys arrive one at a time, unechoed,
/// while Ctrl-C and Ctrl-Z still raise their signals. The settings before the change go
/// to `saved` (opaque, `hc_terminal_saved_size()` bytes), for `hc_terminal_restore`.
/// Returns 0, or -1 with errno set (then nothing changed).
int hc_terminal_enter_cbreak(int fd, void *saved);

/// Puts back the settings `hc_terminal_enter_cbreak` saved. Async-signal-safe.
/// Returns 0, or -1 with errno set.
int hc_terminal_restore(int fd, const void *saved);

/// The size of the saved settings (`struct termios`).
size_t hc_terminal_saved_size(void);

/// The terminal's size in character cells. Returns 0, or -1 with errno set.
int hc_terminal_size(int fd, int *rows, int *columns);

/// Blocks `signals` for the calling thread and returns a non-blocking, close-on-exec
/// signalfd that reads them instead, so a poll loop waits on signals and input alike
/// and no signal handler runs. Returns the descriptor, or -1 with errno set.
int hc_signals_to_fd(const int *signals, int count);

/// The number of the next signal waiting on a descriptor of `hc_signals_to_fd`, or 0
/// when none is waiting.
int hc_signalfd_next(int fd);

/// Unblocks `signals` for the calling thread (a pending one is delivered at once).
void hc_signals_unblock(const int *signals, int count);

/// Tells the CPU that the caller is in a spin-wait loop (x86 `pause`, Arm `yield`): the
/// loop leaves its core's shared resources to the thread it waits for, and its exit, when
/// the flag it polls changes, does not pay for a mis-speculated memory order.
static inline void hc_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#ifdef __cplusplus
}
#endif
#endif
