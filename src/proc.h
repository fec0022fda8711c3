/* proc.h - this process's pid and start time, cached: no system call per request.
 *
 * glibc (since 2.25) makes every getpid() a system call, and the start time of a process
 * (/proc/PID/stat field 22) costs an open, a read and a close.  The guard stamps both on
 * slots, probes and records of every call, so each is read once per process and kept in
 * one anonymous page marked MADV_WIPEONFORK (Linux 4.14+): the kernel hands any child
 * made by fork(2) or clone(2) without CLONE_VM a zeroed copy, so a child never uses its
 * parent's pid, even one made without glibc's fork handlers (_Fork, a raw clone).  A
 * pthread_atfork child handler clears the cache too (the only way left where the page
 * could not be marked: an old kernel, or a tool such as valgrind that refuses the
 * advice).  A zero entry is read again on next use.  Thread-safe, lock-free.
 */
#ifndef CG_PROC_H
#define CG_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* getpid(), without the system call after the first use in a process. */
pid_t cg_pid(void);

/* This process's start time in clock ticks since boot (state.h cg_proc_start of
 * cg_pid()), read from /proc once per process; 0 when /proc cannot tell (then tried
 * again on the next call). */
uint64_t cg_proc_self_start(void);

#endif
