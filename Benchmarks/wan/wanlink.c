/*
 * wanlink: an emulated WAN link in user space, between two TUN devices (the idea of mahimahi).
 *
 * It opens one TUN device (IFF_TUN | IFF_NO_PI) in network namespace A and one in namespace B and
 * forwards IP packets between them. Each direction on its own:
 *   1. drops a packet with probability --loss (a seeded PRNG, so runs can be repeated);
 *   2. serialises it through a bottleneck of --rate-mbit (0: no bottleneck), behind a tail-drop
 *      queue of --queue-bytes that holds only the bottleneck's backlog: packets already sent into
 *      the delay line are on the wire, not queued (a limit that counted them would cap the link at
 *      queue / delay);
 *   3. holds it for the one-way delay (--delay-ms is the RTT; each direction gets half) and then
 *      writes it into the other device.
 * With a constant delay and a FIFO bottleneck, delivery times in one direction never decrease, so
 * each direction is a ring buffer in delivery order and the next wake-up is the head of a ring.
 *
 * The devices are not persistent: they vanish when this process exits, which is the teardown.
 * Addresses and routes are set by the caller (Benchmarks/wan/link.sh) once "ready" is printed.
 * SIGUSR1 writes the counters to --stats FILE; SIGTERM or SIGINT writes them and exits.
 *
 * Build: cc -O2 -o wanlink wanlink.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define SLOT_BYTES 2048 /* the devices' MTU is 1500; a longer packet is dropped and counted */
#define READ_BURST 256  /* packets read from one device before the other gets its turn */

struct slot {
    uint64_t due_ns;
    uint32_t len;
    uint8_t data[SLOT_BYTES];
};

struct direction {
    const char *name;
    int in_fd, out_fd;
    struct slot *ring;
    uint32_t cap, head, count;
    uint64_t link_free_ns; /* when the bottleneck finishes serialising what it has */
    /* counters */
    uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes;
    uint64_t lost, queue_drops, ring_drops, too_long, write_errors;
    uint64_t syns; /* TCP segments with SYN and without ACK: connection attempts */
    uint32_t max_len;
    uint64_t max_backlog;
};

static struct {
    uint64_t delay_ns;     /* one way */
    double loss;
    double rate_bps;       /* 0: no bottleneck */
    uint64_t queue_bytes;
    uint64_t seed;
    const char *stats_path;
} cfg;

static volatile sig_atomic_t want_stats, want_exit;
static uint64_t rng_state;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: fast, and the same seed gives the same losses for the same packet sequence */
static double rng_uniform(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void die(const char *what) {
    fprintf(stderr, "wanlink: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int switch_netns(const char *ns) {
    char path[512];
    if (strchr(ns, '/'))
        snprintf(path, sizeof path, "%s", ns);
    else
        snprintf(path, sizeof path, "/run/netns/%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die(path);
    if (setns(fd, CLONE_NEWNET) < 0) die("setns");
    close(fd);
    return 0;
}

static int open_tun(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) die("/dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) die("TUNSETIFF");
    return fd;
}

static int is_syn(const uint8_t *p, uint32_t len) {
    if (len < 20 || (p[0] >> 4) != 4 || p[9] != 6) return 0; /* IPv4 TCP only */
    uint32_t ihl = (uint32_t)(p[0] & 15) * 4;
    if ((((uint32_t)p[6] & 0x1f) << 8 | p[7]) != 0) return 0; /* not the first fragment */
    if (len < ihl + 14) return 0;
    uint8_t flags = p[ihl + 13];
    return (flags & 0x02) && !(flags & 0x10);
}

/* One packet read from d->in_fd at `now`: lose it, drop it at the full queue, or schedule it. */
static void admit(struct direction *d, const uint8_t *pkt, uint32_t len, uint64_t now) {
    d->rx_pkts++;
    d->rx_bytes += len;
    if (len > d->max_len) d->max_len = len;
    if (is_syn(pkt, len)) d->syns++;
    if (len > SLOT_BYTES) { d->too_long++; return; }
    if (cfg.loss > 0 && rng_uniform() < cfg.loss) { d->lost++; return; }
    uint64_t tx_done = now;
    if (cfg.rate_bps > 0) {
        uint64_t start = d->link_free_ns > now ? d->link_free_ns : now;
        /* the backlog is what the bottleneck still has to serialise, nothing in the delay line */
        uint64_t backlog = (uint64_t)((double)(start - now) * cfg.rate_bps / 8e9);
        if (backlog > d->max_backlog) d->max_backlog = backlog;
        if (backlog + len > cfg.queue_bytes && backlog > 0) { d->queue_drops++; return; }
        tx_done = start + (uint64_t)((double)len * 8e9 / cfg.rate_bps);
    }
    if (d->count == d->cap) { d->ring_drops++; return; }
    if (cfg.rate_bps > 0) d->link_free_ns = tx_done;
    struct slot *s = &d->ring[(d->head + d->count) % d->cap];
    s->due_ns = tx_done + cfg.delay_ns;
    s->len = len;
    memcpy(s->data, pkt, len);
    d->count++;
}

static void deliver_due(struct direction *d, uint64_t now) {
    while (d->count > 0) {
        struct slot *s = &d->ring[d->head];
        if (s->due_ns > now) break;
        if (write(d->out_fd, s->data, s->len) < 0) d->write_errors++;
        else { d->tx_pkts++; d->tx_bytes += s->len; }
        d->head = (d->head + 1) % d->cap;
        d->count--;
    }
}

static void read_burst(struct direction *d) {
    static uint8_t buf[65536];
    for (int i = 0; i < READ_BURST; i++) {
        ssize_t n = read(d->in_fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            die("read");
        }
        admit(d, buf, (uint32_t)n, now_ns());
    }
}

static void write_stats(struct direction *dirs) {
    if (!cfg.stats_path) return;
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp", cfg.stats_path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    for (int i = 0; i < 2; i++) {
        struct direction *d = &dirs[i];
        fprintf(f,
                "%s rx_pkts=%llu rx_bytes=%llu tx_pkts=%llu tx_bytes=%llu lost=%llu queue_drops=%llu "
                "ring_drops=%llu too_long=%llu write_errors=%llu syns=%llu max_len=%u max_backlog=%llu "
                "queued=%u\n",
                d->name, (unsigned long long)d->rx_pkts, (unsigned long long)d->rx_bytes,
                (unsigned long long)d->tx_pkts, (unsigned long long)d->tx_bytes,
                (unsigned long long)d->lost, (unsigned long long)d->queue_drops,
                (unsigned long long)d->ring_drops, (unsigned long long)d->too_long,
                (unsigned long long)d->write_errors, (unsigned long long)d->syns, d->max_len,
                (unsigned long long)d->max_backlog, d->count);
    }
    fclose(f);
    rename(tmp, cfg.stats_path);
}

static void on_signal(int sig) {
    if (sig == SIGUSR1) want_stats = 1;
    else want_exit = 1;
}

static void usage(void) {
    fprintf(stderr,
            "usage: wanlink --ns-a NS --ns-b NS [--dev-a NAME] [--dev-b NAME] [--delay-ms RTT]\n"
            "               [--loss P] [--rate-mbit R] [--queue-bytes B] [--seed S] [--stats FILE]\n"
            "  A is the client side (a->b is the download's upload direction), B the server side.\n"
            "  --delay-ms is the round trip; each direction holds packets for half of it.\n"
            "  --loss is per packet and per direction (0.001 = 0.1 %%).\n"
            "  --rate-mbit 0 (the default) means no bottleneck; --queue-bytes defaults to one\n"
            "  bandwidth-delay product (at least 64 KiB) and counts only the bottleneck's backlog.\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *ns_a = NULL, *ns_b = NULL, *dev_a = "wan0", *dev_b = "wan0";
    double delay_ms = 0, rate_mbit = 0;
    long long queue_bytes = -1;
    cfg.seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        if (!strcmp(a, "--ns-a")) ns_a = v;
        else if (!strcmp(a, "--ns-b")) ns_b = v;
        else if (!strcmp(a, "--dev-a")) dev_a = v;
        else if (!strcmp(a, "--dev-b")) dev_b = v;
        else if (!strcmp(a, "--delay-ms")) delay_ms = atof(v);
        else if (!strcmp(a, "--loss")) cfg.loss = atof(v);
        else if (!strcmp(a, "--rate-mbit")) rate_mbit = atof(v);
        else if (!strcmp(a, "--queue-bytes")) queue_bytes = atoll(v);
        else if (!strcmp(a, "--seed")) cfg.seed = strtoull(v, NULL, 0);
        else if (!strcmp(a, "--stats")) cfg.stats_path = v;
        else usage();
        i++;
    }
    if (!ns_a || !ns_b || delay_ms < 0 || cfg.loss < 0 || cfg.loss >= 1 || rate_mbit < 0) usage();
    cfg.delay_ns = (uint64_t)(delay_ms * 1e6 / 2);
    cfg.rate_bps = rate_mbit * 1e6;
    if (queue_bytes < 0) {
        double bdp = cfg.rate_bps / 8 * delay_ms / 1000;
        queue_bytes = bdp < 65536 ? 65536 : (long long)bdp;
    }
    cfg.queue_bytes = (uint64_t)queue_bytes;
    rng_state = cfg.seed ? cfg.seed : 0x9e3779b97f4a7c15ull;

    /* Wake-ups to the microsecond, not the default 50 us slack. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

    int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0) die("/proc/self/ns/net");
    switch_netns(ns_a);
    int fd_a = open_tun(dev_a);
    switch_netns(ns_b);
    int fd_b = open_tun(dev_b);
    if (setns(home, CLONE_NEWNET) < 0) die("setns home");
    close(home);

    /* Enough slots for the bandwidth-delay product plus the queue at 1 Gbit/s or the rate, in
     * packets of 1500 bytes and then some; the memory is touched only as far as it is used. */
    double top_bps = cfg.rate_bps > 0 ? cfg.rate_bps : 10e9;
    double inflight = top_bps / 8 * (double)cfg.delay_ns / 1e9 + (double)cfg.queue_bytes;
    uint32_t cap = (uint32_t)(inflight / 1000) + 4096;
    if (cap > 262144) cap = 262144;
    struct direction dirs[2] = {
        {.name = "up", .in_fd = fd_a, .out_fd = fd_b},   /* client -> server */
        {.name = "down", .in_fd = fd_b, .out_fd = fd_a}, /* server -> client */
    };
    for (int i = 0; i < 2; i++) {
        dirs[i].cap = cap;
        dirs[i].ring = calloc(cap, sizeof(struct slot));
        if (!dirs[i].ring) die("calloc");
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    printf("ready delay_ms=%.3f loss=%.6f rate_mbit=%.3f queue_bytes=%llu seed=%llu slots=%u\n",
           delay_ms, cfg.loss, rate_mbit, (unsigned long long)cfg.queue_bytes,
           (unsigned long long)cfg.seed, cap);
    fflush(stdout);

    struct pollfd pfd[2] = {{.fd = fd_a, .events = POLLIN}, {.fd = fd_b, .events = POLLIN}};
    while (!want_exit) {
        if (want_stats) { want_stats = 0; write_stats(dirs); }
        uint64_t now = now_ns();
        deliver_due(&dirs[0], now);
        deliver_due(&dirs[1], now);
        uint64_t next = UINT64_MAX;
        for (int i = 0; i < 2; i++)
            if (dirs[i].count > 0 && dirs[i].ring[dirs[i].head].due_ns < next)
                next = dirs[i].ring[dirs[i].head].due_ns;
        struct timespec ts, *tp = NULL;
        if (next != UINT64_MAX) {
            uint64_t wait = next > now ? next - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ull);
            ts.tv_nsec = (long)(wait % 1000000000ull);
            tp = &ts;
        }
        int r = ppoll(pfd, 2, tp, NULL);
        if (r < 0) {
            if (errno == EINTR) continue;
            die("ppoll");
        }
        if (pfd[0].revents & POLLIN) read_burst(&dirs[0]);
        if (pfd[1].revents & POLLIN) read_burst(&dirs[1]);
        if ((pfd[0].revents | pfd[1].revents) & (POLLERR | POLLHUP | POLLNVAL)) {
            fprintf(stderr, "wanlink: a device went away\n");
            break;
        }
    }
    write_stats(dirs);
    return 0;
}
