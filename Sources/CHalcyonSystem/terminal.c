// The terminal and signal calls of `halcyon top`: cbreak mode, the window size, and
// signals read from a descriptor. Swift cannot call variadic ioctl nor index termios's
// c_cc array by its macros, so these few lines live in C.
#define _GNU_SOURCE
#include "CHalcyonSystem.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

int hc_terminal_enter_cbreak(int fd, void *saved) {
    struct termios settings;
    if (tcgetattr(fd, &settings) != 0) return -1;
    memcpy(saved, &settings, sizeof settings);
    settings.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    settings.c_cc[VMIN] = 1;
    settings.c_cc[VTIME] = 0;
    return tcsetattr(fd, TCSANOW, &settings);
}

int hc_terminal_restore(int fd, const void *saved) {
    return tcsetattr(fd, TCSANOW, (const struct termios *)saved);
}

size_t hc_terminal_saved_size(void) { return sizeof(struct termios); }

int hc_terminal_size(int fd, int *rows, int *columns) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0) return -1;
    *rows = size.ws_row;
    *columns = size.ws_col;
    return 0;
}

static void fill(sigset_t *set, const int *signals, int count) {
    sigemptyset(set);
    for (int i = 0; i < count; i++) sigaddset(set, signals[i]);
}

int hc_signals_to_fd(const int *signals, int count) {
    sigset_t set;
    fill(&set, signals, count);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int hc_signalfd_next(int fd) {
    struct signalfd_siginfo info;
    ssize_t count;
    do {
        count = read(fd, &info, sizeof info);
    } while (count < 0 && errno == EINTR);
    return count == (ssize_t)sizeof info ? (int)info.ssi_signo : 0;
}

void hc_signals_unblock(const int *signals, int count) {
    sigset_t set;
    fill(&set, signals, count);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}
