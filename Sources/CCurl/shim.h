// Typed, non-variadic wrappers around libcurl's variadic entry points, which Swift cannot call.
// One wrapper per argument type; header-only (static inline), so no C compile unit is needed.
#ifndef SEGGET_CCURL_SHIM_H
#define SEGGET_CCURL_SHIM_H

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

typedef size_t (*segget_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*segget_curl_xferinfo_cb)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                       curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode segget_easy_setopt_long(CURL *h, CURLoption o, long v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode segget_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode segget_easy_setopt_ptr(CURL *h, CURLoption o, void *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode segget_easy_setopt_string(CURL *h, CURLoption o, const char *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode segget_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode segget_easy_setopt_data_cb(CURL *h, CURLoption o, segget_curl_data_cb v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode segget_easy_setopt_xferinfo_cb(CURL *h, CURLoption o, segget_curl_xferinfo_cb v) {
    return curl_easy_setopt(h, o, v);
}

static inline CURLcode segget_easy_getinfo_long(CURL *h, CURLINFO i, long *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode segget_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode segget_easy_getinfo_string(CURL *h, CURLINFO i, char **v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode segget_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) {
    return curl_easy_getinfo(h, i, v);
}

static inline CURLMcode segget_multi_setopt_long(CURLM *m, CURLMoption o, long v) {
    return curl_multi_setopt(m, o, v);
}

// Sockets libcurl opens must not leak into child processes of a program that uses the library.
static int segget_sockopt_cloexec(void *clientp, curl_socket_t fd, curlsocktype purpose) {
    (void)clientp; (void)purpose;
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    return CURL_SOCKOPT_OK;
}
static inline CURLcode segget_easy_set_cloexec_sockets(CURL *h) {
    return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, segget_sockopt_cloexec);
}

// The TCP sockets that one multi handle's transfers opened and have not closed, each with its local
// port once known. libcurl tells a transfer its connection's local port (CURLINFO_LOCAL_PORT), not
// its descriptor; this book maps the one to the other. Used from the multi handle's one thread.
struct segget_sockets { int count, capacity; int *fd; int *port; int pending[8]; int pendingCount; };

static inline struct segget_sockets *segget_sockets_new(void) {
    return (struct segget_sockets *)calloc(1, sizeof(struct segget_sockets));
}
static inline void segget_sockets_free(struct segget_sockets *s) {
    if (!s) return;
    free(s->fd); free(s->port); free(s);
}
static inline void segget_sockets_remove(struct segget_sockets *s, int fd);
static inline void segget_sockets_add(struct segget_sockets *s, int fd) {
    segget_sockets_remove(s, fd); // a descriptor closed behind the book's back and given out again
    if (s->count == s->capacity) {
        int capacity = s->capacity ? s->capacity * 2 : 16;
        int *fds = (int *)realloc(s->fd, sizeof(int) * (size_t)capacity);
        if (!fds) return;
        s->fd = fds;
        int *ports = (int *)realloc(s->port, sizeof(int) * (size_t)capacity);
        if (!ports) return;
        s->port = ports;
        s->capacity = capacity;
    }
    s->fd[s->count] = fd;
    s->port[s->count] = 0;
    s->count += 1;
}
static inline void segget_sockets_remove(struct segget_sockets *s, int fd) {
    for (int i = 0; i < s->count; i++) {
        if (s->fd[i] != fd) continue;
        s->count -= 1;
        s->fd[i] = s->fd[s->count];
        s->port[i] = s->port[s->count];
        return;
    }
}
static inline int segget_socket_local_port(int fd) {
    struct sockaddr_storage a;
    socklen_t n = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &n) != 0) return 0;
    if (a.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&a)->sin_port);
    if (a.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    return 0;
}
// The descriptor of the socket bound to local `port`, or -1. Ports not yet known are asked for once
// the socket has one (a socket gets its port when it connects).
static inline int segget_sockets_find(struct segget_sockets *s, long port) {
    if (port <= 0) return -1;
    for (int i = 0; i < s->count; i++) if (s->port[i] == port) return s->fd[i];
    for (int i = 0; i < s->count; i++) {
        if (s->port[i] != 0) continue;
        s->port[i] = segget_socket_local_port(s->fd[i]);
        if (s->port[i] == port) return s->fd[i];
    }
    return -1;
}
// Notes that the socket on local `port` should acknowledge what it received as soon as the
// current round of transfers is over (`segget_sockets_acknowledge_pending`): one system call per
// connection and round, however many pieces libcurl hands over from one read.
static inline void segget_sockets_mark(struct segget_sockets *s, long port) {
    if (port <= 0) return;
    for (int i = 0; i < s->pendingCount; i++) if (s->pending[i] == port) return;
    if (s->pendingCount < 8) s->pending[s->pendingCount++] = (int)port;
}
// Has the kernel send each marked socket's held acknowledgement now, and leave the socket's
// "interactive" mode of delayed acknowledgements (TCP_QUICKACK, which does not stay set). Returns
// how many were sent; a port no longer in the book is skipped.
static inline int segget_sockets_acknowledge_pending(struct segget_sockets *s) {
    int sent = 0;
    for (int i = 0; i < s->pendingCount; i++) {
        int fd = segget_sockets_find(s, s->pending[i]);
        if (fd < 0) continue;
        int one = 1;
        if (setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one) == 0) sent += 1;
    }
    s->pendingCount = 0;
    return sent;
}
// The kernel's smoothed round-trip time (microseconds) of the connected socket on local `port`, or
// -1 when the book has no such socket or it is not connected. Measured by the kernel from the
// handshake on, so the load of the machine's CPUs does not lengthen it.
static inline long segget_sockets_round_trip_us(struct segget_sockets *s, long port) {
    int fd = segget_sockets_find(s, port);
    if (fd < 0) return -1;
    struct tcp_info info;
    socklen_t n = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &n) != 0 || info.tcpi_state != TCP_ESTABLISHED) return -1;
    return (long)info.tcpi_rtt;
}
// Bytes the kernel received on the socket on local `port` that no read has taken yet (FIONREAD),
// or -1 when the book has no such socket. Many of them on a connection that reads slowly say that the
// reader, not the network, is behind.
static inline long segget_sockets_unread(struct segget_sockets *s, long port) {
    int fd = segget_sockets_find(s, port);
    if (fd < 0) return -1;
    int n = 0;
    if (ioctl(fd, FIONREAD, &n) != 0) return -1;
    return (long)n;
}
static int segget_sockopt_tracked(void *clientp, curl_socket_t fd, curlsocktype purpose) {
    segget_sockopt_cloexec(NULL, fd, purpose);
    if (clientp && purpose == CURLSOCKTYPE_IPCXN) segget_sockets_add((struct segget_sockets *)clientp, fd);
    return CURL_SOCKOPT_OK;
}
static int segget_closesocket_tracked(void *clientp, curl_socket_t fd) {
    if (clientp) segget_sockets_remove((struct segget_sockets *)clientp, fd);
    return close(fd);
}
// Points the sockets `h` opens from now on at book `s` (NULL: at none; they stay close-on-exec).
// A connection keeps the book it was opened with until it is closed, whichever handle closes it.
static inline CURLcode segget_easy_track_sockets(CURL *h, struct segget_sockets *s) {
    CURLcode rc = curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, segget_sockopt_tracked);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_SOCKOPTDATA, (void *)s);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, segget_closesocket_tracked);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, (void *)s);
    return rc;
}

// CURLMsg.data is a union; Swift sees it awkwardly, so read the result here.
static inline CURLcode segget_msg_result(const CURLMsg *msg) { return msg->data.result; }

// Constants that are macros with casts or enum values Swift may not import cleanly.
static inline long segget_curl_global_all(void) { return CURL_GLOBAL_ALL; }
static inline long segget_curl_http_version_1_1(void) { return CURL_HTTP_VERSION_1_1; }
static inline long segget_curl_http_version_2tls(void) { return CURL_HTTP_VERSION_2TLS; }
static inline long segget_curl_auth_basic(void) { return (long)CURLAUTH_BASIC; }
// CURLVERSION_NOW is a macro naming an enum value, which Swift does not import.
static inline const char *segget_curl_version(void) {
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);
    return info && info->version ? info->version : "(unknown)";
}
#endif
