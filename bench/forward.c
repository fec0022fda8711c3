/* forward.c - the floor of the LD_PRELOAD technique, for bench/run.py's scenario 1: interposes
 * curl_easy_perform and curl_easy_setopt and only forwards them (dlsym(RTLD_NEXT), cached).
 * FORWARD_LOOP=N (the calibration row): curl_easy_perform also runs an empty loop of N rounds
 * before and after the transfer, a fixed number of instructions (3 a round: about 6N a
 * request) with no memory traffic: what that many instructions cost on their own.
 * Build: cc -O2 -shared -fPIC -o forward.so bench/forward.c -ldl */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>

static long loop_rounds = -1;

static void loop(void)
{
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
    loop();
    CURLcode rc = next(h);
    loop();
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
