// What EpollFloor needs of Linux that Swift's Glibc module leaves out: epoll, and accept4.
#ifndef C_EPOLL_H
#define C_EPOLL_H
#include <sys/epoll.h>

/// Accepts a connection on `fd` as a non-blocking, close-on-exec descriptor; -1 and errno
/// as accept4(2).
int cepoll_accept(int fd);

#endif
