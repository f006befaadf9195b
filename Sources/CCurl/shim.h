// Typed, non-variadic wrappers around libcurl's variadic entry points, which Swift cannot call.
// One wrapper per argument type; header-only (static inline), so no C compile unit is needed.
#ifndef SEGGET_CCURL_SHIM_H
#define SEGGET_CCURL_SHIM_H

#include <curl/curl.h>
#include <fcntl.h>

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
