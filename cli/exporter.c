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

/* Send all of `data` before `deadline` (monotonic ms); 0 when sent. */
static int cg__send_all(int fd, const char *data, size_t len, int64_t deadline) {
  while (len > 0) {
    struct pollfd pfd = {fd, POLLOUT, 0};
    int64_t left = deadline - cg__now_ms();
    ssize_t w;
    if (left <= 0 || cg__stop)
      return -1;
    if (poll(&pfd, 1, (int) left) <= 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    w = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
        continue;
      return -1;
    }
    data += w;
    len -= (size_t) w;
  }
  return 0;
}

static void cg__respond(int fd, int code, const char *reason, const char *type,
                        const char *extra, const char *body, size_t len, int head_only) {
  char head[512];
  int64_t deadline = cg__now_ms() + CG_EXPORTER_TIMEOUT_MS;
  int n = snprintf(head, sizeof(head),
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                   "Connection: close\r\n\r\n",
                   code, reason, type, len, extra ? extra : "");
  if (cg__send_all(fd, head, (size_t) n, deadline) == 0 && !head_only && len)
    cg__send_all(fd, body, len, deadline);
}

static void cg__respond_text(int fd, int code, const char *reason, const char *extra,
                             const char *text, int head_only) {
  cg__respond(fd, code, reason, "text/plain; charset=utf-8", extra, text, strlen(text),
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

/* After the answer: say we are done writing and read what the client still sends for a
 * moment (at most 16 x 100 ms, 64 KiB), so that closing with unread bytes (a body, a
 * pipelined request) does not reset the connection before the answer is read. */
static void cg__linger(int fd) {
  char sink[4096];
  int i;
  shutdown(fd, SHUT_WR);
  for (i = 0; i < 16 && !cg__stop; i++) {
    struct pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0 || recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
      return;
  }
}

/* Read one request head from `fd` (bounded in bytes and time), answer it, close. */
static void cg__serve(int fd, const char *path, struct cg_metrics *m, char *last_why,
                      size_t why_len) {
  char buf[CG_EXPORTER_HEAD_MAX];
  size_t n = 0, end = 0;
  int64_t deadline = cg__now_ms() + CG_EXPORTER_TIMEOUT_MS;
  int head_only = 0;

  while (!(end = cg_exporter_head_end(buf, n))) {
    struct pollfd pfd = {fd, POLLIN, 0};
    int64_t left = deadline - cg__now_ms();
    ssize_t r;
    int pr;
    if (n == sizeof(buf)) {
      cg__respond_text(fd, 431, "Request Header Fields Too Large", NULL,
                       "request head over 8192 bytes\n", 0);
      return;
    }
    if (left <= 0 || cg__stop) {
      cg__respond_text(fd, 408, "Request Timeout", NULL, "request head not sent in time\n",
                       0);
      return;
    }
    pr = poll(&pfd, 1, (int) left);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr < 0)
      return;
    if (pr == 0)
      continue; /* the deadline check above answers */
    r = recv(fd, buf + n, sizeof(buf) - n, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
      continue;
    if (r <= 0)
      return; /* the client went away */
    n += (size_t) r;
  }
  switch (cg_exporter_route(buf, end, &head_only)) {
  case CG_ROUTE_METRICS: {
    size_t len = 0;
    char *text = cg__render(path, m, last_why, why_len, &len);
    if (!text) {
      cg__respond_text(fd, 500, "Internal Server Error", NULL, "out of memory\n", head_only);
      return;
    }
    cg__respond(fd, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", NULL, text, len,
                head_only);
    free(text);
    return;
  }
  case CG_ROUTE_INDEX:
    cg__respond_text(fd, 200, "OK", NULL, "curlguard exporter: metrics at /metrics\n",
                     head_only);
    return;
  case CG_ROUTE_NOT_FOUND:
    cg__respond_text(fd, 404, "Not Found", NULL, "not found: metrics are at /metrics\n",
                     head_only);
    return;
  case CG_ROUTE_BAD_METHOD:
    cg__respond_text(fd, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
                     "only GET and HEAD\n", 0);
    return;
  case CG_ROUTE_BAD_REQUEST:
  default:
    cg__respond_text(fd, 400, "Bad Request", NULL, "not an HTTP/1.x request\n", 0);
    return;
  }
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
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
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
  while (!cg__stop) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        usleep(100000); /* out of descriptors or memory for a moment: try again */
      continue;
    }
    cg__serve(fd, path, m, last_why, sizeof(last_why));
    cg__linger(fd);
    close(fd);
  }
  close(lfd);
  free(m);
  return CG_EXIT_OK;
}
