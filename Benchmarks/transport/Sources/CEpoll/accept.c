#define _GNU_SOURCE
#include <sys/socket.h>
#include <stddef.h>
#include "CEpoll.h"

int cepoll_accept(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
