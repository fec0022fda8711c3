/*
 * cgmulti - an ordinary libcurl multi-API program used as a test host for curlguard.
 *
 * It knows nothing about the interposer.  It runs N transfers in one multi handle the
 * way event-driven programs do (the shape of libcurl's examples ephiperfifo.c and
 * multi-event.c): an epoll loop over CURLMOPT_SOCKETFUNCTION (with curl_multi_assign)
 * and CURLMOPT_TIMERFUNCTION (a timerfd), driven by curl_multi_socket_action, or with
 * --perform the loop of curl_multi_perform + curl_multi_poll.  Its own write and header
 * callbacks count bytes and keep each body (and headers) in files of their own, so a test
 * can run it once plainly and once under LD_PRELOAD=libcurlguard.so and compare.
 *
 * Usage: cgmulti [options] URL...   (transfer i fetches the i-th URL, i from 0)
 *   --perform               curl_multi_perform + curl_multi_poll instead of socket_action
 *   --wait                  --perform with curl_multi_wait instead of curl_multi_poll
 *   --read-after-wait       --perform: curl_multi_info_read after the wait, not before it
 *                           (perform, wait, read: as the loops of PHP's manual)
 *   --keep-done             a finished transfer stays in the multi until all are finished
 *                           (libcurl gives it no descriptor to wait on)
 *   --remove-twice          a finished transfer is removed twice (libcurl 7.88 answers the
 *                           second CURLM_OK: "it is already removed so let's say it is fine")
 *   --turns                 --perform: print "cgmulti: turns=N" (the loop's turns) on stderr
 *   --timer-fail N          the timer callback (socket_action loop) returns -1 on its N-th
 *                           call; a later call prints "cgmulti: timer callback called after
 *                           it returned -1" (libcurl never calls it again: lib/multi.c)
 *   --post BODY             POSTFIELDS of every transfer (Content-Type: application/json)
 *   --idempotency-key K     header "Idempotency-Key: K-i" on transfer i
 *   --header 'Name: value'  one more request header on every transfer (repeatable)
 *   --out-dir DIR           body of transfer i to DIR/i.body, its headers to DIR/i.headers
 *   --remove-after-ms K IDX curl_multi_remove_handle(transfer IDX) K ms after the start,
 *                           unless it finished before; it is reported as "IDX removed"
 *   --easy-cleanup-after-ms K IDX  curl_easy_cleanup(transfer IDX) K ms after the start
 *                           without removing it first (libcurl removes it from its multi);
 *                           reported as "IDX removed"
 *   --cleanup-after-ms K    K ms after the start, curl_multi_cleanup with the unfinished
 *                           transfers still inside, then add them all to a new multi handle
 *                           (libcurl: a handle left in a cleaned-up multi may be re-added)
 *   --rewrite-post-at-cleanup  with --post and --cleanup-after-ms: right before that
 *                           curl_multi_cleanup, write over the POSTFIELDS buffer (one copy
 *                           of BODY, shared by the transfers) with a JSON document of the
 *                           same length, {"r":"xx..."}: libcurl reads POSTFIELDS only while
 *                           it sends, so the transfers it cancels are not touched, and the
 *                           re-added ones send the new bytes (as a host that frees or reuses
 *                           the buffer of transfers it abandons)
 *   --timing FILE           per transfer: "i start_ms first_ms last_ms done_ms max_gap_ms
 *                           writes" (ms since the start, CLOCK_MONOTONIC; -1: never)
 *   --timeout-ms N          CURLOPT_TIMEOUT_MS of every transfer
 *   --max-connections N     CURLMOPT_MAX_TOTAL_CONNECTIONS (libcurl queues the rest)
 *   --max-ms N              give up after N ms (default 45000): "cgmulti: gave up", exit 3
 *   Batch mode (bench/run.py): --bodies FILE --calls N [--concurrency T] [--bench-out F]
 *                           N transfers, all POST to the first URL, transfer i sends line
 *                           (i mod lines) of FILE; at most T in the multi at once (default
 *                           all); F gets "i start_ms end_ms status code 1" as each ends.
 *                           --pace-ms P: transfer i is not added before i * P ms (an open-
 *                           loop arrival stream, as bench/curl-call's BENCH_PACE_MS).
 *
 * Output: at the end, on stdout, one line per transfer in index order:
 *   "i CURLcode HTTP-status body-bytes"   or   "i removed"
 * then on stderr "cgmulti: transfers=N ok=K removed=R".  Exit 0 when every transfer
 * ended with CURLE_OK, 1 otherwise, 2 on a bad command line, 3 when it gave up.
 *
 * Build: cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g \
 *           -o build/tests/cgmulti tests/hosts/cgmulti.c -lcurl
 */
#include <curl/curl.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define XFER_MAGIC 0x58666572u /* "Xfer" */
#define SOCK_MAGIC 0x536f636bu /* "Sock" */
#define MAX_EVENTS 64

struct xfer {
    unsigned magic;
    long index;
    CURL *easy;
    FILE *body, *headers;
    struct curl_slist *hdrs;
    char *post;                    /* owned copy for batch mode */
    curl_off_t bytes, header_bytes;
    double start_ms, first_ms, last_ms, done_ms, max_gap_ms;
    long writes;
    bool added, done, removed;
    CURLcode result;
    long status;
};

/* curl_multi_assign'ed to each socket libcurl asks us to watch (as ephiperfifo.c). */
struct sock {
    unsigned magic;
    curl_socket_t fd;
    int what;
    struct sock *next, *prev;      /* every sock alive, to free after curl_multi_cleanup */
};

struct global {
    CURLM *multi;
    int epfd, tfd, rfd;            /* epoll, libcurl's timer, the removal/cleanup timer */
    bool sockets;                  /* the socket_action loop (not --perform) */
    bool cleanup;                  /* the timed event is --cleanup-after-ms */
    bool easy_cleanup;             /* the timed event is --easy-cleanup-after-ms */
    char *post;                    /* --post: the POSTFIELDS buffer, a copy of BODY */
    bool rewrite_post;             /* --rewrite-post-at-cleanup */
    struct sock *socks;
    int running;
    struct xfer *x;
    long n, next, active, concurrency, finished;
    long pace_ms;                  /* --pace-ms: transfer i not before i * pace_ms */
    FILE *bench_out;
    bool wait, read_after_wait, keep_done, remove_twice;
    long timer_fail, timer_calls;  /* --timer-fail N; calls of the timer callback so far */
    long turns;                    /* turns of the perform loop ("cgmulti: turns=N") */
};

static struct timespec g_t0;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - g_t0.tv_sec) * 1e3 + (double)(t.tv_nsec - g_t0.tv_nsec) / 1e6;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "cgmulti: %s: %s\n", what, why);
    exit(1);
}

static void mcheck(const char *what, CURLMcode rc)
{
    if (rc != CURLM_OK)
        die(what, curl_multi_strerror(rc));
}

static struct xfer *xfer_of(void *p)
{
    struct xfer *x = p;
    if (!x || x->magic != XFER_MAGIC) {
        fprintf(stderr, "cgmulti: FATAL: a callback got a foreign data pointer %p\n", p);
        abort();
    }
    return x;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct xfer *x = xfer_of(userdata);
    size_t len = size * nmemb;
    double t = now_ms();
    if (x->writes == 0)
        x->first_ms = t;
    else if (t - x->last_ms > x->max_gap_ms)
        x->max_gap_ms = t - x->last_ms;
    x->last_ms = t;
    x->writes++;
    x->bytes += (curl_off_t)len;
    if (x->body && len && fwrite(ptr, 1, len, x->body) != len)
        return 0;
    return len;
}

static size_t header_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct xfer *x = xfer_of(userdata);
    size_t len = size * nmemb;
    x->header_bytes += (curl_off_t)len;
    if (x->headers && len && fwrite(ptr, 1, len, x->headers) != len)
        return 0;
    return len;
}

/* ------------------------------------------------------------------------ */
/* Adding and finishing transfers                                           */
/* ------------------------------------------------------------------------ */

static void add_next(struct global *g)
{
    while (g->next < g->n && (g->concurrency <= 0 || g->active < g->concurrency) &&
           (g->pace_ms <= 0 || now_ms() >= (double)(g->next * g->pace_ms))) {
        struct xfer *x = &g->x[g->next++];
        x->start_ms = now_ms();
        mcheck("curl_multi_add_handle", curl_multi_add_handle(g->multi, x->easy));
        x->added = true;
        g->active++;
    }
}

static void finish(struct global *g, struct xfer *x, CURLcode result)
{
    x->done = true;
    x->result = result;
    x->done_ms = now_ms();
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
    if (!g->keep_done) {
        mcheck("curl_multi_remove_handle", curl_multi_remove_handle(g->multi, x->easy));
        if (g->remove_twice)
            mcheck("curl_multi_remove_handle (again)",
                   curl_multi_remove_handle(g->multi, x->easy));
    }
    g->active--;
    g->finished++;
    if (x->body)
        fflush(x->body);
    if (g->bench_out) {
        fprintf(g->bench_out, "%ld %.1f %.1f %ld %d 1\n", x->index, x->start_ms, x->done_ms,
                x->status, (int)result);
        fflush(g->bench_out);
    }
}

static void check_multi_info(struct global *g)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(g->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        void *priv = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
        struct xfer *x = xfer_of(priv);
        if (x->easy != msg->easy_handle)
            die("CURLMSG_DONE", "CURLINFO_PRIVATE names another handle");
        if (x->done || x->removed) {
            fprintf(stderr, "cgmulti: FATAL: a second CURLMSG_DONE for transfer %ld\n",
                    x->index);
            abort();
        }
        finish(g, x, msg->data.result);
    }
    add_next(g);
}

static void remove_one(struct global *g, long idx)
{
    struct xfer *x = &g->x[idx];
    if (!x->added || x->done || x->removed)
        return;
    if (g->easy_cleanup) {
        curl_easy_cleanup(x->easy);  /* libcurl: removes it from the multi first */
        x->easy = NULL;
    } else {
        mcheck("curl_multi_remove_handle", curl_multi_remove_handle(g->multi, x->easy));
    }
    x->removed = true;
    x->done_ms = now_ms();
    g->active--;
    g->finished++;
    add_next(g);
}

/* How long the loop may wait: at most cap (the perform loop: 1 s, as libcurl's
 * multi-app.c; the socket_action loop waits for its timers and sockets only, as
 * ephiperfifo.c, so a timer libcurl was not told about is never covered up), the give-up
 * time, the next paced addition. */
static long wait_ms(const struct global *g, long cap, long max_ms)
{
    long wait = cap, t = (long)now_ms();
    if (max_ms - t < wait)
        wait = max_ms - t;
    if (g->pace_ms > 0 && g->next < g->n &&
        (g->concurrency <= 0 || g->active < g->concurrency)) {
        long due = g->next * g->pace_ms - t + 1;
        if (due < wait)
            wait = due;
    }
    return wait < 0 ? 0 : wait;
}

/* ------------------------------------------------------------------------ */
/* The socket_action loop (ephiperfifo.c)                                   */
/* ------------------------------------------------------------------------ */

static void arm(int fd, long ms)
{
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    if (ms > 0) {
        its.it_value.tv_sec = ms / 1000;
        its.it_value.tv_nsec = (ms % 1000) * 1000000L;
    } else if (ms == 0) {
        /* Both fields zero would disarm the timer: 1 ns is "now". */
        its.it_value.tv_nsec = 1;
    }
    timerfd_settime(fd, 0, &its, NULL);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct global *g = userp;
    if (multi != g->multi)
        die("CURLMOPT_TIMERFUNCTION", "called with another multi handle");
    g->timer_calls++;
    if (g->timer_fail > 0 && g->timer_calls > g->timer_fail)
        fprintf(stderr, "cgmulti: timer callback called after it returned -1\n");
    if (g->timer_fail > 0 && g->timer_calls >= g->timer_fail)
        return -1;
    arm(g->tfd, timeout_ms);
    return 0;
}

static void watch(struct global *g, struct sock *s, curl_socket_t fd, int what)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    ev.data.fd = fd;
    if (s->fd != CURL_SOCKET_BAD)
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    s->fd = fd;
    s->what = what;
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev))
        fprintf(stderr, "cgmulti: EPOLL_CTL_ADD fd %d: %s\n", fd, strerror(errno));
}

static int sock_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct global *g = userp;
    struct sock *s = socketp;
    if (s && s->magic != SOCK_MAGIC) {
        fprintf(stderr, "cgmulti: FATAL: socket callback got a foreign socket pointer\n");
        abort();
    }
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            if (s->fd != CURL_SOCKET_BAD)
                epoll_ctl(g->epfd, EPOLL_CTL_DEL, s->fd, NULL);
            if (s->prev)
                s->prev->next = s->next;
            else
                g->socks = s->next;
            if (s->next)
                s->next->prev = s->prev;
            free(s);
        }
        curl_multi_assign(g->multi, fd, NULL);
        return 0;
    }
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s)
            die("calloc", "out of memory");
        s->magic = SOCK_MAGIC;
        s->fd = CURL_SOCKET_BAD;
        s->next = g->socks;
        if (g->socks)
            g->socks->prev = s;
        g->socks = s;
        watch(g, s, fd, what);
        mcheck("curl_multi_assign", curl_multi_assign(g->multi, fd, s));
    } else {
        watch(g, s, fd, what);
    }
    return 0;
}

static void read_timer(int fd)
{
    uint64_t count;
    /* A timer that fired twice is read once: the second read may say EAGAIN. */
    if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
        die("read(timerfd)", strerror(errno));
}

static void socket_options(struct global *g)
{
    mcheck("CURLMOPT_SOCKETFUNCTION",
           curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, sock_cb));
    mcheck("CURLMOPT_SOCKETDATA", curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, g));
    mcheck("CURLMOPT_TIMERFUNCTION", curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, timer_cb));
    mcheck("CURLMOPT_TIMERDATA", curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, g));
}

/* --cleanup-after-ms: curl_multi_cleanup with the unfinished transfers inside, then the
 * same easy handles into a new multi handle, where they start over. */
static void restart_multi(struct global *g)
{
    if (g->rewrite_post) {
        size_t n = strlen(g->post); /* at least 8: checked with the options */
        memcpy(g->post, "{\"r\":\"", 6);
        memset(g->post + 6, 'x', n - 8);
        memcpy(g->post + n - 2, "\"}", 2);
    }
    mcheck("curl_multi_cleanup", curl_multi_cleanup(g->multi));
    g->multi = curl_multi_init();
    if (!g->multi)
        die("curl_multi_init", "failed");
    if (g->sockets) {
        /* The old multi's sockets are gone: forget what we watched for it. */
        while (g->socks) {
            struct sock *s = g->socks;
            g->socks = s->next;
            if (s->fd != CURL_SOCKET_BAD)
                epoll_ctl(g->epfd, EPOLL_CTL_DEL, s->fd, NULL);
            free(s);
        }
        arm(g->tfd, -1);
        socket_options(g);
    }
    for (long k = 0; k < g->next; k++) {
        struct xfer *x = &g->x[k];
        if (x->added && !x->done && !x->removed)
            mcheck("curl_multi_add_handle", curl_multi_add_handle(g->multi, x->easy));
    }
}

static void timed_event(struct global *g, long remove_idx)
{
    if (g->cleanup)
        restart_multi(g);
    else
        remove_one(g, remove_idx);
}

static int run_socket_action(struct global *g, long remove_ms, long remove_idx, long max_ms)
{
    g->sockets = true;
    socket_options(g);
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    g->rfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (g->epfd < 0 || g->tfd < 0 || g->rfd < 0)
        die("epoll/timerfd", strerror(errno));
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.fd = g->tfd;
    epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->tfd, &ev);
    if (remove_ms >= 0) {
        ev.data.fd = g->rfd;
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->rfd, &ev);
        arm(g->rfd, remove_ms);
    }

    add_next(g);        /* libcurl calls the timer function: the first timeout starts it */
    while (g->finished < g->n) {
        long left = max_ms - (long)now_ms();
        if (left <= 0)
            return 3;
        struct epoll_event evs[MAX_EVENTS];
        int n = epoll_wait(g->epfd, evs, MAX_EVENTS, (int)wait_ms(g, max_ms, max_ms));
        if (n == 0 && g->pace_ms > 0)
            add_next(g);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == g->tfd) {
                read_timer(fd);
                mcheck("curl_multi_socket_action",
                       curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &g->running));
            } else if (fd == g->rfd) {
                read_timer(fd);
                timed_event(g, remove_idx);
            } else {
                int action = ((evs[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                             ((evs[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                             ((evs[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
                mcheck("curl_multi_socket_action",
                       curl_multi_socket_action(g->multi, fd, action, &g->running));
            }
            check_multi_info(g);
        }
    }
    close(g->epfd);
    close(g->tfd);
    close(g->rfd);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The perform + poll loop                                                  */
/* ------------------------------------------------------------------------ */

static int run_perform(struct global *g, long remove_ms, long remove_idx, long max_ms)
{
    bool removal_due = remove_ms >= 0;
    add_next(g);
    while (g->finished < g->n) {
        double t = now_ms();
        if (t >= (double)max_ms)
            return 3;
        if (removal_due && t >= (double)remove_ms) {
            removal_due = false;
            timed_event(g, remove_idx);
            continue;
        }
        g->turns++;
        mcheck("curl_multi_perform", curl_multi_perform(g->multi, &g->running));
        if (!g->read_after_wait) {
            check_multi_info(g);
            if (g->finished >= g->n)
                break;
        }
        long wait = wait_ms(g, 1000, max_ms);
        if (removal_due && remove_ms - (long)t < wait)
            wait = remove_ms - (long)t;
        if (wait < 0)
            wait = 0;
        if (g->wait)
            mcheck("curl_multi_wait", curl_multi_wait(g->multi, NULL, 0, (int)wait, NULL));
        else
            mcheck("curl_multi_poll", curl_multi_poll(g->multi, NULL, 0, (int)wait, NULL));
        if (g->read_after_wait)
            check_multi_info(g);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */
/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: cgmulti [--perform] [--post BODY] [--idempotency-key K] [--header H]...\n"
            "               [--wait] [--read-after-wait] [--keep-done] [--remove-twice]\n"
            "               [--turns] [--timer-fail N]\n"
            "               [--out-dir DIR] [--remove-after-ms K IDX] [--cleanup-after-ms K]\n"
            "               [--easy-cleanup-after-ms K IDX] [--rewrite-post-at-cleanup]\n"
            "               [--timing FILE] [--max-connections N]\n"
            "               [--timeout-ms N] [--max-ms N]\n"
            "               [--bodies FILE --calls N [--concurrency T] [--pace-ms P]\n"
            "                [--bench-out F]] URL...\n");
    exit(2);
}

static char **read_lines(const char *path, long *count)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die(path, strerror(errno));
    char **lines = NULL;
    long n = 0, cap = 0;
    char *line = NULL;
    size_t sz = 0;
    ssize_t len;
    while ((len = getline(&line, &sz, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (!len)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            lines = realloc(lines, (size_t)cap * sizeof(*lines));
            if (!lines)
                die("realloc", "out of memory");
        }
        lines[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    *count = n;
    return lines;
}

static FILE *open_out(const char *dir, long i, const char *ext)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%ld.%s", dir, i, ext);
    FILE *f = fopen(path, "wb");
    if (!f)
        die(path, strerror(errno));
    return f;
}

int main(int argc, char **argv)
{
    bool perform = false;
    const char *post = NULL, *idem = NULL, *out_dir = NULL, *timing = NULL;
    const char *bodies = NULL, *bench_out = NULL;
    long remove_ms = -1, remove_idx = -1, timeout_ms = -1, max_ms = 45000, calls = -1;
    long concurrency = 0, pace = 0;
    bool cleanup = false, easy_cleanup = false, rewrite_post = false;
    bool wait = false, read_after_wait = false, keep_done = false, remove_twice = false;
    bool turns = false;
    long timer_fail = 0;
    long max_conn = 0;
    struct curl_slist *extra = NULL;
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        const char *a = argv[i];
        bool has1 = i + 1 < argc;
        if (!strcmp(a, "--perform"))
            perform = true;
        else if (!strcmp(a, "--wait"))
            perform = wait = true;
        else if (!strcmp(a, "--read-after-wait"))
            read_after_wait = true;
        else if (!strcmp(a, "--keep-done"))
            keep_done = true;
        else if (!strcmp(a, "--remove-twice"))
            remove_twice = true;
        else if (!strcmp(a, "--turns"))
            turns = true;
        else if (!strcmp(a, "--timer-fail") && has1)
            timer_fail = strtol(argv[++i], NULL, 10);
        else if (!strcmp(a, "--post") && has1)
            post = argv[++i];
        else if (!strcmp(a, "--idempotency-key") && has1)
            idem = argv[++i];
        else if (!strcmp(a, "--header") && has1)
            extra = curl_slist_append(extra, argv[++i]);
        else if (!strcmp(a, "--out-dir") && has1)
            out_dir = argv[++i];
        else if (!strcmp(a, "--timing") && has1)
            timing = argv[++i];
        else if (!strcmp(a, "--remove-after-ms") && i + 2 < argc) {
            remove_ms = strtol(argv[++i], NULL, 10);
            remove_idx = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--easy-cleanup-after-ms") && i + 2 < argc) {
            remove_ms = strtol(argv[++i], NULL, 10);
            remove_idx = strtol(argv[++i], NULL, 10);
            easy_cleanup = true;
        } else if (!strcmp(a, "--cleanup-after-ms") && has1) {
            remove_ms = strtol(argv[++i], NULL, 10);
            cleanup = true;
        } else if (!strcmp(a, "--rewrite-post-at-cleanup")) {
            rewrite_post = true;
        } else if (!strcmp(a, "--max-connections") && has1) {
            max_conn = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--timeout-ms") && has1)
            timeout_ms = strtol(argv[++i], NULL, 10);
        else if (!strcmp(a, "--max-ms") && has1)
            max_ms = strtol(argv[++i], NULL, 10);
        else if (!strcmp(a, "--bodies") && has1)
            bodies = argv[++i];
        else if (!strcmp(a, "--calls") && has1)
            calls = strtol(argv[++i], NULL, 10);
        else if (!strcmp(a, "--concurrency") && has1)
            concurrency = strtol(argv[++i], NULL, 10);
        else if (!strcmp(a, "--pace-ms") && has1)
            pace = strtol(argv[++i], NULL, 10);
        else if (!strcmp(a, "--bench-out") && has1)
            bench_out = argv[++i];
        else
            usage();
    }
    long nurls = argc - i;
    char **urls = argv + i;
    if (nurls < 1 || (bodies && calls < 1) || (!bodies && calls >= 0))
        usage();
    if (rewrite_post && (!post || strlen(post) < 8 || !cleanup))
        usage();

    clock_gettime(CLOCK_MONOTONIC, &g_t0);
    if (curl_global_init(CURL_GLOBAL_DEFAULT))
        die("curl_global_init", "failed");

    char **lines = NULL;
    long nlines = 0;
    if (bodies) {
        lines = read_lines(bodies, &nlines);
        if (!nlines)
            die(bodies, "no bodies");
    }
    struct global g;
    memset(&g, 0, sizeof(g));
    g.n = bodies ? calls : nurls;
    g.concurrency = concurrency;
    g.pace_ms = pace;
    g.cleanup = cleanup;
    g.easy_cleanup = easy_cleanup;
    g.rewrite_post = rewrite_post;
    g.wait = wait;
    g.read_after_wait = read_after_wait;
    g.keep_done = keep_done;
    g.remove_twice = remove_twice;
    g.timer_fail = timer_fail;
    if (post && !(g.post = strdup(post)))
        die("init", "out of memory");
    if (remove_idx >= g.n)
        usage();
    g.x = calloc((size_t)g.n, sizeof(*g.x));
    g.multi = curl_multi_init();
    if (!g.x || !g.multi)
        die("init", "out of memory");
    if (max_conn > 0)
        mcheck("CURLMOPT_MAX_TOTAL_CONNECTIONS",
               curl_multi_setopt(g.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max_conn));
    if (bench_out && !(g.bench_out = fopen(bench_out, "w")))
        die(bench_out, strerror(errno));

    for (long k = 0; k < g.n; k++) {
        struct xfer *x = &g.x[k];
        x->magic = XFER_MAGIC;
        x->index = k;
        x->first_ms = x->last_ms = x->done_ms = -1;
        x->easy = curl_easy_init();
        if (!x->easy)
            die("curl_easy_init", "failed");
        CURL *e = x->easy;
        curl_easy_setopt(e, CURLOPT_URL, bodies ? urls[0] : urls[k]);
        curl_easy_setopt(e, CURLOPT_PRIVATE, x);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
        if (timeout_ms >= 0)
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
        for (struct curl_slist *h = extra; h; h = h->next)
            x->hdrs = curl_slist_append(x->hdrs, h->data);
        const char *body = g.post;
        if (bodies) {
            x->post = strdup(lines[k % nlines]);
            body = x->post;
        }
        if (body) {
            x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        }
        if (idem) {
            char h[512];
            snprintf(h, sizeof(h), "Idempotency-Key: %s-%ld", idem, k);
            x->hdrs = curl_slist_append(x->hdrs, h);
        }
        if (x->hdrs)
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
        if (out_dir) {
            x->body = open_out(out_dir, k, "body");
            x->headers = open_out(out_dir, k, "headers");
        }
    }

    int rc = perform ? run_perform(&g, remove_ms, remove_idx, max_ms)
                     : run_socket_action(&g, remove_ms, remove_idx, max_ms);
    if (rc == 3) {
        fprintf(stderr, "cgmulti: gave up after %ld ms with %ld of %ld transfers finished\n",
                max_ms, g.finished, g.n);
        fflush(NULL);
        _exit(3);
    }

    long ok = 0, removed = 0;
    FILE *tf = timing ? fopen(timing, "w") : NULL;
    if (timing && !tf)
        die(timing, strerror(errno));
    for (long k = 0; k < g.n; k++) {
        struct xfer *x = &g.x[k];
        if (x->removed) {
            printf("%ld removed\n", k);
            removed++;
        } else {
            printf("%ld %d %ld %ld\n", k, (int)x->result, x->status, (long)x->bytes);
            ok += x->result == CURLE_OK;
        }
        if (tf)
            fprintf(tf, "%ld %.1f %.1f %.1f %.1f %.1f %ld\n", k, x->start_ms, x->first_ms,
                    x->last_ms, x->done_ms, x->max_gap_ms, x->writes);
        if (x->body)
            fclose(x->body);
        if (x->headers)
            fclose(x->headers);
        if (x->easy && keep_done && x->done)
            mcheck("curl_multi_remove_handle", curl_multi_remove_handle(g.multi, x->easy));
        if (x->easy)
            curl_easy_cleanup(x->easy);
        curl_slist_free_all(x->hdrs);
        free(x->post);
    }
    if (tf)
        fclose(tf);
    if (g.bench_out)
        fclose(g.bench_out);
    curl_multi_cleanup(g.multi);
    for (long k = 0; k < nlines; k++)
        free(lines[k]);
    free(lines);
    free(g.x);
    free(g.post);
    curl_slist_free_all(extra);
    curl_global_cleanup();
    if (perform && turns)
        fprintf(stderr, "cgmulti: turns=%ld\n", g.turns);
    fprintf(stderr, "cgmulti: transfers=%ld ok=%ld removed=%ld\n", g.n, ok, removed);
    return ok == g.n ? 0 : 1;
}
