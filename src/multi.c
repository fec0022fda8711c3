/* multi.c - the multi driver (see multi.h, engine.h). */
#include "multi.h"

#include "attempt.h"
#include "clock.h"
#include "engine.h"
#include "handle.h"
#include "log.h"

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/timerfd.h>
#include <unistd.h>

/* Where one guarded call of a multi handle stands. */
enum cg_mstate {
  CG_MS_WAIT,  /* outside the real multi until `due`: admission, or a backoff */
  CG_MS_RUN,   /* its attempt is a transfer of the real multi (or ended in it) */
  CG_MS_JUDGE, /* its attempt ended and was judged: its retry waits for the budget, or
                * (final) its held bytes for a host that paused */
  CG_MS_DONE,  /* final: its CURLMSG_DONE is queued or was read; the call is over */
};

#define CG_MSG_RING 64 /* messages of unguarded transfers stay valid this many reads */

struct cg_mentry {
  struct cg_mentry *next;     /* in the multi's list, in the order of adding */
  struct cg_mentry *map_next; /* in the easy -> entry map */
  struct cg_multi *cm;
  CURL *easy;
  struct cg_handle *h;
  struct cg_call *call;       /* NULL once DONE */
  struct cg_attempt a;        /* the attempt under way (RUN, JUDGE) */
  enum cg_mstate st;
  int admitting;              /* WAIT for the admission (not for a backoff) */
  int in_real;                /* added to the real multi handle */
  int64_t due_ms;             /* monotonic; WAIT and JUDGE */
  CURLMsg msg;                /* its CURLMSG_DONE as handed to the host: like libcurl's
                               * (kept in the easy handle, lib/multi.c), valid until the
                               * handle leaves the multi */
};

struct cg_multi {
  struct cg_multi *next;      /* in the registry */
  CURLM *m;
  const struct cg_lib *lib;
  struct cg_mentry *entries;
  /* Messages for the host, in order (a ring). */
  CURLMsg *q;
  size_t qhead, qlen, qcap;
  unsigned pushed;            /* messages queued so far (wrapping) */
  unsigned pushed_at_wait;    /* `pushed` at the last curl_multi_wait (cg_multi_wait) */
  CURLMsg cur[CG_MSG_RING];   /* the last ones curl_multi_info_read returned for other
                               * transfers (a guarded one's stays in its entry) */
  unsigned ncur;
  int timer_dead;             /* the host's timer callback returned -1: as libcurl (lib/multi.c
                               * Curl_update_timer, multi->dead), it is not called again
                               * until an add starts the multi over */
  /* CURLMOPT_TIMERFUNCTION: the host's, and what libcurl and the host were told. */
  curl_multi_timer_callback host_timer;
  void *host_timer_data;
  int64_t lc_abs;             /* libcurl's timer (monotonic ms), -1 none */
  int64_t told_abs;           /* the host's timer as last set by the guard, -1 none */
  int kick;                   /* a message was queued outside perform: wake the host */
  int busy;                   /* inside one of the guard's multi functions */
  int in_host_cb;             /* the guard is calling a host callback */
  int wake_fd;                /* timerfd armed to the guard's next due time for hosts that
                               * select on curl_multi_fdset, -1 none (made when needed) */
};

/* A call whose due time is this close is started: host timers are set in whole ms
 * (cg__rel rounds down) and may fire a little early; without the margin the host's loop
 * would come back once more for the last millisecond. */
#define CG_EARLY_MS 5

/* ---- registries: multi handles, and easy handle -> entry ---- */

static pthread_mutex_t cg__mutex = PTHREAD_MUTEX_INITIALIZER;
static struct cg_multi *cg__multis;
#define CG_MAP_BUCKETS 256
static struct cg_mentry *cg__map[CG_MAP_BUCKETS];
static int cg__nentries; /* read without the lock for the fast path of forget_easy */

static void cg__fork_prepare(void) {
  pthread_mutex_lock(&cg__mutex);
}
static void cg__fork_release(void) {
  pthread_mutex_unlock(&cg__mutex);
}
__attribute__((constructor)) static void cg__multi_fork_register(void) {
  pthread_atfork(cg__fork_prepare, cg__fork_release, cg__fork_release);
}

static size_t cg__bucket(const void *p) {
  uint64_t k = (uint64_t) (uintptr_t) p * 0x9E3779B97F4A7C15ull;
  return (size_t) (k >> 56) & (CG_MAP_BUCKETS - 1);
}

struct cg_multi *cg_multi_get(CURLM *m) {
  struct cg_multi *cm;
  /* No multi handle of the host's exists (the easy driver's case: curl_easy_perform
   * drives libcurl's private multi through the exported functions, several calls per
   * request): no lock taken.  A handle the host made and uses was listed before. */
  if (!m || !__atomic_load_n(&cg__multis, __ATOMIC_ACQUIRE))
    return NULL;
  pthread_mutex_lock(&cg__mutex);
  for (cm = cg__multis; cm; cm = cm->next)
    if (cm->m == m)
      break;
  pthread_mutex_unlock(&cg__mutex);
  return cm;
}

const struct cg_lib *cg_multi_lib(const struct cg_multi *cm) {
  return cm->lib;
}

static struct cg_mentry *cg__find(CURL *e) {
  struct cg_mentry *en;
  pthread_mutex_lock(&cg__mutex);
  for (en = cg__map[cg__bucket(e)]; en; en = en->map_next)
    if (en->easy == e)
      break;
  pthread_mutex_unlock(&cg__mutex);
  return en;
}

static void cg__map_add(struct cg_mentry *en) {
  size_t b = cg__bucket(en->easy);
  pthread_mutex_lock(&cg__mutex);
  en->map_next = cg__map[b];
  cg__map[b] = en;
  __atomic_add_fetch(&cg__nentries, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&cg__mutex);
}

static void cg__map_del(struct cg_mentry *en) {
  struct cg_mentry **pp;
  pthread_mutex_lock(&cg__mutex);
  for (pp = &cg__map[cg__bucket(en->easy)]; *pp; pp = &(*pp)->map_next) {
    if (*pp == en) {
      *pp = en->map_next;
      __atomic_sub_fetch(&cg__nentries, 1, __ATOMIC_RELAXED);
      break;
    }
  }
  pthread_mutex_unlock(&cg__mutex);
}

/* ---- the host's message queue ---- */

/* Queue a message for the host.  Out of memory: the message is lost, with one line. */
static void cg__push(struct cg_multi *cm, const CURLMsg *msg) {
  if (cm->qlen == cm->qcap) {
    size_t cap = cm->qcap ? cm->qcap * 2 : 16, i;
    CURLMsg *q = malloc(cap * sizeof(*q));
    if (!q) {
      cg_warn_once("multi-msg-oom", "out of memory queueing a transfer's end; it is lost");
      return;
    }
    for (i = 0; i < cm->qlen; i++)
      q[i] = cm->q[(cm->qhead + i) % cm->qcap];
    free(cm->q);
    cm->q = q;
    cm->qcap = cap;
    cm->qhead = 0;
  }
  cm->q[(cm->qhead + cm->qlen) % cm->qcap] = *msg;
  cm->qlen++;
  cm->pushed++;
}

static void cg__push_done(struct cg_multi *cm, CURL *e, CURLcode rc) {
  CURLMsg msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg = CURLMSG_DONE;
  msg.easy_handle = e;
  msg.data.result = rc;
  cg__push(cm, &msg);
}

/* Drop the queued messages of `e`, as curl_multi_remove_handle does (lib/multi.c). */
static void cg__drop_msgs(struct cg_multi *cm, CURL *e) {
  size_t i, n = 0;
  for (i = 0; i < cm->qlen; i++) {
    CURLMsg *m = &cm->q[(cm->qhead + i) % cm->qcap];
    if (m->easy_handle != e)
      cm->q[(cm->qhead + n++) % cm->qcap] = *m;
  }
  cm->qlen = n;
}

/* ---- timers ---- */

/* The guard's next due time (monotonic ms), or -1. */
static int64_t cg__guard_due(const struct cg_multi *cm) {
  const struct cg_mentry *en;
  int64_t due = cm->kick ? cg_mono_ms() : -1;
  for (en = cm->entries; en; en = en->next) {
    int64_t d = en->st == CG_MS_WAIT || en->st == CG_MS_JUDGE ? en->due_ms
                : en->st == CG_MS_RUN && en->in_real       ? cg_attempt_timers_next(&en->a)
                                                            : -1;
    if (d >= 0 && (due < 0 || d < due))
      due = d;
  }
  return due;
}

static int64_t cg__min_abs(int64_t a, int64_t b) {
  if (a < 0)
    return b;
  if (b < 0)
    return a;
  return a < b ? a : b;
}

static long cg__rel(int64_t abs_ms) {
  int64_t d;
  if (abs_ms < 0)
    return -1;
  d = abs_ms - cg_mono_ms();
  return d < 0 ? 0 : d > 0x7fffffff ? 0x7fffffff : (long) d;
}

/* libcurl sets its timer (CURLMOPT_TIMERFUNCTION, wrapped): the host is told the earlier
 * of it and the guard's next due time. */
static int cg__timer_cb(CURLM *m, long timeout_ms, void *userp) {
  struct cg_multi *cm = userp;
  int64_t eff;
  int r;

  cm->lc_abs = timeout_ms < 0 ? -1 : cg_mono_ms() + timeout_ms;
  if (cm->timer_dead)
    return -1; /* the host refused the guard's call: libcurl learns it now */
  eff = cg__min_abs(cm->lc_abs, cg__guard_due(cm));
  if (!cm->host_timer || (eff == cm->told_abs && eff != cm->lc_abs))
    return 0;
  cm->told_abs = eff;
  cm->in_host_cb++;
  r = cm->host_timer(m, cg__rel(eff), cm->host_timer_data);
  cm->in_host_cb--;
  if (r == -1)
    cm->timer_dead = 1;
  return r;
}

/* After one of the guard's multi calls: set the host's timer again if the earlier of
 * libcurl's and the guard's time moved (a call entered a backoff, a due call started, or
 * the host's timer fired early for the guard, where libcurl keeps its own and would not
 * say it again).  Returns `mrc`, the call's own code, or CURLM_ABORTED_BY_CALLBACK when
 * it was CURLM_OK and the host's callback returned -1: as libcurl's call that sets the
 * timer returns (lib/multi.c Curl_update_timer), so that the host learns its timer is
 * gone instead of waiting for it. */
static CURLMcode cg__sync_timer(struct cg_multi *cm, CURLMcode mrc) {
  int64_t eff;
  int r;
  if (!cm->host_timer || cm->timer_dead)
    return mrc;
  eff = cg__min_abs(cm->lc_abs, cg__guard_due(cm));
  /* Only an earlier time is told: a later one (a stream's read timeout moving on with
   * every byte) costs the host at most one early wake-up, after which it is told. */
  if (eff < 0 || (cm->told_abs >= 0 && eff >= cm->told_abs))
    return mrc;
  cm->told_abs = eff;
  cm->in_host_cb++;
  r = cm->host_timer(cm->m, cg__rel(eff), cm->host_timer_data);
  cm->in_host_cb--;
  if (r != -1)
    return mrc;
  cm->timer_dead = 1; /* and libcurl's wrapper answers -1 when libcurl asks next */
  return mrc == CURLM_OK ? CURLM_ABORTED_BY_CALLBACK : mrc;
}

/* ---- one call ---- */

static void cg__real_remove(struct cg_multi *cm, struct cg_mentry *en) {
  if (!en->in_real)
    return;
  cm->lib->multi_remove_handle(cm->m, en->easy);
  en->in_real = 0;
}

/* The call is final with `rc`: queue the host's one CURLMSG_DONE. */
static void cg__final(struct cg_multi *cm, struct cg_mentry *en, CURLcode rc) {
  cg_engine_end(en->call, rc);
  en->call = NULL;
  en->st = CG_MS_DONE;
  cg__push_done(cm, en->easy, rc);
}

/* End `en`'s attempt (cg_engine_attempt_end: its in-flight slot given back) and return
 * its code.  The first call of the same pool waiting for its admission then asks at once
 * (at the host's next call, curl_multi_add_handle included, see cg__start_due) instead of
 * at its next poll (admit.c: up to 20 ms), when a transfer the host adds on seeing this
 * one's end would have taken the slot first, and kept taking it while the host keeps
 * adding. */
static CURLcode cg__attempt_end(struct cg_multi *cm, struct cg_mentry *en, CURLcode rc) {
  const char *pool = cg_engine_pool(en->call);
  struct cg_mentry *w;
  int64_t now;

  rc = cg_engine_attempt_end(en->call, &en->a, rc);
  for (w = cm->entries; w; w = w->next)
    if (w != en && w->st == CG_MS_WAIT && w->admitting &&
        strcmp(cg_engine_pool(w->call), pool) == 0)
      break;
  if (w && w->due_ms > (now = cg_mono_ms()))
    w->due_ms = now;
  return rc;
}

/* Judge the ended attempt of `en` (transfer code `rc`); `ended`: cg_engine_attempt_end
 * already ran (JUDGE). */
static void cg__judge(struct cg_multi *cm, struct cg_mentry *en, CURLcode rc, int ended) {
  enum cg_step step;
  int64_t ms;
  CURLcode out = rc;

  if (!ended)
    rc = cg__attempt_end(cm, en, rc);
  else
    cg_engine_end_aged(en->call); /* ended on an earlier pass: time went by since */
  cm->in_host_cb++; /* a final attempt's held bytes go to the host's callbacks */
  step = cg_engine_judge(en->call, &en->a, rc, 1, &ms, &out);
  cm->in_host_cb--;
  switch (step) {
  case CG_STEP_RETRY:
  case CG_STEP_WAIT:
    cg__real_remove(cm, en);
    en->st = step == CG_STEP_RETRY ? CG_MS_WAIT : CG_MS_JUDGE;
    en->admitting = 0; /* a backoff: never asked before its time */
    /* A floor (a server's Retry-After among them): the ms clock truncates, so a due time
     * one ms later than `ms` after this reading is never reached sooner than `ms` after
     * now; cg__start_due gives it no early margin. */
    en->due_ms = cg_mono_ms() + ms + (ms > 0);
    break;
  case CG_STEP_GO:
  case CG_STEP_DONE:
  default:
    cg__final(cm, en, out); /* stays in the real multi until the host removes it */
    break;
  }
}

/* Ask the admission of `en`'s attempt; when it may go, install it and add the handle to
 * the real multi.  Returns the real add's code (CURLM_OK otherwise). */
static CURLMcode cg__start(struct cg_multi *cm, struct cg_mentry *en) {
  int64_t ms;
  CURLcode rc;
  CURLMcode mrc;
  enum cg_step step = cg_engine_admit(en->call, 1, &ms, &rc);

  en->admitting = step == CG_STEP_WAIT;
  if (step == CG_STEP_WAIT) {
    en->st = CG_MS_WAIT;
    en->due_ms = cg_mono_ms() + ms;
    return CURLM_OK;
  }
  if (step != CG_STEP_GO) {
    cg__final(cm, en, rc);
    return CURLM_OK;
  }
  en->st = CG_MS_RUN;
  rc = cg_engine_attempt_start(en->call, &en->a);
  if (rc != CURLE_OK) {
    cg__judge(cm, en, rc, 0); /* a refused option: the attempt ends with its code */
    return CURLM_OK;
  }
  mrc = cm->lib->multi_add_handle(cm->m, en->easy);
  if (mrc != CURLM_OK)
    return mrc;
  en->in_real = 1;
  return CURLM_OK;
}

/* Start the waiting calls due by `now` + `early` ms, in the order they were added (at
 * most one step each); with `judge`, also judge again the ended attempts that are due
 * (which may hand a final answer's held bytes to the host's callbacks: only from
 * perform).  A retry's backoff gets no early margin: its wait is a floor, and only
 * admission asks again before it starts (a limiter's wait, asked early, is answered
 * with what is left of it). */
static void cg__start_due(struct cg_multi *cm, int64_t now, int64_t early, int judge) {
  struct cg_mentry *en;

  for (en = cm->entries; en; en = en->next) {
    int backoff = en->st == CG_MS_WAIT && !en->admitting;
    if (en->due_ms > now + (backoff ? 0 : early))
      continue;
    if (en->st == CG_MS_WAIT) {
      CURLMcode mrc = cg__start(cm, en);
      if (mrc != CURLM_OK) {
        /* The real multi refused it again (out of memory): the call ends so. */
        CURLcode rc = cg__attempt_end(cm, en, CURLE_OUT_OF_MEMORY);
        cg__judge(cm, en, rc, 1);
      }
    } else if (judge && en->st == CG_MS_JUDGE) {
      cg__judge(cm, en, CURLE_OK, 1);
    }
  }
}

/* Start the calls that are due (at most one step each). */
static void cg__due(struct cg_multi *cm) {
  struct cg_mentry *en;
  int64_t now = cg_mono_ms();

  cg__start_due(cm, now, CG_EARLY_MS, 1);
  /* The split timeouts of the transfers under way (attempt.h): the attempt's progress
   * callback checks them whenever libcurl runs it, and the guard's due times make sure
   * it is looked at by then, even in an event loop that leaves an idle transfer alone.
   * One that fired ends as its progress callback would have ended it. */
  for (en = cm->entries; en; en = en->next) {
    int64_t next;
    if (en->st != CG_MS_RUN || !en->in_real)
      continue;
    next = cg_attempt_timers_next(&en->a);
    if (next >= 0 && next <= now + CG_EARLY_MS && cg_attempt_timers_check(&en->a)) {
      cg__real_remove(cm, en);
      cg__judge(cm, en, CURLE_ABORTED_BY_CALLBACK, 0);
    }
  }
}

/* Read the real multi's messages: a guarded transfer's end is judged, the rest queued. */
static void cg__drain(struct cg_multi *cm) {
  int rounds, left;

  for (rounds = 0; rounds < 1000000; rounds++) {
    CURLMsg *msg = cm->lib->multi_info_read(cm->m, &left), copy;
    struct cg_mentry *en;
    if (!msg)
      break;
    copy = *msg;
    en = copy.msg == CURLMSG_DONE ? cg__find(copy.easy_handle) : NULL;
    if (en && en->cm == cm && en->st == CG_MS_RUN && en->in_real)
      cg__judge(cm, en, copy.data.result, 0);
    else
      cg__push(cm, &copy);
  }
}

/* Guarded calls not in the real multi that the host still waits for. */
static int cg__outside(const struct cg_multi *cm) {
  const struct cg_mentry *en;
  int n = 0;
  for (en = cm->entries; en; en = en->next)
    n += en->st == CG_MS_WAIT || en->st == CG_MS_JUDGE;
  return n;
}

/* End the call of `en` for the host taking it away, and free `en`. */
static void cg__drop(struct cg_multi *cm, struct cg_mentry *en, const char *reason) {
  struct cg_mentry **pp;

  switch (en->st) {
  case CG_MS_RUN:
    cg__real_remove(cm, en);
    cg__attempt_end(cm, en, CURLE_ABORTED_BY_CALLBACK);
    cg_engine_cancel(en->call, &en->a, reason);
    break;
  case CG_MS_JUDGE:
    cg_engine_cancel(en->call, &en->a, reason);
    break;
  case CG_MS_WAIT:
    cg_engine_cancel(en->call, NULL, reason);
    break;
  case CG_MS_DONE:
  default:
    cg__real_remove(cm, en);
    break;
  }
  cg__drop_msgs(cm, en->easy);
  for (pp = &cm->entries; *pp; pp = &(*pp)->next)
    if (*pp == en) {
      *pp = en->next;
      break;
    }
  cg__map_del(en);
  free(en);
}

/* ---- the entry points (multi.h) ---- */

CURLM *cg_multi_init(const struct cg_lib *lib) {
  CURLM *m = lib->multi_init();
  struct cg_multi *cm;

  if (!m)
    return NULL;
  if (!(cm = calloc(1, sizeof(*cm)))) {
    cg_warn_once("multi-oom", "out of memory: a multi handle runs without the guard");
    return m;
  }
  cm->m = m;
  cm->lib = lib;
  cm->lc_abs = -1;
  cm->told_abs = -1;
  cm->wake_fd = -1;
  pthread_mutex_lock(&cg__mutex);
  cm->next = cg__multis;
  __atomic_store_n(&cg__multis, cm, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&cg__mutex);
  return m;
}

CURLMcode cg_multi_add(struct cg_multi *cm, CURL *e) {
  struct cg_handle *h;
  struct cg_mentry *en;
  struct cg_call *call;
  CURLMcode mrc;

  if (cm->in_host_cb)
    return CURLM_RECURSIVE_API_CALL;
  if (cm->busy || !e)
    return cm->lib->multi_add_handle(cm->m, e);
  if ((en = cg__find(e)) != NULL)
    return CURLM_ADDED_ALREADY; /* in this multi or another one, as libcurl says */
  h = cg_handle_get(e);
  if (!h || h->in_perform || !(call = cg_engine_begin(h, 1))) {
    mrc = cm->lib->multi_add_handle(cm->m, e);
    if (mrc == CURLM_OK)
      cm->timer_dead = 0;
    return mrc;
  }
  if (!(en = calloc(1, sizeof(*en)))) {
    cg_engine_end(call, CURLE_OK);
    cg_warn_once("multi-oom", "out of memory: a transfer runs without the guard");
    mrc = cm->lib->multi_add_handle(cm->m, e);
    if (mrc == CURLM_OK)
      cm->timer_dead = 0;
    return mrc;
  }
  en->cm = cm;
  en->easy = e;
  en->h = h;
  en->call = call;
  cm->busy = 1;
  /* First come, first admitted: the calls already waiting whose time has come ask the
   * limiter before this one does.  Otherwise a host that adds a transfer when its timer
   * fires (libntlmconnect, curl's test 2032) or when it reads a transfer's end (a worker
   * queue; cg__attempt_end) hands the freed slot to the newcomer, and the waiting call
   * waits again, behind it: out of order, and starved by a steady stream of adds.  No
   * early margin here: a call due in a few ms is not asked again at every add. */
  {
    size_t q = cm->qlen;
    cg__start_due(cm, cg_mono_ms(), 0, 0);
    if (cm->qlen != q)
      cm->kick = 1; /* one ended (refused): the host reads it at its next call */
  }
  mrc = cg__start(cm, en);
  if (mrc != CURLM_OK) {
    /* As without the guard: the add failed, nothing was recorded. */
    cg__attempt_end(cm, en, CURLE_OK);
    cg_attempt_free(&en->a);
    cg_engine_end(call, CURLE_FAILED_INIT);
    free(en);
    mrc = cg__sync_timer(cm, mrc); /* the calls started or ended just before: it may move */
    cm->busy = 0;
    return mrc;
  }
  {
    struct cg_mentry **pp = &cm->entries;
    while (*pp)
      pp = &(*pp)->next;
    *pp = en;
  }
  cg__map_add(en);
  if (en->st == CG_MS_DONE)
    cm->kick = 1; /* refused before any attempt: the host reads it at its next call */
  /* An add starts a multi whose timer callback failed over, as libcurl does for its own
   * (lib/multi.c curl_multi_add_handle: a dead multi with no transfer left), also for a
   * call that waits outside: else the host would never be told its due time. */
  cm->timer_dead = 0;
  mrc = cg__sync_timer(cm, CURLM_OK);
  cm->busy = 0;
  return mrc;
}

CURLMcode cg_multi_remove(struct cg_multi *cm, CURL *e) {
  struct cg_mentry *en = e ? cg__find(e) : NULL;
  CURLMcode mrc;

  if (cm->in_host_cb)
    return CURLM_RECURSIVE_API_CALL;
  if (cm->busy)
    return cm->lib->multi_remove_handle(cm->m, e);
  if (!en || en->cm != cm) {
    mrc = cm->lib->multi_remove_handle(cm->m, e);
    if (mrc == CURLM_OK && e)
      cg__drop_msgs(cm, e);
    return mrc;
  }
  cm->busy = 1;
  cg__drop(cm, en, "removed_by_host");
  mrc = cg__sync_timer(cm, CURLM_OK);
  cm->busy = 0;
  return mrc;
}

CURLMcode cg_multi_perform(struct cg_multi *cm, int *running) {
  CURLMcode mrc;
  int r = 0;

  if (cm->in_host_cb)
    return CURLM_RECURSIVE_API_CALL;
  if (cm->busy)
    return cm->lib->multi_perform(cm->m, running);
  cm->busy = 1;
  cm->kick = 0;
  cg__due(cm);
  mrc = cm->lib->multi_perform(cm->m, &r);
  cg__drain(cm);
  if (running)
    *running = r + cg__outside(cm);
  mrc = cg__sync_timer(cm, mrc);
  cm->busy = 0;
  return mrc;
}

CURLMsg *cg_multi_info_read(struct cg_multi *cm, int *msgs_in_queue) {
  int dummy;
  if (!msgs_in_queue)
    msgs_in_queue = &dummy;
  if (cm->in_host_cb || cm->busy)
    return cm->lib->multi_info_read(cm->m, msgs_in_queue);
  cm->busy = 1;
  cg__drain(cm);
  cm->busy = 0;
  if (!cm->qlen) {
    *msgs_in_queue = 0;
    return NULL;
  }
  {
    CURLMsg m = cm->q[cm->qhead], *out;
    struct cg_mentry *en = m.easy_handle ? cg__find(m.easy_handle) : NULL;
    cm->qhead = (cm->qhead + 1) % cm->qcap;
    cm->qlen--;
    *msgs_in_queue = (int) cm->qlen;
    if (en && en->cm == cm && en->st == CG_MS_DONE)
      out = &en->msg;
    else
      out = &cm->cur[cm->ncur++ % CG_MSG_RING];
    *out = m;
    return out;
  }
}

CURLMcode cg_multi_timeout(struct cg_multi *cm, long *timeout_ms) {
  CURLMcode mrc = cm->lib->multi_timeout(cm->m, timeout_ms);
  long g;

  if (mrc != CURLM_OK || !timeout_ms || cm->in_host_cb)
    return mrc;
  g = cg__rel(cg__guard_due(cm));
  if (g >= 0 && (*timeout_ms < 0 || g < *timeout_ms))
    *timeout_ms = g;
  return mrc;
}

CURLMcode cg_multi_wait(struct cg_multi *cm, struct curl_waitfd *fds, unsigned int nfds,
                        int timeout_ms, int *numfds, int use_poll) {
  CURLMcode mrc;
  int64_t t0_us;
  long g, lt = -1;
  int n = 0, fresh;

  if (!cm->in_host_cb) {
    g = cg__rel(cg__guard_due(cm));
    if (g >= 0 && g < timeout_ms)
      timeout_ms = (int) g;
  }
  if (use_poll)
    return cm->lib->multi_poll(cm->m, fds, nfds, timeout_ms, numfds);
  if (cm->in_host_cb || timeout_ms <= 0 || cg__outside(cm) == 0)
    return cm->lib->multi_wait(cm->m, fds, nfds, timeout_ms, numfds);
  /* curl_multi_wait returns at once when it has no descriptor to wait on (lib/multi.c
   * multi_wait: only curl_multi_poll sleeps then): with the guarded calls waiting
   * outside the real multi (a backoff, the limiter), and nothing in it but transfers
   * that ended and the host has not removed yet, the host's loop would spin until the due
   * time (PHP's curl_multi_select loop: ~3 million turns in a 3 s backoff).  So when it
   * comes back before the time asked with no event, and libcurl's own timer is not due
   * (curl_multi_timeout 0: a transfer needs a call now), the rest of that time is slept,
   * up to libcurl's timer: in one poll(2), which a signal ends, as it ends libcurl's
   * own waits (lib/select.c Curl_wait_ms).  Not the first time after a transfer's end
   * was queued: a host that reads its messages after its wait (perform, wait, info_read)
   * gets it at once, as without the guard; one that reads them only at the end (PHP's
   * curl_multi_exec + curl_multi_select loop) turns once more, not until the due time. */
  fresh = cm->pushed != cm->pushed_at_wait && cm->qlen > 0;
  cm->pushed_at_wait = cm->pushed;
  t0_us = cg_mono_us();
  mrc = cm->lib->multi_wait(cm->m, fds, nfds, timeout_ms, &n);
  if (mrc == CURLM_OK && n == 0 && !fresh) {
    int64_t left_ms = timeout_ms - (cg_mono_us() - t0_us) / 1000;
    if (left_ms > 0 && cm->lib->multi_timeout(cm->m, &lt) == CURLM_OK && lt != 0)
      (void) poll(NULL, 0, (int) (lt > 0 && lt < left_ms ? lt : left_ms));
  }
  if (numfds)
    *numfds = n;
  return mrc;
}

/* curl_multi_fdset: libcurl's descriptors, and, while guarded calls wait outside the real
 * multi (a backoff, the limiter, a breaker or budget hold, a held answer), a timerfd that
 * becomes readable at the guard's next due time.  Without it a host that selects only
 * when there is a descriptor spins through every such wait: pycurl's CurlMulti.select
 * returns at once on max_fd -1 (curl_multi_fdset(3): "wait a while before you proceed"),
 * ~1.9 million turns of its loop and a core busy in a 2 s Retry-After.  And while libcurl
 * has descriptors with nothing to read (another transfer waiting for its first byte), a
 * host that selects with its own timeout (pycurl's documented loop: 1 s) would send the
 * waiting call only when that timeout ends.  timerfd_settime(2) clears the expirations of
 * a timer it arms, so the descriptor is readable only once the time it was last armed for
 * has come. */
CURLMcode cg_multi_fdset(struct cg_multi *cm, fd_set *r, fd_set *w, fd_set *x, int *max_fd) {
  CURLMcode mrc = cm->lib->multi_fdset(cm->m, r, w, x, max_fd);
  struct itimerspec its;
  int64_t due, left;
  long lt = -1;

  if (mrc != CURLM_OK || !r || !max_fd || cm->in_host_cb || cg__outside(cm) == 0 ||
      (due = cg__guard_due(cm)) < 0)
    return mrc;
  /* libcurl's own timer too: a transfer in the real multi may have no descriptor yet and
   * need a call now (a handle just added, curl_multi_timeout 0: pycurl's select would
   * have returned at once on max_fd -1, and now slept its whole timeout, 1 s in its
   * documented loop), or soon (a rate-limited transfer, CURLOPT_MAX_RECV_SPEED_LARGE). */
  if (cm->lib->multi_timeout(cm->m, &lt) == CURLM_OK && lt >= 0)
    due = cg__min_abs(due, cg_mono_ms() + lt);
  if (cm->wake_fd < 0) /* never on 0, 1 or 2: the host's stderr must stay its own */
    cm->wake_fd = cg_fd_off_stdio(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (cm->wake_fd < 0 || cm->wake_fd >= FD_SETSIZE)
    return mrc; /* as before: the host's loop turns until the due time */
  left = due - cg_mono_ms();
  memset(&its, 0, sizeof(its));
  if (left <= 0)
    its.it_value.tv_nsec = 1; /* due now: readable at once (0 would disarm it) */
  else {
    its.it_value.tv_sec = (time_t) (left / 1000);
    its.it_value.tv_nsec = (long) (left % 1000) * 1000000L;
  }
  if (timerfd_settime(cm->wake_fd, 0, &its, NULL) != 0)
    return mrc;
  FD_SET(cm->wake_fd, r);
  if (cm->wake_fd > *max_fd)
    *max_fd = cm->wake_fd;
  return mrc;
}

CURLMcode cg_multi_socket_action(struct cg_multi *cm, curl_socket_t s, int ev, int *running) {
  CURLMcode mrc;
  int r = 0;

  if (cm->in_host_cb)
    return CURLM_RECURSIVE_API_CALL;
  if (cm->busy)
    return cm->lib->multi_socket_action(cm->m, s, ev, running);
  cm->busy = 1;
  if (s == CURL_SOCKET_TIMEOUT) {
    /* The host's timer fired: what it was set to is spent.  libcurl clears its own
     * record of the last timer it told on a timeout (lib/multi.c multi_socket,
     * timer_lastcall: "the application asks libcurl to run the timeout prematurely") and
     * tells its timer again in this call if it has one; the guard forgets it likewise. */
    cm->told_abs = -1;
    cm->lc_abs = -1;
  }
  cm->kick = 0;
  cg__due(cm);
  mrc = cm->lib->multi_socket_action(cm->m, s, ev, &r);
  cg__drain(cm);
  if (running)
    *running = r + cg__outside(cm);
  mrc = cg__sync_timer(cm, mrc);
  cm->busy = 0;
  return mrc;
}

CURLMcode cg_multi_socket_all(struct cg_multi *cm, int *running) {
  CURLMcode mrc;
  int r = 0;

  if (cm->in_host_cb)
    return CURLM_RECURSIVE_API_CALL;
  if (cm->busy)
    return cm->lib->multi_socket_all(cm->m, running);
  cm->busy = 1;
  cm->kick = 0;
  cg__due(cm);
  mrc = cm->lib->multi_socket_all(cm->m, &r);
  cg__drain(cm);
  if (running)
    *running = r + cg__outside(cm);
  mrc = cg__sync_timer(cm, mrc);
  cm->busy = 0;
  return mrc;
}

CURLMcode cg_multi_setopt(struct cg_multi *cm, CURLMoption opt, long l, void *p,
                          void (*f)(void), curl_off_t o) {
  CURLMcode (*set)(CURLM *, CURLMoption, ...) = cm->lib->multi_setopt;
  CURLMcode mrc;

  if (opt == CURLMOPT_TIMERFUNCTION) {
    curl_multi_timer_callback fn = (curl_multi_timer_callback) f;
    mrc = fn ? set(cm->m, CURLMOPT_TIMERFUNCTION, cg__timer_cb)
             : set(cm->m, CURLMOPT_TIMERFUNCTION, (curl_multi_timer_callback) NULL);
    if (mrc == CURLM_OK && fn)
      mrc = set(cm->m, CURLMOPT_TIMERDATA, (void *) cm);
    if (mrc == CURLM_OK) {
      cm->host_timer = fn;
      cm->lc_abs = -1;
      cm->told_abs = -1;
    }
    return mrc;
  }
  if (opt == CURLMOPT_TIMERDATA) {
    cm->host_timer_data = p;
    return CURLM_OK;
  }
  if (opt >= CURLOPTTYPE_OFF_T)
    return set(cm->m, opt, o);
  if (opt >= CURLOPTTYPE_FUNCTIONPOINT)
    return set(cm->m, opt, f);
  if (opt >= CURLOPTTYPE_OBJECTPOINT)
    return set(cm->m, opt, p);
  return set(cm->m, opt, l);
}

CURLMcode cg_multi_cleanup(struct cg_multi *cm) {
  struct cg_multi **pp;
  CURLMcode mrc;

  if (cm->in_host_cb || cm->busy)
    return CURLM_RECURSIVE_API_CALL;
  cm->busy = 1;
  while (cm->entries)
    cg__drop(cm, cm->entries, "multi_cleanup");
  pthread_mutex_lock(&cg__mutex);
  for (pp = &cg__multis; *pp; pp = &(*pp)->next)
    if (*pp == cm) {
      __atomic_store_n(pp, cm->next, __ATOMIC_RELEASE); /* cg_multi_get reads the head */
      break;
    }
  pthread_mutex_unlock(&cg__mutex);
  mrc = cm->lib->multi_cleanup(cm->m);
  if (cm->wake_fd >= 0)
    close(cm->wake_fd);
  free(cm->q);
  free(cm);
  return mrc;
}

int cg_multi_holds(CURL *e) {
  return __atomic_load_n(&cg__nentries, __ATOMIC_RELAXED) != 0 && cg__find(e) != NULL;
}

void cg_multi_forget_easy(CURL *e) {
  struct cg_mentry *en;
  struct cg_multi *cm;

  if (__atomic_load_n(&cg__nentries, __ATOMIC_RELAXED) == 0 || !(en = cg__find(e)))
    return;
  cm = en->cm;
  if (cm->in_host_cb) {
    /* Freed from inside a host callback the guard is calling (libcurl forbids it of its
     * own callbacks): the call is being judged right now and is left alone. */
    cg_warn_once("multi-free-cb", "an easy handle was freed from inside its own callback");
    return;
  }
  cm->busy++;
  cg__drop(cm, en, "removed_by_host");
  cm->busy--;
}
