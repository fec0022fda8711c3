/*
 * batch-host - a libcurl batch client for curlguard's benchmarks (bench/run.py).
 *
 * Like a user's batch job: T threads, each with one easy handle (keep-alive connection
 * reused), take the next call from a shared counter and POST its JSON body (line i of
 * --bodies) to --url. Knows nothing about curlguard: run it plainly or under LD_PRELOAD.
 * The retry policies are the ones users write themselves:
 *   --retry none       one attempt per call
 *   --retry naive:K    up to K attempts; any failure (curl error or non-2xx) -> sleep 1 s
 *   --retry curl:K     what `curl --retry K` does: up to K retries on a timeout, 408, 429,
 *                      500, 502, 503, 504; waits Retry-After (seconds) if given, else 1 s
 *                      doubling
 * Output (--out, default stdout): one line per call, written (and flushed) as it ends, so a
 * batch stopped half-way still tells what its finished calls got:
 *   i start_ms end_ms status curl_code attempts
 * times in ms since the batch started (CLOCK_MONOTONIC); status 0 without a response.
 * --no-lines: no per-call lines (scenario 1 measures the client's CPU, syscalls and RSS; the
 * count of 2xx answers is on stderr). Memory does not grow with --calls: nothing is kept per
 * call, so a flat max RSS from 10,000 to 100,000 calls shows no leak per request.
 * On stderr at the end: "batch-host: calls=N ok=K wall_ms=W".
 *
 * Build: cc -O2 -o build/bench/batch-host bench/batch-host.c -lcurl -lpthread
 */
#include <curl/curl.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

enum policy { RETRY_NONE, RETRY_NAIVE, RETRY_CURL };

struct call {
    double start_ms, end_ms;
    long status;
    int code;
    int attempts;
};

static const char *g_url;
static char **g_bodies;
static long g_ncalls;
static long g_timeout_ms;
static int g_index_query;
static enum policy g_policy = RETRY_NONE;
static int g_k;
static long g_nbodies;
static int g_no_lines;
static atomic_long g_next;
static atomic_long g_ok;
static struct timespec g_t0;
static FILE *g_out;
static pthread_mutex_t g_out_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - g_t0.tv_sec) * 1e3 + (double)(t.tv_nsec - g_t0.tv_nsec) / 1e6;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
}

static size_t sink(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* Retry-After in whole seconds (what the curl tool uses), -1 if none. */
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    long *ra = ud;
    size_t len = size * n;
    if (len > 12 && strncasecmp(p, "retry-after:", 12) == 0) {
        char buf[64];
        size_t m = len - 12 < sizeof buf - 1 ? len - 12 : sizeof buf - 1;
        memcpy(buf, p + 12, m);
        buf[m] = 0;
        char *end;
        long v = strtol(buf, &end, 10);
        if (end != buf && v >= 0)
            *ra = v;
    }
    return len;
}

static int transient(int code, long status)
{
    if (code == CURLE_OPERATION_TIMEDOUT)
        return 1;
    if (code != CURLE_OK)
        return 0;
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
           status == 504;
}

static void *worker(void *arg)
{
    (void)arg;
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    char url[4096];
    long ra = -1;
    for (;;) {
        long i = atomic_fetch_add(&g_next, 1);
        if (i >= g_ncalls)
            break;
        struct call call = {0}, *c = &call;
        if (g_index_query)
            snprintf(url, sizeof url, "%s%si=%ld", g_url, strchr(g_url, '?') ? "&" : "?", i);
        else
            snprintf(url, sizeof url, "%s", g_url);
        c->start_ms = now_ms();
        long wait = 1000;
        for (int attempt = 1;; attempt++) {
            curl_easy_reset(h);
            curl_easy_setopt(h, CURLOPT_URL, url);
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, g_bodies[i % g_nbodies]);
            curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
            curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
            curl_easy_setopt(h, CURLOPT_HEADERDATA, &ra);
            curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
            curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
            if (g_timeout_ms > 0)
                curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, g_timeout_ms);
            ra = -1;
            int code = curl_easy_perform(h);
            long status = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
            c->code = code;
            c->status = status;
            c->attempts = attempt;
            int ok = code == CURLE_OK && status >= 200 && status < 300;
            if (ok || g_policy == RETRY_NONE)
                break;
            if (g_policy == RETRY_NAIVE) {
                if (attempt >= g_k)
                    break;
                sleep_ms(1000);
            } else {
                if (attempt > g_k || !transient(code, status))
                    break;
                sleep_ms(ra >= 0 ? ra * 1000 : wait);
                if (ra < 0)
                    wait = wait * 2 > 600000 ? 600000 : wait * 2;
            }
        }
        c->end_ms = now_ms();
        if (c->code == CURLE_OK && c->status >= 200 && c->status < 300)
            atomic_fetch_add(&g_ok, 1);
        if (g_no_lines)
            continue;
        pthread_mutex_lock(&g_out_lock);
        fprintf(g_out, "%ld %.1f %.1f %ld %d %d\n", i, c->start_ms, c->end_ms, c->status, c->code,
                c->attempts);
        fflush(g_out);
        pthread_mutex_unlock(&g_out_lock);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: batch-host --url URL --bodies FILE [--calls N] [--threads T]\n"
                    "                  [--timeout-ms MS] [--retry none|naive:K|curl:K]\n"
                    "                  [--index-query] [--out FILE | --no-lines]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *bodies = NULL, *out = NULL;
    long threads = 1, calls = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--index-query")) {
            g_index_query = 1;
            continue;
        }
        if (!strcmp(a, "--no-lines")) {
            g_no_lines = 1;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--url"))
            g_url = v;
        else if (!strcmp(a, "--bodies"))
            bodies = v;
        else if (!strcmp(a, "--calls"))
            calls = strtol(v, NULL, 10);
        else if (!strcmp(a, "--threads"))
            threads = strtol(v, NULL, 10);
        else if (!strcmp(a, "--timeout-ms"))
            g_timeout_ms = strtol(v, NULL, 10);
        else if (!strcmp(a, "--out"))
            out = v;
        else if (!strcmp(a, "--retry")) {
            if (!strcmp(v, "none"))
                g_policy = RETRY_NONE;
            else if (!strncmp(v, "naive:", 6))
                g_policy = RETRY_NAIVE, g_k = atoi(v + 6);
            else if (!strncmp(v, "curl:", 5))
                g_policy = RETRY_CURL, g_k = atoi(v + 5);
            else
                return usage();
        } else
            return usage();
    }
    if (!g_url || !bodies || threads < 1 || threads > 1024 || g_k < 0)
        return usage();

    /* Bodies: one per line; --calls N cycles through them (N > lines) or takes the first N. */
    FILE *f = fopen(bodies, "r");
    if (!f) {
        perror(bodies);
        return 1;
    }
    long cap = 1024, n = 0;
    char **lines = malloc(cap * sizeof *lines);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while (lines && (len = getline(&line, &lcap, f)) > 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!len)
            continue;
        if (n == cap) {
            char **grown = realloc(lines, (cap *= 2) * sizeof *lines);
            if (!grown)
                return 1;
            lines = grown;
        }
        lines[n++] = strdup(line);
    }
    free(line);
    fclose(f);
    if (!lines || n == 0) {
        fprintf(stderr, "batch-host: no bodies in %s\n", bodies);
        return 1;
    }
    g_ncalls = calls < 0 ? n : calls;
    g_bodies = lines;
    g_nbodies = n;

    g_out = g_no_lines ? NULL : out ? fopen(out, "w") : stdout;
    if (!g_out && !g_no_lines) {
        perror(out);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    clock_gettime(CLOCK_MONOTONIC, &g_t0);
    pthread_t tid[1024];
    long started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, worker, NULL))
            break;
    for (long t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    double wall = now_ms();

    long ok = atomic_load(&g_ok);
    if (g_out && g_out != stdout)
        fclose(g_out);
    fprintf(stderr, "batch-host: calls=%ld ok=%ld wall_ms=%.0f\n", g_ncalls, ok, wall);
    curl_global_cleanup();
    return 0;
}
