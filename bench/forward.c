/* forward.c - the floor of the LD_PRELOAD technique, for bench/run.py's scenario 1: interposes
 * curl_easy_perform and curl_easy_setopt and only forwards them (dlsym(RTLD_NEXT), cached).
 * FORWARD_LOOP=N (the calibration row): curl_easy_perform also runs an empty loop of N rounds
 * before and after the transfer, a fixed number of instructions (3 a round: about 6N a
 * request) with no memory traffic: what that many instructions cost on their own.
 * FORWARD_WIDE=1 (the footprint row): curl_easy_perform instead runs a straight-line block of
 * FORWARD_WIDE_LINES / 2 distinct 64-byte code lines before the transfer and another after it
 * (16 four-byte `lea` a line, no branch, no memory traffic): about as many code lines a
 * request as the guard's, in fewer instructions than the loop's. A host whose own code fills
 * the instruction cache between two requests fetches every such line again on each request;
 * the row shows what that costs on the machine.
 * FORWARD_JUMPS=1 (the branch row): instead, a block of FORWARD_JUMPS_N / 2 taken jumps before
 * the transfer and another after it, each jump to the next 16-byte boundary (4 a code line:
 * FORWARD_JUMPS_N / 4 lines in all, no memory traffic).  A taken branch the predictor has
 * forgotten since the last request (a host whose own code overflows the branch target buffer
 * between two requests) costs a restart of instruction fetch; the row shows what that costs.
 * Build: cc -O2 -shared -fPIC -o forward.so bench/forward.c -ldl */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>

#ifndef FORWARD_WIDE_LINES
#define FORWARD_WIDE_LINES 800
#endif
#define FORWARD_STR_(x) #x
#define FORWARD_STR(x) FORWARD_STR_(x)
/* One block: FORWARD_WIDE_LINES / 2 cache lines of 16 `lea D(%rax),%rax` (4 bytes each); the
 * two blocks differ in D, so the compiler cannot fold them into one. */
#define FORWARD_BLOCK(d)                                                                   \
    __asm__ volatile(".p2align 6\n.rept " FORWARD_STR(FORWARD_WIDE_LINES) " * 8\n"          \
                     "lea " #d "(%%rax),%%rax\n.endr" ::: "rax", "memory")

#ifndef FORWARD_JUMPS_N
#define FORWARD_JUMPS_N 1600
#endif
/* One block of FORWARD_JUMPS_N / 2 taken jumps, each to the next 16-byte boundary; the two
 * blocks differ in D (as the footprint blocks do), so the compiler cannot fold them into one. */
#define FORWARD_JUMP_BLOCK(d)                                                              \
    __asm__ volatile("lea " #d "(%%rax),%%rax\n.p2align 6\n.rept " FORWARD_STR(FORWARD_JUMPS_N) \
                     " / 2\n.p2align 4\njmp 1f\n.p2align 4\n1:\n.endr" ::: "rax", "memory")

static long loop_rounds = -1;
static int wide = -1, jumps = -1;

static __attribute__((noinline)) void jumps_before(void)
{
#if defined(__x86_64__)
    FORWARD_JUMP_BLOCK(1);
#endif
}

static __attribute__((noinline)) void jumps_after(void)
{
#if defined(__x86_64__)
    FORWARD_JUMP_BLOCK(2);
#endif
}

/* Two distinct blocks (not one called twice): every line is a different line. */
static __attribute__((noinline)) void wide_before(void)
{
#if defined(__x86_64__)
    FORWARD_BLOCK(1);
#endif
}

static __attribute__((noinline)) void wide_after(void)
{
#if defined(__x86_64__)
    FORWARD_BLOCK(2);
#endif
}

static void loop(int after)
{
    if (jumps < 0)
        jumps = getenv("FORWARD_JUMPS") != NULL;
    if (jumps) {
        if (after)
            jumps_after();
        else
            jumps_before();
        return;
    }
    if (wide < 0)
        wide = getenv("FORWARD_WIDE") != NULL;
    if (wide) {
        if (after)
            wide_after();
        else
            wide_before();
        return;
    }
    if (loop_rounds < 0) {
        const char *e = getenv("FORWARD_LOOP");
        loop_rounds = e ? atol(e) : 0;
    }
    for (long i = 0; i < loop_rounds; i++)
        __asm__ volatile("" ::: "memory");
}

CURLcode curl_easy_perform(CURL *h)
{
    static CURLcode (*next)(CURL *);
    if (!next)
        next = (CURLcode (*)(CURL *))dlsym(RTLD_NEXT, "curl_easy_perform");
    loop(0);
    CURLcode rc = next(h);
    loop(1);
    return rc;
}

#undef curl_easy_setopt /* curl.h may wrap it in a type-checking macro */
CURLcode curl_easy_setopt(CURL *h, CURLoption opt, ...)
{
    static CURLcode (*next)(CURL *, CURLoption, ...);
    if (!next)
        next = (CURLcode (*)(CURL *, CURLoption, ...))dlsym(RTLD_NEXT, "curl_easy_setopt");
    va_list ap;
    va_start(ap, opt);
    CURLcode rc = opt < CURLOPTTYPE_OBJECTPOINT ? next(h, opt, va_arg(ap, long))
                  : opt >= CURLOPTTYPE_OFF_T && opt < CURLOPTTYPE_BLOB
                      ? next(h, opt, va_arg(ap, curl_off_t))
                      : next(h, opt, va_arg(ap, void *));
    va_end(ap);
    return rc;
}
