// Signals as bytes on a pipe (the self-pipe pattern). A handler installed with
// `sigaction` takes effect at once, for the whole process, so a signal that arrives at any
// moment after `hc_signal_pipe_catch` returns is written to the pipe and read whenever the
// reader gets to it: none is lost while the daemon is still starting. (A dispatch signal
// source is registered later, on libdispatch's own thread, and a signal ignored until then
// is gone.)
#define _GNU_SOURCE
#include "CHalcyonSystem.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile int signal_pipe_write = -1;

// Async-signal-safe: one write(2), errno kept. A full pipe drops the byte; the signals
// already on the pipe are read first.
static void signal_to_pipe(int sig) {
    int saved = errno;
    unsigned char byte = (unsigned char)sig;
    ssize_t written = write(signal_pipe_write, &byte, 1);
    (void)written;
    errno = saved;
}

int hc_signal_pipe_open(void) {
    if (signal_pipe_write >= 0) {
        errno = EBUSY;
        return -1;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    signal_pipe_write = fds[1];
    return fds[0];
}

int hc_signal_pipe_catch(int sig) {
    if (signal_pipe_write < 0) {
        errno = EBADF;
        return -1;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = signal_to_pipe;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(sig, &action, NULL);
}
