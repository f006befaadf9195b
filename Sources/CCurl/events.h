// The sockets and the timer libcurl asks one multi handle's owner to watch (its socket interface,
// `curl_multi_socket_action`), and the wait for them. Header-only, included by shim.h.
//
// Why not `curl_multi_perform`: it visits every transfer on every call, and each visit polls its
// connection's socket to learn whether it may read (one `poll` system call per transfer per
// pass). A batch sharing HTTP/2 connections keeps 400 transfers on 16-32 connections, and those
// visits took a third of its CPU. Here a pass runs only the transfers whose socket is ready or
// whose timer is due, and libcurl is told which way each socket is ready.
//
// Used from the multi handle's one thread, except `segget_events_wake`, which any thread may call.
#ifndef SEGGET_CCURL_EVENTS_H
#define SEGGET_CCURL_EVENTS_H

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct segget_events {
    // fds[0] is the wake descriptor (an eventfd); the rest are libcurl's sockets, each with the
    // directions libcurl wants (`events`) and, after a wait, what the kernel reported (`revents`).
    struct pollfd *fds;
    int count, capacity;
    // When libcurl's timer is due (CLOCK_MONOTONIC, nanoseconds), or -1 with none set.
    int64_t deadline;
    int wake;
    // Whether `revents` came from a wait since the last dispatch (see `segget_events_dispatch`).
    int fresh;
};

static inline int64_t segget_events_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline int segget_events_index(struct segget_events *ev, curl_socket_t s) {
    for (int i = 1; i < ev->count; i++) if (ev->fds[i].fd == s) return i;
    return -1;
}

// CURLMOPT_SOCKETFUNCTION: what libcurl wants of socket `s` from now on.
static int segget_events_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)easy; (void)socketp;
    struct segget_events *ev = (struct segget_events *)userp;
    int i = segget_events_index(ev, s);
    if (what == CURL_POLL_REMOVE) {
        if (i > 0) {
            ev->count -= 1;
            ev->fds[i] = ev->fds[ev->count];
        }
        return 0;
    }
    short events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= POLLIN;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= POLLOUT;
    if (i < 0) {
        if (ev->count == ev->capacity) {
            int capacity = ev->capacity * 2;
            struct pollfd *fds = (struct pollfd *)realloc(ev->fds, sizeof(struct pollfd) * (size_t)capacity);
            if (!fds) return -1;
            ev->fds = fds;
            ev->capacity = capacity;
        }
        i = ev->count++;
        ev->fds[i].fd = s;
    }
    ev->fds[i].events = events;
    ev->fds[i].revents = 0;
    return 0;
}

// CURLMOPT_TIMERFUNCTION: when libcurl wants `CURL_SOCKET_TIMEOUT` next (-1: not at all).
static int segget_events_timer(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi;
    struct segget_events *ev = (struct segget_events *)userp;
    ev->deadline = timeout_ms < 0 ? -1 : segget_events_now() + (int64_t)timeout_ms * 1000000;
    return 0;
}

// A book for `multi`, its callbacks set; NULL when memory or a descriptor could not be had.
static inline struct segget_events *segget_events_new(CURLM *multi) {
    struct segget_events *ev = (struct segget_events *)calloc(1, sizeof(struct segget_events));
    if (!ev) return NULL;
    ev->capacity = 16;
    ev->fds = (struct pollfd *)calloc((size_t)ev->capacity, sizeof(struct pollfd));
    ev->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!ev->fds || ev->wake < 0) {
        if (ev->wake >= 0) close(ev->wake);
        free(ev->fds);
        free(ev);
        return NULL;
    }
    ev->fds[0].fd = ev->wake;
    ev->fds[0].events = POLLIN;
    ev->count = 1;
    ev->deadline = -1;
    if (curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, segget_events_socket) != CURLM_OK
        || curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, (void *)ev) != CURLM_OK
        || curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, segget_events_timer) != CURLM_OK
        || curl_multi_setopt(multi, CURLMOPT_TIMERDATA, (void *)ev) != CURLM_OK) {
        close(ev->wake);
        free(ev->fds);
        free(ev);
        return NULL;
    }
    return ev;
}

// After `curl_multi_cleanup` (which tells the callbacks about the sockets it closes).
static inline void segget_events_free(struct segget_events *ev) {
    if (!ev) return;
    close(ev->wake);
    free(ev->fds);
    free(ev);
}

// Makes a wait in progress, or the next one, return at once. Any thread.
static inline void segget_events_wake(struct segget_events *ev) {
    uint64_t one = 1;
    ssize_t n;
    do { n = write(ev->wake, &one, sizeof one); } while (n < 0 && errno == EINTR);
}

// Waits for a socket to be ready, the timer to be due or a wake, at most `timeout_ms`. Returns 0,
// or errno when the wait itself failed (EINTR counts as a wait that ended).
static inline int segget_events_wait(struct segget_events *ev, int timeout_ms) {
    if (ev->deadline >= 0) {
        int64_t left = ev->deadline - segget_events_now();
        int due = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
        if (due < timeout_ms || timeout_ms < 0) timeout_ms = due;
    }
    int n = poll(ev->fds, (nfds_t)ev->count, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : errno;
    ev->fresh = 1;
    if (ev->fds[0].revents) {
        uint64_t drained;
        while (read(ev->wake, &drained, sizeof drained) > 0) {}
        ev->fds[0].revents = 0;
    }
    return 0;
}

// Hands libcurl what the last wait found: each ready socket, then the timer if it is due. Each
// socket's readiness is handed over once. Where no wait came since the last dispatch (a loop that
// goes round again at once, after a transfer ended or with work of its own), the sockets are looked
// at now, without waiting, as `curl_multi_perform` would: busy passes never starve them.
// `running`: the transfers still running.
static inline CURLMcode segget_events_dispatch(struct segget_events *ev, CURLM *multi, int *running) {
    CURLMcode rc = CURLM_OK;
    if (!ev->fresh && ev->count > 1 && poll(ev->fds + 1, (nfds_t)(ev->count - 1), 0) < 0) {
        for (int i = 1; i < ev->count; i++) ev->fds[i].revents = 0;
    }
    ev->fresh = 0;
    // The calls below add and remove sockets: take the ready ones first.
    int ready = 0;
    for (int i = 1; i < ev->count; i++) if (ev->fds[i].revents) ready += 1;
    if (ready > 0) {
        curl_socket_t stackFds[64];
        int stackMasks[64];
        curl_socket_t *fds = ready <= 64 ? stackFds : (curl_socket_t *)malloc(sizeof(curl_socket_t) * (size_t)ready);
        int *masks = ready <= 64 ? stackMasks : (int *)malloc(sizeof(int) * (size_t)ready);
        if (!fds || !masks) {
            if (fds != stackFds) free(fds);
            if (masks != stackMasks) free(masks);
            return CURLM_OUT_OF_MEMORY;
        }
        int n = 0;
        for (int i = 1; i < ev->count; i++) {
            short r = ev->fds[i].revents;
            if (!r) continue;
            ev->fds[i].revents = 0;
            int mask = 0;
            if (r & (POLLIN | POLLHUP)) mask |= CURL_CSELECT_IN;
            if (r & POLLOUT) mask |= CURL_CSELECT_OUT;
            if (r & (POLLERR | POLLNVAL)) mask |= CURL_CSELECT_ERR;
            fds[n] = ev->fds[i].fd;
            masks[n] = mask;
            n += 1;
        }
        for (int i = 0; i < n && rc == CURLM_OK; i++) {
            // A socket an earlier call closed is skipped (its descriptor may already be another's).
            if (segget_events_index(ev, fds[i]) < 0) continue;
            rc = curl_multi_socket_action(multi, fds[i], masks[i], running);
        }
        if (fds != stackFds) free(fds);
        if (masks != stackMasks) free(masks);
    }
    // The timer, while it is due: what the sockets' transfers set due at once (HTTP/2 streams whose
    // frames came in another stream's read, a transfer unpaused) runs in this pass, as
    // `curl_multi_perform` would run it, not one pass (and one wait) later each time.
    for (int round = 0; round < 16 && rc == CURLM_OK && ev->deadline >= 0 && ev->deadline <= segget_events_now(); round++) {
        ev->deadline = -1;
        rc = curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, running);
    }
    return rc;
}

#endif
