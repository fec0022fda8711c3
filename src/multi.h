/* multi.h - the multi driver: guarded calls under the host's curl_multi_* loop (issue 13).
 *
 * The second driver of the one engine (engine.h).  A multi handle the host makes while
 * the guard is on gets a shadow (struct cg_multi); a guarded easy handle the host adds to
 * it becomes one call of the engine, driven from the host's own curl_multi_* calls and
 * never sleeping in them:
 *   - admission is asked without waiting (admit.h cg_admission_step_nb); while it, a
 *     backoff or the retry budget says "later", the easy handle stays OUT of the real
 *     multi handle, with a due time;
 *   - the host's loop is woken by then: curl_multi_timeout and the host's
 *     CURLMOPT_TIMERFUNCTION (wrapped) see the earlier of libcurl's timeout and the
 *     guard's next due time, and curl_multi_wait/poll return by then;
 *   - due calls are started (their attempt installed, the handle added to the real multi)
 *     at the start of curl_multi_perform, curl_multi_socket_action (any socket, and
 *     CURL_SOCKET_TIMEOUT) and curl_multi_socket_all; the split timeouts of transfers
 *     under way are due times too, checked there (attempt.h cg_attempt_timers_next);
 *   - the real multi's messages are read inside curl_multi_perform, _socket_action,
 *     _socket_all and _info_read: a guarded transfer's CURLMSG_DONE is judged by the
 *     engine (retry: the handle leaves the real multi until its next attempt is due, the
 *     host sees nothing; final: held bytes handed over, then one CURLMSG_DONE queued with
 *     the final CURLcode); other messages are queued for the host as they come, so
 *     curl_multi_info_read gives the host every message in order;
 *   - `running_handles` counts the guarded calls waiting outside the real multi too.
 * curl_multi_remove_handle of a guarded handle at any point, curl_multi_cleanup with
 * handles inside, and curl_easy_cleanup of a handle still in a multi end its call with a
 * final record (outcome aborted_by_host).
 *
 * Threads: as libcurl requires (libcurl-thread(3)), one multi handle and its easy handles
 * are used by one thread at a time; the registry of multi handles and the map from easy
 * handle to call are shared and locked.
 */
#ifndef CG_MULTI_H
#define CG_MULTI_H

#include "lib.h"

#include <curl/curl.h>

struct cg_multi; /* the guard's shadow of one host multi handle */

/* The shadow of `m`, or NULL when the guard does not drive it (guard off, made by
 * libcurl itself, made before the guard was on, or out of memory). */
struct cg_multi *cg_multi_get(CURLM *m);

/* The libcurl that made `cm`'s multi handle. */
const struct cg_lib *cg_multi_lib(const struct cg_multi *cm);

/* Make a multi handle with `lib` (which has the multi API: lib->has_multi) and shadow
 * it.  Out of memory for the shadow: the handle is returned unshadowed (one
 * "curlguard:" line), and passes through.  NULL when libcurl itself returned NULL. */
CURLM *cg_multi_init(const struct cg_lib *lib);

/* The guarded forms of the curl_multi_* functions of the same names (libcurl's
 * curl_multi_*(3) man pages: arguments, return codes and messages are libcurl's). */
CURLMcode cg_multi_add(struct cg_multi *cm, CURL *e);
CURLMcode cg_multi_remove(struct cg_multi *cm, CURL *e);
CURLMcode cg_multi_perform(struct cg_multi *cm, int *running);
CURLMsg *cg_multi_info_read(struct cg_multi *cm, int *msgs_in_queue);
CURLMcode cg_multi_timeout(struct cg_multi *cm, long *timeout_ms);
/* curl_multi_fdset (curl_multi_fdset(3)): libcurl's descriptors; while guarded calls wait
 * outside the real multi, also one timerfd of the guard's (in the read set, readable at
 * their next due time or libcurl's own timer), so that a host's select(2) sleeps until
 * then, and no longer. */
CURLMcode cg_multi_fdset(struct cg_multi *cm, fd_set *r, fd_set *w, fd_set *x, int *max_fd);
/* curl_multi_wait (`use_poll` 0) or curl_multi_poll (`use_poll` 1). */
CURLMcode cg_multi_wait(struct cg_multi *cm, struct curl_waitfd *fds, unsigned int nfds,
                        int timeout_ms, int *numfds, int use_poll);
CURLMcode cg_multi_socket_action(struct cg_multi *cm, curl_socket_t s, int ev, int *running);
CURLMcode cg_multi_socket_all(struct cg_multi *cm, int *running);
/* curl_multi_setopt with its argument already read by type (`l` for CURLMOPTTYPE_LONG,
 * `p` for object pointers, `f` for function pointers, `o` for CURLMOPTTYPE_OFF_T):
 * CURLMOPT_TIMERFUNCTION and _TIMERDATA are kept and libcurl gets the guard's timer,
 * which tells the host the earlier of libcurl's and the guard's time; the rest is
 * forwarded as it came. */
CURLMcode cg_multi_setopt(struct cg_multi *cm, CURLMoption opt, long l, void *p,
                          void (*f)(void), curl_off_t o);
/* curl_multi_cleanup: the calls still inside end (aborted_by_host, reason
 * "multi_cleanup"), their options put back, then the real cleanup; the shadow is freed. */
CURLMcode cg_multi_cleanup(struct cg_multi *cm);

/* The host frees easy handle `e` (curl_easy_cleanup): if a call of the multi driver
 * still runs on it, end that call first (final record, reason "removed_by_host").
 * Cheap when no multi call exists. */
void cg_multi_forget_easy(CURL *e);

/* 1 when easy handle `e` is added to a multi handle through the multi driver (while the
 * guard waits to retry it, it is outside libcurl's multi, whose own check then passes):
 * curl_easy_perform on it is refused as libcurl refuses it on a handle in a multi
 * (lib/easy.c easy_perform: CURLE_FAILED_INIT, "easy handle already used in multi
 * handle").  Cheap when no multi call exists. */
int cg_multi_holds(CURL *e);

#endif
