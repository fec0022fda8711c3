/* tls.h - thread-local storage of the library.
 *
 * CG_TLS declares a thread-local variable with the initial-exec model: one %fs-relative
 * access, no __tls_get_addr call (which may allocate, and costs ~15 instructions on the
 * per-request path).  It needs the library's thread-locals in the static TLS block: it
 * is preloaded, or dlopen'ed into glibc's static TLS surplus; the library is marked
 * STATIC_TLS by its first such variable (state.c's SIGBUS guard, read in a signal
 * handler), and more of them only move accesses off __tls_get_addr (.tbss: 0x69c bytes
 * at 2e96171, `readelf -S libcurlguard.so`). */
#ifndef CG_TLS_H
#define CG_TLS_H

#define CG_TLS __thread __attribute__((tls_model("initial-exec")))

#endif
