/* exporter.c - `curlguard exporter --listen ADDR` (see exporter.h). */
#include "exporter.h"

#include "cli.h"
#include "metrics.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the server ---- */

static volatile sig_atomic_t cg__stop;

static void cg__on_stop(int sig) {
  (void) sig;
  cg__stop = 1;
}

static int64_t cg__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A connection of the server: reading its request head, sending its answer, then
 * reading what the client still sends before closing (cg__step). */
struct cg__conn {
  int fd;                        /* -1: a free entry */
  int phase;                     /* CG__HEAD, CG__SEND, CG__LINGER */
  int64_t deadline;              /* monotonic ms: the phase's end */
  size_t n;                      /* bytes of the head read */
  char *out;                     /* the answer (malloc'd), out_len bytes, out_off sent */
  size_t out_len, out_off, drained;
  char head[CG_EXPORTER_HEAD_MAX];
};

enum { CG__HEAD, CG__SEND, CG__LINGER };

/* The whole answer (status line, headers, body unless `head_only`) into c->out; without
 * memory, the connection is closed unanswered (c->out NULL). */
static void cg__respond(struct cg__conn *c, int code, const char *reason, const char *type,
                        const char *extra, const char *body, size_t len, int head_only) {
  char head[512];
  int n = snprintf(head, sizeof(head),
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                   "Connection: close\r\n\r\n",
                   code, reason, type, len, extra ? extra : "");
  size_t total = (size_t) n + (head_only ? 0 : len);
  c->phase = CG__SEND;
  c->deadline = cg__now_ms() + CG_EXPORTER_TIMEOUT_MS;
  c->out_off = 0;
  c->out_len = 0;
  if (!(c->out = malloc(total ? total : 1)))
    return;
  memcpy(c->out, head, (size_t) n);
  if (!head_only && len)
    memcpy(c->out + n, body, len);
  c->out_len = total;
}

static void cg__respond_text(struct cg__conn *c, int code, const char *reason,
                             const char *extra, const char *text, int head_only) {
  cg__respond(c, code, reason, "text/plain; charset=utf-8", extra, text, strlen(text),
              head_only);
}

/* The metrics of the state file at `path` into a malloc'd text (`*len`); a file that
 * cannot be read gives curlguard_state_ready 0 and one stderr line per new reason. */
static char *cg__render(const char *path, struct cg_metrics *m, char *last_why,
                        size_t why_len, size_t *len) {
  char why[512];
  char *text = NULL;
  FILE *f;
  int r = cg_metrics_load(path, m, why, sizeof(why));

  if (r >= 0 && m->ready) {
    static char url[4096], prefix[256];
    char fwhy[256];
    if (cg_cli_redis_conf(url, sizeof(url), prefix, sizeof(prefix)) == 0)
      cg_metrics_load_fleet(m, url, prefix, fwhy, sizeof(fwhy)); /* said by the gauge */
  }
  if (r < 0 && strcmp(why, last_why) != 0) {
    cg_cli_error("exporter: %s; serving curlguard_state_ready 0 until it can be read", why);
    snprintf(last_why, why_len, "%s", why);
  } else if (r >= 0) {
    last_why[0] = '\0';
  }
  if (!(f = open_memstream(&text, len)))
    return NULL;
  cg_metrics_write(f, m);
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

/* The answer to the request head c->head[0, end). */
static void cg__answer(struct cg__conn *c, size_t end, const char *path, struct cg_metrics *m,
                       char *last_why, size_t why_len) {
  int head_only = 0;
  switch (cg_exporter_route(c->head, end, &head_only)) {
  case CG_ROUTE_METRICS: {
    size_t len = 0;
    char *text = cg__render(path, m, last_why, why_len, &len);
    if (!text) {
      cg__respond_text(c, 500, "Internal Server Error", NULL, "out of memory\n", head_only);
      return;
    }
    cg__respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", NULL, text, len,
                head_only);
    free(text);
    return;
  }
  case CG_ROUTE_INDEX:
    cg__respond_text(c, 200, "OK", NULL, "curlguard exporter: metrics at /metrics\n",
                     head_only);
    return;
  case CG_ROUTE_NOT_FOUND:
    cg__respond_text(c, 404, "Not Found", NULL, "not found: metrics are at /metrics\n",
                     head_only);
    return;
  case CG_ROUTE_BAD_METHOD:
    cg__respond_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
                     "only GET and HEAD\n", 0);
    return;
  case CG_ROUTE_BAD_REQUEST:
  default:
    cg__respond_text(c, 400, "Bad Request", NULL, "not an HTTP/1.x request\n", 0);
    return;
  }
}

static void cg__close(struct cg__conn *c) {
  close(c->fd);
  free(c->out);
  c->out = NULL;
  c->fd = -1;
}

/* The answer sent: say we are done writing and read what the client still sends for a
 * moment (CG__LINGER_MS, 64 KiB), so that closing with unread bytes (a body, a pipelined
 * request) does not reset the connection before the answer is read. */
#define CG__LINGER_MS 1600
#define CG__LINGER_MAX 65536

static void cg__sent(struct cg__conn *c) {
  free(c->out);
  c->out = NULL;
  shutdown(c->fd, SHUT_WR);
  c->phase = CG__LINGER;
  c->drained = 0;
  c->deadline = cg__now_ms() + CG__LINGER_MS;
}

/* One step of connection `c` (its descriptor ready, or its deadline passed): no call here
 * blocks, so a slow or silent client never holds another (every socket is non-blocking). */
static void cg__step(struct cg__conn *c, short revents, const char *path, struct cg_metrics *m,
                     char *last_why, size_t why_len) {
  int64_t now = cg__now_ms();

  if (c->phase == CG__HEAD) {
    size_t end;
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t r = recv(c->fd, c->head + c->n, sizeof(c->head) - c->n, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        cg__close(c); /* the client went away */
        return;
      }
      if (r > 0)
        c->n += (size_t) r;
    }
    if ((end = cg_exporter_head_end(c->head, c->n)))
      cg__answer(c, end, path, m, last_why, why_len);
    else if (c->n == sizeof(c->head))
      cg__respond_text(c, 431, "Request Header Fields Too Large", NULL,
                       "request head over 8192 bytes\n", 0);
    else if (now >= c->deadline || cg__stop)
      cg__respond_text(c, 408, "Request Timeout", NULL, "request head not sent in time\n", 0);
    else
      return;
    if (!c->out) {
      cg__close(c); /* out of memory */
      return;
    }
    revents = POLLOUT; /* try at once: the answer mostly fits the socket's buffer */
  }
  if (c->phase == CG__SEND) {
    while (c->out_off < c->out_len && (revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      if (w <= 0) {
        cg__close(c);
        return;
      }
      c->out_off += (size_t) w;
    }
    if (c->out_off == c->out_len) {
      cg__sent(c);
      return;
    }
    if (now >= c->deadline || cg__stop)
      cg__close(c); /* the client does not take its answer */
    return;
  }
  /* CG__LINGER */
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    char sink[4096];
    ssize_t r = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (r <= 0 && !(r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))) {
      cg__close(c);
      return;
    }
    if (r > 0 && (c->drained += (size_t) r) >= CG__LINGER_MAX) {
      cg__close(c);
      return;
    }
  }
  if (now >= c->deadline || cg__stop)
    cg__close(c);
}

/* Serve on listening socket `lfd` until SIGINT or SIGTERM: up to CG_EXPORTER_CONNS
 * connections at once in one poll(2) loop; while that many are open, new ones wait in the
 * listen backlog until one ends (each ends within its deadlines: 5.6 s at most). */
static void cg__loop(int lfd, const char *path, struct cg_metrics *m, char *last_why,
                     size_t why_len) {
  static struct cg__conn conns[CG_EXPORTER_CONNS];
  struct pollfd pfds[CG_EXPORTER_CONNS + 1];
  int idx[CG_EXPORTER_CONNS + 1];
  int i;

  for (i = 0; i < CG_EXPORTER_CONNS; i++)
    conns[i].fd = -1;
  while (!cg__stop) {
    int64_t now = cg__now_ms(), next = now + 1000;
    int np = 0, open = 0, pr;
    for (i = 0; i < CG_EXPORTER_CONNS; i++) {
      struct cg__conn *c = &conns[i];
      if (c->fd < 0)
        continue;
      open++;
      pfds[np].fd = c->fd;
      pfds[np].events = c->phase == CG__SEND ? POLLOUT : POLLIN;
      pfds[np].revents = 0;
      idx[np++] = i;
      if (c->deadline < next)
        next = c->deadline;
    }
    if (open < CG_EXPORTER_CONNS) {
      pfds[np].fd = lfd;
      pfds[np].events = POLLIN;
      pfds[np].revents = 0;
      idx[np++] = -1;
    }
    pr = poll(pfds, (nfds_t) np, next > now ? (int) (next - now) : 0);
    if (pr < 0 && errno != EINTR)
      usleep(100000); /* should not happen: no busy loop if it does */
    for (i = 0; i < np; i++) {
      if (idx[i] >= 0) {
        struct cg__conn *c = &conns[idx[i]];
        if (pfds[i].revents || cg__now_ms() >= c->deadline || cg__stop)
          cg__step(c, pr > 0 ? pfds[i].revents : 0, path, m, last_why, why_len);
      } else if (pr > 0 && (pfds[i].revents & POLLIN)) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), j;
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            usleep(100000); /* out of descriptors or memory for a moment: try again */
          continue;
        }
        for (j = 0; j < CG_EXPORTER_CONNS && conns[j].fd >= 0; j++)
          ;
        conns[j].fd = fd;
        conns[j].phase = CG__HEAD;
        conns[j].n = 0;
        conns[j].out = NULL;
        conns[j].deadline = cg__now_ms() + CG_EXPORTER_TIMEOUT_MS;
      }
    }
  }
  for (i = 0; i < CG_EXPORTER_CONNS; i++)
    if (conns[i].fd >= 0)
      cg__close(&conns[i]);
}

static const char cg__usage[] = "usage: curlguard exporter --listen ADDR [--config F]";

/* A socket listening on `host`:`port`; -1 with the exit code in `*code` and a message
 * said. */
static int cg__listen(const char *addr, const char *host, const char *port, int *code) {
  struct addrinfo hints, *res = NULL, *ai;
  int fd = -1, err = 0, gai;

  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  /* A numeric address, or localhost (from /etc/hosts): a listen address never needs a
   * DNS query. */
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV |
                   (strcmp(host, "localhost") == 0 ? 0 : AI_NUMERICHOST);
  gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
  if (gai != 0) {
    cg_cli_error("exporter: listen address \"%s\": %s is not an IP address of this machine "
                 "(nor localhost): %s (%s)", addr, host,
                 gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai), cg__usage);
    *code = CG_EXIT_USAGE;
    return -1;
  }
  for (ai = res; ai; ai = ai->ai_next) {
    int one = 1;
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0)
      break;
    err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    /* Not an address of this machine: the ADDR is wrong (usage); in use or not allowed:
     * another error. */
    *code = err == EADDRNOTAVAIL || err == EAFNOSUPPORT ? CG_EXIT_USAGE : CG_EXIT_ERROR;
    cg_cli_error("exporter: cannot listen on %s: %s", addr, strerror(err));
  }
  return fd;
}

int cg_cli_exporter(int argc, char **argv) {
  const char *listen_addr = NULL, *config = NULL;
  char host[256], port[8], why[512], path[4096], last_why[512] = "";
  char shost[NI_MAXHOST], sport[NI_MAXSERV];
  struct sockaddr_storage ss;
  socklen_t sslen = sizeof(ss);
  struct sigaction sa;
  struct cg_metrics *m;
  int lfd, code = CG_EXIT_ERROR, i;

  for (i = 1; i < argc; i++) {
    if ((strcmp(argv[i], "--listen") == 0 || strcmp(argv[i], "--config") == 0) &&
        i + 1 == argc) {
      cg_cli_error("exporter: %s needs a value (%s)", argv[i], cg__usage);
      return CG_EXIT_USAGE;
    } else if (strcmp(argv[i], "--listen") == 0) {
      listen_addr = argv[++i];
    } else if (strncmp(argv[i], "--listen=", 9) == 0) {
      listen_addr = argv[i] + 9;
    } else if (strcmp(argv[i], "--config") == 0) {
      config = argv[++i];
    } else if (strncmp(argv[i], "--config=", 9) == 0) {
      config = argv[i] + 9;
    } else {
      cg_cli_error("exporter: unknown option \"%s\" (%s)", argv[i], cg__usage);
      return CG_EXIT_USAGE;
    }
  }
  if (!listen_addr) {
    cg_cli_error("exporter: --listen ADDR is required (%s)", cg__usage);
    return CG_EXIT_USAGE;
  }
  if (cg_exporter_addr(listen_addr, host, sizeof(host), port, sizeof(port), why,
                       sizeof(why)) != 0) {
    cg_cli_error("exporter: %s (%s)", why, cg__usage);
    return CG_EXIT_USAGE;
  }
  if (cg_cli_state_path("exporter", config, path, sizeof(path)) != 0)
    return CG_EXIT_ERROR;
  if (!(m = malloc(sizeof(*m)))) {
    cg_cli_error("exporter: out of memory");
    return CG_EXIT_ERROR;
  }
  if ((lfd = cg__listen(listen_addr, host, port, &code)) < 0) {
    free(m);
    return code;
  }
  /* SIGINT and SIGTERM end the loop (no SA_RESTART: accept returns EINTR). */
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = cg__on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (getsockname(lfd, (struct sockaddr *) &ss, &sslen) == 0 &&
      getnameinfo((struct sockaddr *) &ss, sslen, shost, sizeof(shost), sport, sizeof(sport),
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0)
    printf("curlguard exporter: listening on %s%s%s:%s, serving /metrics of state file %s\n",
           strchr(shost, ':') ? "[" : "", shost, strchr(shost, ':') ? "]" : "", sport, path);
  fflush(stdout);
  cg__loop(lfd, path, m, last_why, sizeof(last_why));
  close(lfd);
  free(m);
  return CG_EXIT_OK;
}
