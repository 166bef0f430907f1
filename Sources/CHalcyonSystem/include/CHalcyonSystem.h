#ifndef HALCYON_SYSTEM_H
#define HALCYON_SYSTEM_H
// GNU/Linux-only system calls and constants that Swift's Glibc module does not
// import (O_NOATIME, UTIME_NOW/UTIME_OMIT, struct ucred). Each wrapper is a thin,
// thread-safe pass-through; errors are reported through errno as usual.
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Reads the peer credentials of a connected Unix socket (SO_PEERCRED).
/// Returns 0 on success, -1 with errno set on failure.
int hc_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

#ifdef __cplusplus
}
#endif
#endif
