/*
 * cghost - an ordinary libcurl program used as a test host for curlguard.
 *
 * It knows nothing about the interposer.  It sets up one easy handle the way
 * a real application would (own write/header/read/seek/progress callbacks,
 * error buffer, duphandle, reset, repeated performs, several threads), runs
 * curl_easy_perform and prints what it saw in a deterministic form, so a
 * test can run it once plainly and once under LD_PRELOAD=libcurlguard.so and
 * compare the two outputs byte for byte.
 *
 * Build: cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g \
 *           -o build/tests/cghost tests/hosts/cghost.c -lcurl -lpthread
 * Usage and output format: see usage() below and tests/hosts/README.md.
 */
#include <curl/curl.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Older headers lack this helper; the deprecated option still works. */
#ifndef CURL_IGNORE_DEPRECATION
#define CURL_IGNORE_DEPRECATION(statements) statements
#endif

#define BODY_SINK_MAGIC   0x426f6479u /* "Body" */
#define HEADER_SINK_MAGIC 0x48656164u /* "Head" */
#define SOURCE_MAGIC      0x52656164u /* "Read" */
#define PROGRESS_MAGIC    0x50726f67u /* "Prog" */
#define HOOK_MAGIC        0x486f6f6bu /* "Hook": HSTS, resolver, socket, share data */

#define READ_CHUNK_MAX 7 /* the read callback hands out at most this much */
#define MAX_THREADS    256

/* ------------------------------------------------------------------------ */
/* Configuration from the command line                                      */
/* ------------------------------------------------------------------------ */

enum write_mode { WRITE_CB, WRITE_DEFAULT, WRITE_DATA };
enum header_mode { HEADERS_NONE, HEADERS_CB, HEADERS_DATA };
enum progress_mode { PROGRESS_NONE, PROGRESS_XFERINFO, PROGRESS_OLD };

struct config {
    const char *url;
    const char *url2;              /* URL of every perform after the first */
    const char *protocols_str;     /* CURLOPT_PROTOCOLS_STR; libcurl may refuse it */
    const char *method;            /* NULL: not given */
    const char *post_fields;       /* CURLOPT_POSTFIELDS */
    const char *copy_post_fields;  /* CURLOPT_COPYPOSTFIELDS */
    bool has_post_size;
    curl_off_t post_size;          /* CURLOPT_POSTFIELDSIZE_LARGE */
    const char *read_body;         /* sent through the read callback */
    bool seek;
    bool seek_fail;                /* the seek callback returns CURL_SEEKFUNC_FAIL */
    struct curl_slist *headers;    /* CURLOPT_HTTPHEADER, shared read-only */
    enum write_mode write_mode;
    const char *out_path;          /* --out, for --write data */
    enum header_mode header_mode;
    const char *header_out;        /* --header-out, NULL: stderr */
    enum progress_mode progress_mode;
    long abort_progress_after;     /* 0: never */
    curl_off_t abort_write_after;  /* -1: never */
    bool pause_once;
    bool unpause_from_thread;      /* --pause-once resumed by another thread, not progress */
    bool errbuf;
    long timeout_ms, timeout_s, connect_timeout_ms; /* -1: not set */
    bool follow, include, verbose, nosignal;
    bool dup, twice, reset;
    long threads;                  /* 0: run in main, unbuffered */
    const char *form_stream;       /* curl_formadd CURLFORM_STREAM part, read callback */
    bool header_info;              /* header callback prints getinfo per line */
    bool hsts_oneshot, hsts_fail;  /* HSTS read callback: one entry / CURLSTS_FAIL */
    bool resolver_start_refuse;    /* RESOLVER_START_FUNCTION returns 1 */
    bool opensocket_refuse;        /* OPENSOCKETFUNCTION returns CURL_SOCKET_BAD */
    bool closesocket;              /* CLOSESOCKETFUNCTION prints [CLOSE] to stdout */
    bool share_locks;              /* a share (connections) whose lock/unlock print */
    bool curlu;                    /* the URL through CURLOPT_CURLU, not CURLOPT_URL */
    bool dup_in_callback;          /* duphandle inside the header callback, run the copy
                                      through the multi API afterwards */
    bool swap_data_in_callback;    /* the first header callback points WRITEDATA,
                                      HEADERDATA and XFERINFODATA at second sinks */
};

/* ------------------------------------------------------------------------ */
/* Per-scenario state (one per thread)                                      */
/* ------------------------------------------------------------------------ */

enum pause_state { PAUSE_OFF, PAUSE_ARMED, PAUSE_WAITING, PAUSE_DONE };

/* WRITEDATA of the own write callback. */
struct body_sink {
    unsigned magic;
    FILE *out;
    curl_off_t limit;              /* --abort-write-after, -1: none */
    enum pause_state pause;
    long calls;
    curl_off_t bytes;
};

/* HEADERDATA of the own header callback. */
struct header_sink {
    unsigned magic;
    FILE *out;
    const char *prefix;
    long calls;
    CURL *info;                    /* --header-info: the handle to ask, or NULL */
    CURL *dup_from;                /* --dup-in-callback: the handle being performed */
    CURL *dup;                     /* its copy, made in the first header callback */
    CURL *swap_on;                 /* --swap-data-in-callback: the handle being performed,
                                      until the first header callback swapped its data */
    void *swap_body, *swap_headers, *swap_progress; /* the second sinks */
};

/* READDATA / SEEKDATA: the request body. */
struct body_source {
    unsigned magic;
    const char *data;
    size_t len;
    size_t pos;
    curl_off_t handed_out;
    long seeks;
    bool fail;                     /* --seek-fail */
};

/* XFERINFODATA / PROGRESSDATA. */
struct progress_state {
    unsigned magic;
    long calls;
    long abort_after;
    struct body_sink *body;        /* to resume a paused transfer */
    CURL *handle;                  /* the handle being performed */
    FILE *err;
    bool from_thread;              /* --unpause-from-thread: not the progress callback */
};

/* HSTSREADDATA, RESOLVER_START_DATA, OPENSOCKETDATA, CLOSESOCKETDATA, SHAREDATA. */
struct hooks {
    unsigned magic;
    FILE *out;                     /* stdout of the scenario: ordered with the body */
    FILE *err;
    int hsts_calls;
    bool hsts_done;                /* the one-shot iterator said CURLSTS_DONE */
    CURLSH *share;
};

/* An in-memory stream used to keep thread output apart. */
struct capture {
    FILE *fp;
    char *buf;
    size_t len;
};

enum { CAP_OUT, CAP_ERR, CAP_BODY_FILE, CAP_HEADER_FILE, CAP_COUNT };

struct scenario {
    const struct config *cfg;
    CURLU *curlu;                  /* --curlu: the handle's URL, freed after it */
    int thread_no;                 /* 1-based; 0 when not threaded */
    FILE *out;                     /* body (own write callback) */
    FILE *err;                     /* summary lines, diagnostics */
    FILE *body_file;               /* --write data target, or NULL */
    FILE *header_file;             /* --header-out target, or NULL */
    FILE *header_data;             /* what HEADERDATA points at (data mode) */
    struct capture cap[CAP_COUNT]; /* threaded mode only */
    char errbuf[CURL_ERROR_SIZE];
    struct body_sink body;
    struct header_sink headers;
    struct body_source source;
    struct progress_state progress;
    /* --swap-data-in-callback: the sinks the data options point at after the swap. */
    struct body_sink body2;
    struct header_sink headers2;
    struct progress_state progress2;
    struct hooks hooks;
    struct curl_httppost *form;    /* --form-stream */
    int performs;
    bool failed;
};

/* All scenarios, read-only once the threads run (see find_body_sink). */
static struct scenario *g_scenarios;
static long g_scenario_count;

/* ------------------------------------------------------------------------ */
/* Usage and argument parsing                                               */
/* ------------------------------------------------------------------------ */

static void usage(FILE *fp)
{
    fputs(
"usage: cghost [options] URL\n"
"  --method M               GET (default), HEAD, POST, PUT or any other word\n"
"  --post-fields STR        CURLOPT_POSTFIELDS (buffer stays alive)\n"
"  --copy-post-fields STR   CURLOPT_COPYPOSTFIELDS (buffer wiped right after)\n"
"  --post-size-large N      CURLOPT_POSTFIELDSIZE_LARGE\n"
"  --read-body STR          send STR through a read callback (<= 7 bytes/call)\n"
"  --seek                   also install a seek callback for the read body\n"
"  --seek-fail              the seek callback returns CURL_SEEKFUNC_FAIL\n"
"  --header 'Name: value'   add a request header (repeatable)\n"
"  --write cb|default|data  body: own callback | libcurl's fwrite to stdout |\n"
"                           libcurl's fwrite to WRITEDATA = --out PATH\n"
"  --out PATH               file for --write data\n"
"  --headers cb|data|none   own header callback | HEADERDATA only | nothing\n"
"  --header-out PATH        file for response headers (default: stderr)\n"
"  --progress xferinfo|progress|none\n"
"  --abort-progress-after N progress callback returns 1 on its N-th call\n"
"  --abort-write-after N    write callback stops after N body bytes\n"
"  --pause-once             write callback pauses once, progress resumes\n"
"  --unpause-from-thread    write callback pauses once, another thread resumes (as some\n"
"                           hosts do, though curl_easy_pause(3) says it cannot be done)\n"
"  --errbuf                 set CURLOPT_ERRORBUFFER (pre-filled with 'Z')\n"
"  --timeout-ms N | --timeout S | --connect-timeout-ms N\n"
"  --follow | --include | --verbose | --nosignal\n"
"  --dup                    perform on a curl_easy_duphandle copy\n"
"  --twice                  perform twice on the same handle\n"
"  --reset                  curl_easy_reset, set URL (+ write cb), perform\n"
"  --url2 URL               URL for the performs after the first\n"
"  --protocols-str LIST     CURLOPT_PROTOCOLS_STR (its result is printed, a refusal too)\n"
"  --threads N              run everything in N threads at once\n"
"  --form-stream STR        form post (curl_formadd) of one CURLFORM_STREAM part\n"
"                           read through the read callback with its own pointer\n"
"  --header-info            header callback prints code, scheme, URL per line\n"
"  --hsts-oneshot           HSTS read callback: one entry, then done; fatal if\n"
"                           called again after it said done\n"
"  --hsts-fail              HSTS read callback returns CURLSTS_FAIL\n"
"  --resolver-start-refuse  resolver start callback returns 1\n"
"  --opensocket-refuse      open-socket callback returns CURL_SOCKET_BAD\n"
"  --closesocket            close-socket callback prints [CLOSE] to stdout\n"
"  --share-locks            connection share; lock/unlock print to stdout\n"
"  --curlu                  give the URL with CURLOPT_CURLU (a curl_url handle)\n"
"  --swap-data-in-callback the first header callback sets WRITEDATA, HEADERDATA and\n"
"                           XFERINFODATA to second sinks (header prefix H2:); their\n"
"                           counts follow each summary line\n"
"  --dup-in-callback        duphandle in the first header callback; the copy is\n"
"                           then run through the multi API and reported\n",
        fp);
}

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
    va_list ap;

    fputs("cghost: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    usage(stderr);
    exit(2);
}

static const char *take_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        usage_error("%s needs a value", argv[*i]);
    *i += 1;
    return argv[*i];
}

static long long parse_number(const char *opt, const char *text,
                              long long min, long long max)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max)
        usage_error("%s: bad number '%s' (allowed %lld..%lld)",
                    opt, text, min, max);
    return v;
}

static enum write_mode parse_write_mode(const char *v)
{
    if (!strcmp(v, "cb"))      return WRITE_CB;
    if (!strcmp(v, "default")) return WRITE_DEFAULT;
    if (!strcmp(v, "data"))    return WRITE_DATA;
    usage_error("--write: expected cb, default or data, got '%s'", v);
}

static enum header_mode parse_header_mode(const char *v)
{
    if (!strcmp(v, "cb"))   return HEADERS_CB;
    if (!strcmp(v, "data")) return HEADERS_DATA;
    if (!strcmp(v, "none")) return HEADERS_NONE;
    usage_error("--headers: expected cb, data or none, got '%s'", v);
}

static enum progress_mode parse_progress_mode(const char *v)
{
    if (!strcmp(v, "xferinfo")) return PROGRESS_XFERINFO;
    if (!strcmp(v, "progress")) return PROGRESS_OLD;
    if (!strcmp(v, "none"))     return PROGRESS_NONE;
    usage_error("--progress: expected xferinfo, progress or none, got '%s'",
                v);
}

static void add_header(struct config *cfg, const char *line)
{
    struct curl_slist *l = curl_slist_append(cfg->headers, line);

    if (!l) {
        fputs("cghost: out of memory\n", stderr);
        exit(1);
    }
    cfg->headers = l;
}

/* Handles one option that takes a value; false if `opt` is not one. */
static bool parse_valued_option(struct config *cfg, const char *opt,
                                int argc, char **argv, int *i)
{
#define IS(name) (!strcmp(opt, name))
#define VALUE() take_value(argc, argv, i)
#define NUMBER(min, max) parse_number(opt, VALUE(), (min), (max))
    if (IS("--method"))                    cfg->method = VALUE();
    else if (IS("--post-fields"))          cfg->post_fields = VALUE();
    else if (IS("--copy-post-fields"))     cfg->copy_post_fields = VALUE();
    else if (IS("--post-size-large")) {
        cfg->has_post_size = true;
        cfg->post_size = (curl_off_t)NUMBER(-1, LLONG_MAX);
    }
    else if (IS("--read-body"))            cfg->read_body = VALUE();
    else if (IS("--header"))               add_header(cfg, VALUE());
    else if (IS("--write"))                cfg->write_mode = parse_write_mode(VALUE());
    else if (IS("--out"))                  cfg->out_path = VALUE();
    else if (IS("--headers"))              cfg->header_mode = parse_header_mode(VALUE());
    else if (IS("--header-out"))           cfg->header_out = VALUE();
    else if (IS("--progress"))             cfg->progress_mode = parse_progress_mode(VALUE());
    else if (IS("--abort-progress-after")) cfg->abort_progress_after = (long)NUMBER(1, LONG_MAX);
    else if (IS("--abort-write-after"))    cfg->abort_write_after = (curl_off_t)NUMBER(0, LLONG_MAX);
    else if (IS("--timeout-ms"))           cfg->timeout_ms = (long)NUMBER(0, LONG_MAX);
    else if (IS("--timeout"))              cfg->timeout_s = (long)NUMBER(0, LONG_MAX);
    else if (IS("--connect-timeout-ms"))   cfg->connect_timeout_ms = (long)NUMBER(0, LONG_MAX);
    else if (IS("--url2"))                 cfg->url2 = VALUE();
    else if (IS("--protocols-str"))        cfg->protocols_str = VALUE();
    else if (IS("--threads"))              cfg->threads = (long)NUMBER(1, MAX_THREADS);
    else if (IS("--form-stream"))          cfg->form_stream = VALUE();
    else
        return false;
    return true;
#undef IS
#undef VALUE
#undef NUMBER
}

/* Handles one flag; false if `opt` is not one. */
static bool parse_flag(struct config *cfg, const char *opt)
{
    static const struct { const char *name; size_t offset; } flags[] = {
        { "--seek",       offsetof(struct config, seek) },
        { "--seek-fail",  offsetof(struct config, seek_fail) },
        { "--pause-once", offsetof(struct config, pause_once) },
        { "--unpause-from-thread", offsetof(struct config, unpause_from_thread) },
        { "--errbuf",     offsetof(struct config, errbuf) },
        { "--follow",     offsetof(struct config, follow) },
        { "--include",    offsetof(struct config, include) },
        { "--verbose",    offsetof(struct config, verbose) },
        { "--nosignal",   offsetof(struct config, nosignal) },
        { "--dup",        offsetof(struct config, dup) },
        { "--twice",      offsetof(struct config, twice) },
        { "--reset",      offsetof(struct config, reset) },
        { "--header-info", offsetof(struct config, header_info) },
        { "--hsts-oneshot", offsetof(struct config, hsts_oneshot) },
        { "--hsts-fail",  offsetof(struct config, hsts_fail) },
        { "--resolver-start-refuse", offsetof(struct config, resolver_start_refuse) },
        { "--opensocket-refuse", offsetof(struct config, opensocket_refuse) },
        { "--closesocket", offsetof(struct config, closesocket) },
        { "--share-locks", offsetof(struct config, share_locks) },
        { "--dup-in-callback", offsetof(struct config, dup_in_callback) },
        { "--swap-data-in-callback", offsetof(struct config, swap_data_in_callback) },
        { "--curlu",      offsetof(struct config, curlu) },
    };
    size_t k;

    for (k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        if (!strcmp(flags[k].name, opt)) {
            *(bool *)((char *)cfg + flags[k].offset) = true;
            return true;
        }
    }
    return false;
}

static bool is_get_or_head(const char *method)
{
    return method && (!strcmp(method, "GET") || !strcmp(method, "HEAD"));
}

/* Rejects combinations that make no sense or cannot stay deterministic. */
static void check_config(const struct config *cfg)
{
    const char *fields = cfg->post_fields ? cfg->post_fields
                                          : cfg->copy_post_fields;

    if (!cfg->url)
        usage_error("no URL given");
    if (cfg->post_fields && cfg->copy_post_fields)
        usage_error("give at most one of --post-fields and --copy-post-fields");
    if (cfg->read_body && (cfg->post_fields || cfg->copy_post_fields))
        usage_error("--read-body cannot be combined with --(copy-)post-fields");
    if (cfg->has_post_size && fields &&
        cfg->post_size > (curl_off_t)strlen(fields))
        usage_error("--post-size-large exceeds the length of the post fields");
    if (cfg->read_body && is_get_or_head(cfg->method))
        usage_error("--read-body needs POST, PUT or a custom method");
    if (cfg->seek && !cfg->read_body)
        usage_error("--seek needs --read-body");
    if (cfg->write_mode == WRITE_DATA && !cfg->out_path)
        usage_error("--write data needs --out PATH");
    if (cfg->write_mode != WRITE_DATA && cfg->out_path)
        usage_error("--out is only used with --write data");
    if (cfg->header_mode == HEADERS_NONE && cfg->header_out)
        usage_error("--header-out needs --headers cb or data");
    if (cfg->write_mode != WRITE_CB &&
        (cfg->pause_once || cfg->abort_write_after >= 0))
        usage_error("--pause-once and --abort-write-after need --write cb");
    if (cfg->abort_progress_after && cfg->progress_mode == PROGRESS_NONE &&
        !cfg->pause_once)
        usage_error("--abort-progress-after needs --progress");
    if (cfg->url2 && !cfg->twice && !cfg->reset)
        usage_error("--url2 needs --twice or --reset");
    if (cfg->threads && cfg->write_mode == WRITE_DEFAULT)
        usage_error("--threads cannot keep --write default output apart");
    if (cfg->threads && cfg->reset && cfg->write_mode != WRITE_CB)
        usage_error("--threads with --reset needs --write cb");
    if (cfg->form_stream && (cfg->read_body || fields || cfg->method))
        usage_error("--form-stream is the request body: no other body or --method");
    if (cfg->header_info && cfg->header_mode != HEADERS_CB)
        usage_error("--header-info needs --headers cb");
    if (cfg->dup_in_callback && (cfg->header_mode != HEADERS_CB || cfg->threads ||
                                 cfg->dup || cfg->twice || cfg->reset))
        usage_error("--dup-in-callback needs --headers cb, and no --threads, --dup, "
                    "--twice or --reset");
    if (cfg->swap_data_in_callback &&
        (cfg->header_mode != HEADERS_CB || cfg->write_mode != WRITE_CB ||
         cfg->progress_mode == PROGRESS_NONE || cfg->threads || cfg->dup ||
         cfg->dup_in_callback || cfg->reset || cfg->pause_once))
        usage_error("--swap-data-in-callback needs --headers cb, --write cb and --progress, "
                    "and no --threads, --dup, --dup-in-callback, --reset or --pause-once");
    if (cfg->seek_fail && !cfg->seek)
        usage_error("--seek-fail needs --seek");
    if (cfg->hsts_oneshot && cfg->hsts_fail)
        usage_error("give at most one of --hsts-oneshot and --hsts-fail");
}

static void parse_args(int argc, char **argv, struct config *cfg)
{
    bool options_done = false;
    int i;

    memset(cfg, 0, sizeof *cfg);
    cfg->write_mode = WRITE_CB;
    cfg->header_mode = HEADERS_NONE;
    cfg->progress_mode = PROGRESS_NONE;
    cfg->abort_write_after = -1;
    cfg->timeout_ms = cfg->timeout_s = cfg->connect_timeout_ms = -1;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (options_done || a[0] != '-') {
            if (cfg->url)
                usage_error("more than one URL: '%s' and '%s'", cfg->url, a);
            cfg->url = a;
        } else if (!strcmp(a, "--")) {
            options_done = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!parse_flag(cfg, a) &&
                   !parse_valued_option(cfg, a, argc, argv, &i)) {
            usage_error("unknown option '%s'", a);
        }
    }
    if (cfg->unpause_from_thread)
        cfg->pause_once = true;
    if (cfg->pause_once && !cfg->unpause_from_thread &&
        cfg->progress_mode == PROGRESS_NONE)
        cfg->progress_mode = PROGRESS_XFERINFO;
    check_config(cfg);
}

/* ------------------------------------------------------------------------ */
/* Callbacks                                                                */
/* ------------------------------------------------------------------------ */

__attribute__((noreturn))
static void die_bad_pointer(const char *callback, const void *p)
{
    fprintf(stderr, "cghost: FATAL: %s callback got a wrong data pointer %p\n",
            callback, p);
    abort();
}

/*
 * The write callback receives either its own WRITEDATA (a body_sink) or, with
 * --headers data, the HEADERDATA FILE*: libcurl hands header lines to the
 * write function when no header function is set.  Tell the two apart by
 * address, never by peeking into the pointed-to object.
 */
static struct body_sink *find_body_sink(void *p)
{
    long i;

    for (i = 0; i < g_scenario_count; i++) {
        if (p == &g_scenarios[i].body)
            return &g_scenarios[i].body;
        if (p == &g_scenarios[i].body2)
            return &g_scenarios[i].body2;
    }
    return NULL;
}

static FILE *find_header_data(void *p)
{
    long i;

    for (i = 0; i < g_scenario_count; i++)
        if (g_scenarios[i].header_data && p == g_scenarios[i].header_data)
            return g_scenarios[i].header_data;
    return NULL;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
    size_t n = size * nmemb;
    struct body_sink *body = find_body_sink(userdata);
    size_t written;

    if (!body) {
        FILE *header_fp = find_header_data(userdata);

        if (!header_fp)
            die_bad_pointer("write", userdata);
        return fwrite(data, 1, n, header_fp);
    }
    if (body->magic != BODY_SINK_MAGIC)
        die_bad_pointer("write", userdata);

    body->calls++;
    if (body->pause == PAUSE_ARMED) {
        /* the progress callback resumes (or --unpause-from-thread's thread) */
        __atomic_store_n(&body->pause, PAUSE_WAITING, __ATOMIC_RELEASE);
        return CURL_WRITEFUNC_PAUSE;
    }
    if (body->limit >= 0 && (curl_off_t)n > body->limit - body->bytes) {
        /* Deliver exactly up to the limit, then abort the transfer. */
        size_t room = (size_t)(body->limit - body->bytes);

        body->bytes += (curl_off_t)fwrite(data, 1, room, body->out);
        return 0;
    }
    written = fwrite(data, 1, n, body->out);
    body->bytes += (curl_off_t)written;
    return written;
}

static size_t header_cb(char *data, size_t size, size_t nitems, void *userdata)
{
    struct header_sink *hs = userdata;
    size_t n = size * nitems;

    if (!hs || hs->magic != HEADER_SINK_MAGIC)
        die_bad_pointer("header", userdata);
    hs->calls++;
    if (hs->swap_on) {
        /* From now on the transfer's bytes go to the second sinks (libcurl: at once). */
        CURL *h = hs->swap_on;

        hs->swap_on = NULL;
        curl_easy_setopt(h, CURLOPT_WRITEDATA, hs->swap_body);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, hs->swap_headers);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, hs->swap_progress); /* == PROGRESSDATA */
    }
    if (hs->dup_from && !hs->dup) {
        hs->dup = curl_easy_duphandle(hs->dup_from);
        if (!hs->dup)
            fprintf(hs->out, "cghost: curl_easy_duphandle in the header callback failed\n");
    }
    fputs(hs->prefix, hs->out);
    if (hs->info) {
        /* What a header callback may ask libcurl about the response it is in. */
        long code = -1;
        char *url = NULL, *scheme = NULL;

        curl_easy_getinfo(hs->info, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(hs->info, CURLINFO_EFFECTIVE_URL, &url);
        curl_easy_getinfo(hs->info, CURLINFO_SCHEME, &scheme);
        fprintf(hs->out, "[code=%ld scheme=%s url=%s] ", code, scheme ? scheme : "-",
                url ? url : "-");
    }
    return fwrite(data, 1, n, hs->out);
}

static struct hooks *check_hooks(const char *name, void *userdata)
{
    struct hooks *k = userdata;

    if (!k || k->magic != HOOK_MAGIC)
        die_bad_pointer(name, userdata);
    return k;
}

/* Like curl's test 1915: an iterator over a list that must not run past its end. */
static CURLSTScode hsts_read_cb(CURL *easy, struct curl_hstsentry *e, void *userdata)
{
    struct hooks *k = check_hooks("hsts read", userdata);

    (void)easy;
    k->hsts_calls++;
    if (k->hsts_done) {
        fprintf(stderr, "cghost: FATAL: hsts read callback called again after it "
                "said done\n");
        abort();
    }
    if (k->hsts_calls == 1) {
        strcpy(e->name, "hsts-preload.example");
        e->includeSubDomains = 0;
        strcpy(e->expire, "20370320 01:02:03");
        fprintf(k->err, "cghost: hsts read: add hsts-preload.example\n");
        return CURLSTS_OK;
    }
    k->hsts_done = true;
    fprintf(k->err, "cghost: hsts read: done\n");
    return CURLSTS_DONE;
}

static CURLSTScode hsts_fail_cb(CURL *easy, struct curl_hstsentry *e, void *userdata)
{
    struct hooks *k = check_hooks("hsts read", userdata);

    (void)easy; (void)e;
    k->hsts_calls++;
    fprintf(k->err, "cghost: hsts read: fail\n");
    return CURLSTS_FAIL;
}

static int resolver_start_cb(void *resolver, void *reserved, void *userdata)
{
    struct hooks *k = check_hooks("resolver start", userdata);

    (void)resolver; (void)reserved;
    fprintf(k->err, "cghost: resolver start: refused\n");
    return 1;
}

static curl_socket_t opensocket_cb(void *userdata, curlsocktype purpose,
                                   struct curl_sockaddr *addr)
{
    struct hooks *k = check_hooks("opensocket", userdata);

    (void)purpose; (void)addr;
    fprintf(k->err, "cghost: opensocket: refused\n");
    return CURL_SOCKET_BAD;
}

static int closesocket_cb(void *userdata, curl_socket_t fd)
{
    struct hooks *k = check_hooks("closesocket", userdata);

    fprintf(k->out, "[CLOSE]\n");
    return close(fd);
}

static void share_lock_cb(CURL *h, curl_lock_data data, curl_lock_access access,
                          void *userdata)
{
    struct hooks *k = check_hooks("share lock", userdata);

    (void)h; (void)access;
    fprintf(k->out, "[LOCK %d]\n", (int)data);
}

static void share_unlock_cb(CURL *h, curl_lock_data data, void *userdata)
{
    struct hooks *k = check_hooks("share unlock", userdata);

    (void)h;
    fprintf(k->out, "[UNLOCK %d]\n", (int)data);
}

static size_t read_cb(char *buf, size_t size, size_t nitems, void *userdata)
{
    struct body_source *src = userdata;
    size_t n = size * nitems;

    if (!src || src->magic != SOURCE_MAGIC)
        die_bad_pointer("read", userdata);
    if (n > READ_CHUNK_MAX)
        n = READ_CHUNK_MAX;
    if (n > src->len - src->pos)
        n = src->len - src->pos;
    memcpy(buf, src->data + src->pos, n);
    src->pos += n;
    src->handed_out += (curl_off_t)n;
    return n;
}

static int seek_cb(void *userdata, curl_off_t offset, int origin)
{
    struct body_source *src = userdata;

    if (!src || src->magic != SOURCE_MAGIC)
        die_bad_pointer("seek", userdata);
    src->seeks++;
    if (src->fail)
        return CURL_SEEKFUNC_FAIL;
    if (origin != SEEK_SET || offset < 0 || offset > (curl_off_t)src->len)
        return CURL_SEEKFUNC_FAIL;
    src->pos = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* Shared by both progress callback flavours; non-zero aborts. */
static int progress_tick(void *userdata)
{
    struct progress_state *p = userdata;

    if (!p || p->magic != PROGRESS_MAGIC)
        die_bad_pointer("progress", userdata);
    p->calls++;
    if (p->body && p->body->pause == PAUSE_WAITING && !p->from_thread) {
        CURLcode rc;

        /* Set first: libcurl may call the write callback from inside. */
        p->body->pause = PAUSE_DONE;
        rc = curl_easy_pause(p->handle, CURLPAUSE_CONT);
        if (rc != CURLE_OK)
            fprintf(p->err, "cghost: curl_easy_pause(CONT) returned %d\n",
                    (int)rc);
    }
    return p->abort_after > 0 && p->calls == p->abort_after;
}

static int xferinfo_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                       curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    return progress_tick(userdata);
}

static int progress_cb(void *userdata, double dltotal, double dlnow,
                       double ultotal, double ulnow)
{
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    return progress_tick(userdata);
}

/* ------------------------------------------------------------------------ */
/* Setting up the handle                                                    */
/* ------------------------------------------------------------------------ */

static void check_setopt(struct scenario *s, const char *name, CURLcode rc)
{
    if (rc != CURLE_OK) {
        fprintf(s->err, "cghost: setopt %s returned %d\n", name, (int)rc);
        s->failed = true;
    }
}

#define SETOPT(s, h, opt, val) \
    check_setopt((s), #opt, curl_easy_setopt((h), opt, (val)))

static void set_method(struct scenario *s, CURL *h)
{
    const char *m = s->cfg->method;

    if (!m && s->cfg->read_body)
        m = "POST";
    if (!m || !strcmp(m, "GET"))
        return;
    if (!strcmp(m, "HEAD"))
        SETOPT(s, h, CURLOPT_NOBODY, 1L);
    else if (!strcmp(m, "POST"))
        SETOPT(s, h, CURLOPT_POST, 1L);
    else if (!strcmp(m, "PUT"))
        SETOPT(s, h, CURLOPT_UPLOAD, 1L);
    else
        SETOPT(s, h, CURLOPT_CUSTOMREQUEST, m);
}

/* COPYPOSTFIELDS: hand libcurl a heap copy, then wipe and free it. */
static void set_copy_post_fields(struct scenario *s, CURL *h, const char *v)
{
    size_t len = strlen(v);
    char *tmp = malloc(len + 1);

    if (!tmp) {
        fputs("cghost: out of memory\n", stderr);
        exit(1);
    }
    memcpy(tmp, v, len + 1);
    SETOPT(s, h, CURLOPT_COPYPOSTFIELDS, tmp);
    memset(tmp, 'X', len);
    free(tmp);
}

static void set_read_body(struct scenario *s, CURL *h)
{
    const struct config *cfg = s->cfg;
    curl_off_t len = (curl_off_t)s->source.len;

    /* A custom method with a read body is a POST underneath (like curl -X). */
    if (cfg->method && strcmp(cfg->method, "POST") && strcmp(cfg->method, "PUT"))
        SETOPT(s, h, CURLOPT_POST, 1L);
    SETOPT(s, h, CURLOPT_READFUNCTION, read_cb);
    SETOPT(s, h, CURLOPT_READDATA, &s->source);
    if (cfg->method && !strcmp(cfg->method, "PUT"))
        SETOPT(s, h, CURLOPT_INFILESIZE_LARGE, len);
    else
        SETOPT(s, h, CURLOPT_POSTFIELDSIZE_LARGE, len);
    if (cfg->seek) {
        SETOPT(s, h, CURLOPT_SEEKFUNCTION, seek_cb);
        SETOPT(s, h, CURLOPT_SEEKDATA, &s->source);
    }
}

/* Like curl's tests 554 and 587: the read function is set, READDATA is not; libcurl
 * calls it with the part's own pointer. */
static void set_form_stream(struct scenario *s, CURL *h)
{
    struct curl_httppost *last = NULL;

    if (!s->form &&
        curl_formadd(&s->form, &last, CURLFORM_COPYNAME, "field",
                     CURLFORM_STREAM, &s->source,
                     CURLFORM_CONTENTSLENGTH, (long)s->source.len,
                     CURLFORM_CONTENTTYPE, "text/plain", CURLFORM_END) != CURL_FORMADD_OK) {
        fprintf(s->err, "cghost: curl_formadd failed\n");
        s->failed = true;
        return;
    }
    SETOPT(s, h, CURLOPT_READFUNCTION, read_cb);
    SETOPT(s, h, CURLOPT_HTTPPOST, s->form);
}

static void set_hooks(struct scenario *s, CURL *h)
{
    const struct config *cfg = s->cfg;

    if (cfg->hsts_oneshot || cfg->hsts_fail) {
        SETOPT(s, h, CURLOPT_HSTS_CTRL, (long)CURLHSTS_ENABLE);
        SETOPT(s, h, CURLOPT_HSTSREADFUNCTION,
               cfg->hsts_oneshot ? hsts_read_cb : hsts_fail_cb);
        SETOPT(s, h, CURLOPT_HSTSREADDATA, &s->hooks);
    }
    if (cfg->resolver_start_refuse) {
        SETOPT(s, h, CURLOPT_RESOLVER_START_FUNCTION, resolver_start_cb);
        SETOPT(s, h, CURLOPT_RESOLVER_START_DATA, &s->hooks);
    }
    if (cfg->opensocket_refuse) {
        SETOPT(s, h, CURLOPT_OPENSOCKETFUNCTION, opensocket_cb);
        SETOPT(s, h, CURLOPT_OPENSOCKETDATA, &s->hooks);
    }
    if (cfg->closesocket) {
        SETOPT(s, h, CURLOPT_CLOSESOCKETFUNCTION, closesocket_cb);
        SETOPT(s, h, CURLOPT_CLOSESOCKETDATA, &s->hooks);
    }
    if (cfg->share_locks) {
        if (!s->hooks.share) {
            s->hooks.share = curl_share_init();
            if (!s->hooks.share) {
                fprintf(s->err, "cghost: curl_share_init failed\n");
                s->failed = true;
                return;
            }
            curl_share_setopt(s->hooks.share, CURLSHOPT_LOCKFUNC, share_lock_cb);
            curl_share_setopt(s->hooks.share, CURLSHOPT_UNLOCKFUNC, share_unlock_cb);
            curl_share_setopt(s->hooks.share, CURLSHOPT_USERDATA, &s->hooks);
            curl_share_setopt(s->hooks.share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
        }
        SETOPT(s, h, CURLOPT_SHARE, s->hooks.share);
    }
}

static void set_request(struct scenario *s, CURL *h)
{
    const struct config *cfg = s->cfg;

    if (cfg->curlu) {
        if (!s->curlu && (!(s->curlu = curl_url()) ||
                          curl_url_set(s->curlu, CURLUPART_URL, cfg->url, 0) != CURLUE_OK)) {
            fprintf(stderr, "cghost: curl_url_set failed\n");
            exit(2);
        }
        SETOPT(s, h, CURLOPT_CURLU, s->curlu);
    } else {
        SETOPT(s, h, CURLOPT_URL, cfg->url);
    }
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85.0 */
    if (cfg->protocols_str) /* a refusal is the point of some tests: printed, not fatal */
        printf("protocols_str=%d\n",
               (int)curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, cfg->protocols_str));
#endif
    set_method(s, h);
    if (cfg->read_body)
        set_read_body(s, h);
    if (cfg->form_stream)
        set_form_stream(s, h);
    /*
     * The size goes before the fields: libcurl copies COPYPOSTFIELDS with
     * the size set so far, and a larger size set afterwards discards the
     * copy (libcurl would then read the body from stdin).
     */
    if (cfg->has_post_size)
        SETOPT(s, h, CURLOPT_POSTFIELDSIZE_LARGE, cfg->post_size);
    if (cfg->post_fields)
        SETOPT(s, h, CURLOPT_POSTFIELDS, cfg->post_fields);
    if (cfg->copy_post_fields)
        set_copy_post_fields(s, h, cfg->copy_post_fields);
    if (cfg->headers)
        SETOPT(s, h, CURLOPT_HTTPHEADER, cfg->headers);
}

static void set_write_cb(struct scenario *s, CURL *h)
{
    SETOPT(s, h, CURLOPT_WRITEFUNCTION, write_cb);
    SETOPT(s, h, CURLOPT_WRITEDATA, &s->body);
}

static void set_body_and_headers(struct scenario *s, CURL *h)
{
    const struct config *cfg = s->cfg;

    if (cfg->write_mode == WRITE_CB)
        set_write_cb(s, h);
    else if (cfg->write_mode == WRITE_DATA)
        SETOPT(s, h, CURLOPT_WRITEDATA, s->body_file);

    if (cfg->header_mode == HEADERS_CB) {
        SETOPT(s, h, CURLOPT_HEADERFUNCTION, header_cb);
        SETOPT(s, h, CURLOPT_HEADERDATA, &s->headers);
    } else if (cfg->header_mode == HEADERS_DATA) {
        SETOPT(s, h, CURLOPT_HEADERDATA, s->header_data);
    }
}

static void set_progress(struct scenario *s, CURL *h)
{
    switch (s->cfg->progress_mode) {
    case PROGRESS_NONE:
        return;
    case PROGRESS_XFERINFO:
        SETOPT(s, h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
        SETOPT(s, h, CURLOPT_XFERINFODATA, &s->progress);
        break;
    case PROGRESS_OLD:
        CURL_IGNORE_DEPRECATION(
            SETOPT(s, h, CURLOPT_PROGRESSFUNCTION, progress_cb);
        )
        SETOPT(s, h, CURLOPT_PROGRESSDATA, &s->progress);
        break;
    }
    SETOPT(s, h, CURLOPT_NOPROGRESS, 0L);
}

static void set_misc(struct scenario *s, CURL *h)
{
    const struct config *cfg = s->cfg;

    if (cfg->errbuf)
        SETOPT(s, h, CURLOPT_ERRORBUFFER, s->errbuf);
    if (cfg->timeout_ms >= 0)
        SETOPT(s, h, CURLOPT_TIMEOUT_MS, cfg->timeout_ms);
    if (cfg->timeout_s >= 0)
        SETOPT(s, h, CURLOPT_TIMEOUT, cfg->timeout_s);
    if (cfg->connect_timeout_ms >= 0)
        SETOPT(s, h, CURLOPT_CONNECTTIMEOUT_MS, cfg->connect_timeout_ms);
    if (cfg->follow)
        SETOPT(s, h, CURLOPT_FOLLOWLOCATION, 1L);
    if (cfg->include)
        SETOPT(s, h, CURLOPT_HEADER, 1L);
    if (cfg->nosignal)
        SETOPT(s, h, CURLOPT_NOSIGNAL, 1L);
    if (cfg->verbose) {
        SETOPT(s, h, CURLOPT_VERBOSE, 1L);
        if (s->thread_no)           /* keep each thread's trace together */
            SETOPT(s, h, CURLOPT_STDERR, s->err);
    }
}

static void configure_handle(struct scenario *s, CURL *h)
{
    set_request(s, h);
    set_body_and_headers(s, h);
    set_progress(s, h);
    set_misc(s, h);
    set_hooks(s, h);
    if (s->cfg->header_info)
        s->headers.info = h;
}

/* ------------------------------------------------------------------------ */
/* Performing and reporting                                                 */
/* ------------------------------------------------------------------------ */

static void start_perform(struct scenario *s)
{
    const struct config *cfg = s->cfg;

    s->body.calls = 0;
    s->body.bytes = 0;
    s->body.pause = cfg->pause_once ? PAUSE_ARMED : PAUSE_OFF;
    s->headers.calls = 0;
    s->progress.calls = 0;
    s->source.handed_out = 0;
    s->source.seeks = 0;
    if (cfg->errbuf) {
        memset(s->errbuf, 'Z', sizeof s->errbuf - 1);
        s->errbuf[sizeof s->errbuf - 1] = '\0';
    }
}

/* Writes `text` with '"', '\\' and non-printable bytes escaped. */
static void put_quoted(FILE *fp, const char *text)
{
    const unsigned char *p;

    fputc('"', fp);
    for (p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(fp, "\\%c", *p);
        else if (*p < 0x20 || *p > 0x7e)
            fprintf(fp, "\\x%02x", *p);
        else
            fputc(*p, fp);
    }
    fputc('"', fp);
}

/* Formats a counter, or "-" when the counted thing was not asked for. */
static const char *count_text(char *buf, size_t size, bool shown,
                              long long value)
{
    if (!shown)
        return "-";
    snprintf(buf, size, "%lld", value);
    return buf;
}

static void report_perform(struct scenario *s, CURL *h, CURLcode rc)
{
    const struct config *cfg = s->cfg;
    bool own_write = cfg->write_mode == WRITE_CB;
    char writes[24], bytes[24], headers[24], progress[24], seeks[24];
    long status = 0;
    char *method = NULL;

    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_METHOD, &method);

    /* Body first, so merged stdout/stderr stay in a stable order. */
    fflush(s->out);
    if (s->body_file)
        fflush(s->body_file);

    if (s->thread_no)
        fprintf(s->err, "[t%d] ", s->thread_no);
    fprintf(s->err, "cghost: perform=%d rc=%d status=%ld method=%s errbuf=",
            s->performs, (int)rc, status, method ? method : "-");
    if (cfg->errbuf)
        put_quoted(s->err, s->errbuf);
    else
        fputc('-', s->err);
    fprintf(s->err,
            " writes=%s bytes=%s headers=%s progress=%s seeks=%s"
            " reads=%" CURL_FORMAT_CURL_OFF_T "\n",
            count_text(writes, sizeof writes, own_write, s->body.calls),
            count_text(bytes, sizeof bytes, own_write, s->body.bytes),
            count_text(headers, sizeof headers,
                       cfg->header_mode == HEADERS_CB, s->headers.calls),
            count_text(progress, sizeof progress,
                       cfg->progress_mode != PROGRESS_NONE, s->progress.calls),
            count_text(seeks, sizeof seeks, cfg->seek, s->source.seeks),
            s->source.handed_out);
    if (cfg->swap_data_in_callback)
        fprintf(s->err, "cghost: after the swap: writes=%ld bytes=%" CURL_FORMAT_CURL_OFF_T
                " headers=%ld progress=%ld\n", s->body2.calls, s->body2.bytes,
                s->headers2.calls, s->progress2.calls);
    fflush(s->err);
}

/* Run `h` to the end through a private multi handle, as git or curl --parallel do. */
static CURLcode perform_multi(CURL *h)
{
    CURLM *m = curl_multi_init();
    CURLcode rc = CURLE_FAILED_INIT;
    int running = 1;

    if (!m)
        return rc;
    curl_multi_add_handle(m, h);
    while (running) {
        CURLMsg *msg;
        int left;

        if (curl_multi_perform(m, &running) != CURLM_OK)
            break;
        while ((msg = curl_multi_info_read(m, &left)))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
                rc = msg->data.result;
        if (running && curl_multi_poll(m, NULL, 0, 100, NULL) != CURLM_OK)
            break;
    }
    curl_multi_remove_handle(m, h);
    curl_multi_cleanup(m);
    return rc;
}

/* --unpause-from-thread: wait for the write callback's pause, then resume the transfer
 * from this thread while curl_easy_perform runs on the other. */
static void *unpause_thread(void *arg)
{
    struct progress_state *p = arg;
    CURLcode rc;

    while (__atomic_load_n(&p->body->pause, __ATOMIC_ACQUIRE) != PAUSE_WAITING)
        usleep(1000);
    usleep(50000);
    p->body->pause = PAUSE_DONE;
    rc = curl_easy_pause(p->handle, CURLPAUSE_CONT);
    if (rc != CURLE_OK)
        fprintf(p->err, "cghost: curl_easy_pause(CONT) returned %d\n", (int)rc);
    return NULL;
}

static void perform_and_report(struct scenario *s, CURL *h)
{
    CURLcode rc;
    pthread_t unpauser;

    start_perform(s);
    s->progress.handle = h;
    s->progress.from_thread = s->cfg->unpause_from_thread;
    if (s->cfg->unpause_from_thread &&
        pthread_create(&unpauser, NULL, unpause_thread, &s->progress) != 0)
        usage_error("--unpause-from-thread: pthread_create failed");
    rc = curl_easy_perform(h);
    if (s->cfg->unpause_from_thread)
        pthread_join(unpauser, NULL);
    s->performs++;
    if (rc != CURLE_OK)
        s->failed = true;
    report_perform(s, h, rc);
}

static const char *later_url(const struct config *cfg)
{
    return cfg->url2 ? cfg->url2 : cfg->url;
}

/*
 * The first handle to perform on: the configured one, or its duplicate.
 * Note: libcurl 7.88.1 cannot duplicate a handle that has COPYPOSTFIELDS
 * without an explicit POSTFIELDSIZE (fixed in curl 8.5.0, curl PR #12317).
 */
static CURL *make_handle(struct scenario *s)
{
    CURL *h = curl_easy_init();
    CURL *copy;

    if (!h) {
        fprintf(s->err, "cghost: curl_easy_init failed\n");
        return NULL;
    }
    configure_handle(s, h);
    if (!s->cfg->dup)
        return h;
    copy = curl_easy_duphandle(h);
    curl_easy_cleanup(h);
    if (!copy)
        fprintf(s->err, "cghost: curl_easy_duphandle failed\n");
    if (s->headers.info)
        s->headers.info = copy;
    return copy;
}

static void run_scenario(struct scenario *s)
{
    const struct config *cfg = s->cfg;
    CURL *h = make_handle(s);

    if (!h) {
        s->failed = true;
        return;
    }
    if (cfg->dup_in_callback)
        s->headers.dup_from = h;
    if (cfg->swap_data_in_callback)
        s->headers.swap_on = h;
    perform_and_report(s, h);
    if (s->headers.dup) {
        CURL *copy = s->headers.dup;
        CURLcode rc;

        s->headers.dup_from = NULL;
        s->headers.dup = NULL;
        start_perform(s);
        rc = perform_multi(copy);
        s->performs++;
        if (rc != CURLE_OK)
            s->failed = true;
        report_perform(s, copy, rc);
        curl_easy_cleanup(copy);
    }

    if (cfg->twice) {
        s->source.pos = 0;               /* rewind, as a normal host would */
        if (cfg->url2)
            SETOPT(s, h, CURLOPT_URL, cfg->url2);
        perform_and_report(s, h);
    }
    if (cfg->reset) {
        curl_easy_reset(h);
        s->source.pos = 0;
        SETOPT(s, h, CURLOPT_URL, later_url(cfg));
        if (cfg->write_mode == WRITE_CB)
            set_write_cb(s, h);
        perform_and_report(s, h);
    }
    curl_easy_cleanup(h);
    curl_url_cleanup(s->curlu);          /* NULL: nothing */
    s->curlu = NULL;
    if (s->hooks.share)
        curl_share_cleanup(s->hooks.share);
    if (s->form)
        curl_formfree(s->form);
}

static void *thread_main(void *arg)
{
    run_scenario(arg);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Output streams                                                           */
/* ------------------------------------------------------------------------ */

static FILE *open_file(const char *path)
{
    FILE *fp = fopen(path, "wb");

    if (!fp) {
        fprintf(stderr, "cghost: cannot open %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return fp;
}

static FILE *open_capture(struct capture *c)
{
    c->fp = open_memstream(&c->buf, &c->len);
    if (!c->fp) {
        fprintf(stderr, "cghost: open_memstream: %s\n", strerror(errno));
        exit(1);
    }
    return c->fp;
}

/* Direct mode: stdout/stderr and real files.  Threaded: memory streams. */
static void open_streams(struct scenario *s)
{
    const struct config *cfg = s->cfg;
    bool buffered = s->thread_no != 0;
    bool want_body_file = cfg->write_mode == WRITE_DATA;
    bool want_header_file = cfg->header_mode != HEADERS_NONE && cfg->header_out;

    s->out = buffered ? open_capture(&s->cap[CAP_OUT]) : stdout;
    s->err = buffered ? open_capture(&s->cap[CAP_ERR]) : stderr;
    if (want_body_file)
        s->body_file = buffered ? open_capture(&s->cap[CAP_BODY_FILE])
                                : open_file(cfg->out_path);
    if (want_header_file)
        s->header_file = buffered ? open_capture(&s->cap[CAP_HEADER_FILE])
                                  : open_file(cfg->header_out);
}

static void init_scenario(struct scenario *s, const struct config *cfg,
                          int thread_no)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->thread_no = thread_no;
    open_streams(s);

    s->body.magic = BODY_SINK_MAGIC;
    s->body.out = s->out;
    s->body.limit = cfg->abort_write_after;

    s->headers.magic = HEADER_SINK_MAGIC;
    s->headers.out = s->header_file ? s->header_file : s->err;
    s->headers.prefix = s->header_file ? "" : "H: ";
    if (cfg->header_mode == HEADERS_DATA)
        s->header_data = s->header_file ? s->header_file : s->err;

    s->source.magic = SOURCE_MAGIC;
    s->source.data = cfg->read_body ? cfg->read_body : "";
    s->source.len = strlen(s->source.data);

    s->hooks.magic = HOOK_MAGIC;
    s->hooks.out = s->out;
    s->hooks.err = s->err;
    if (cfg->form_stream)
        s->source.data = cfg->form_stream;
    s->source.len = strlen(s->source.data);
    s->source.fail = cfg->seek_fail;

    s->progress.magic = PROGRESS_MAGIC;
    s->progress.abort_after = cfg->abort_progress_after;
    s->progress.body = cfg->pause_once ? &s->body : NULL;
    s->progress.err = s->err;

    if (cfg->swap_data_in_callback) {
        s->body2 = s->body;
        s->body2.calls = 0;
        s->body2.bytes = 0;
        s->headers2 = s->headers;
        s->headers2.prefix = "H2: ";
        s->progress2 = s->progress;
        s->headers.swap_body = &s->body2;
        s->headers.swap_headers = &s->headers2;
        s->headers.swap_progress = &s->progress2;
    }
}

/* Threaded mode: print each capture kind in thread order, then free it. */
static void emit_captures(struct scenario *all, long n, int kind,
                          FILE *dest)
{
    long i;

    for (i = 0; i < n; i++) {
        struct capture *c = &all[i].cap[kind];

        if (!c->fp)
            continue;
        fclose(c->fp);
        if (dest)
            fwrite(c->buf, 1, c->len, dest);
        free(c->buf);
        c->fp = NULL;
        c->buf = NULL;
    }
}

static void finish_threaded(struct scenario *all, long n,
                            const struct config *cfg)
{
    FILE *body_file = NULL, *header_file = NULL;

    emit_captures(all, n, CAP_OUT, stdout);
    emit_captures(all, n, CAP_ERR, stderr);
    if (all[0].cap[CAP_BODY_FILE].fp)
        body_file = open_file(cfg->out_path);
    emit_captures(all, n, CAP_BODY_FILE, body_file);
    if (all[0].cap[CAP_HEADER_FILE].fp)
        header_file = open_file(cfg->header_out);
    emit_captures(all, n, CAP_HEADER_FILE, header_file);
    if (body_file)
        fclose(body_file);
    if (header_file)
        fclose(header_file);
}

static void finish_direct(struct scenario *s)
{
    if (s->body_file)
        fclose(s->body_file);
    if (s->header_file)
        fclose(s->header_file);
}

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

static void run_threads(struct scenario *all, long n)
{
    pthread_t *tids = calloc((size_t)n, sizeof *tids);
    long i;
    int err;

    if (!tids) {
        fputs("cghost: out of memory\n", stderr);
        exit(1);
    }
    for (i = 0; i < n; i++) {
        err = pthread_create(&tids[i], NULL, thread_main, &all[i]);
        if (err) {
            fprintf(stderr, "cghost: pthread_create: %s\n", strerror(err));
            exit(1);
        }
    }
    for (i = 0; i < n; i++)
        pthread_join(tids[i], NULL);
    free(tids);
}

int main(int argc, char **argv)
{
    struct config cfg;
    struct scenario *all;
    long n, i;
    bool failed = false;
    CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);

    if (rc != CURLE_OK) {
        fprintf(stderr, "cghost: curl_global_init returned %d\n", (int)rc);
        return 1;
    }
    parse_args(argc, argv, &cfg);

    n = cfg.threads ? cfg.threads : 1;
    all = calloc((size_t)n, sizeof *all);
    if (!all) {
        fputs("cghost: out of memory\n", stderr);
        return 1;
    }
    for (i = 0; i < n; i++)
        init_scenario(&all[i], &cfg, cfg.threads ? (int)i + 1 : 0);
    g_scenarios = all;
    g_scenario_count = n;

    if (cfg.threads) {
        run_threads(all, n);
        finish_threaded(all, n, &cfg);
    } else {
        run_scenario(&all[0]);
        finish_direct(&all[0]);
    }

    for (i = 0; i < n; i++)
        failed |= all[i].failed;
    free(all);
    curl_slist_free_all(cfg.headers);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
