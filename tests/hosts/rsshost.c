/* rsshost.c - does many requests and reports its own resident memory, for the leak test.
 *
 * Usage: rsshost MODE N1 N2 [URL]
 *        rsshost serve      only the server: prints its URL, serves until killed
 *        rsshost maxrss CMD ARGS...
 *                           runs CMD as its child and prints "maxrss KB" (wait4's
 *                           ru_maxrss): a child of this small process, unlike one of a big
 *                           parent, does not start from the parent's maximum (execve keeps
 *                           the old image's high-water mark); exits with CMD's status
 *   MODE  new    a new easy handle per request (init, setopt, perform, cleanup)
 *         reuse  one easy handle for every request
 *   N1    requests before the first measurement, N2 (> N1) before the second
 *   URL   where to send them; none: a keep-alive HTTP/1.1 server of its own on
 *         127.0.0.1 (a thread answering every request with a 2-byte body)
 * Prints "rss N1 KB1" and "rss N2 KB2" (KiB resident, /proc/self/statm) and exits 0 when
 * every request returned CURLE_OK and HTTP 200, 1 otherwise.
 */
#include <curl/curl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 2\r\n\r\nok";

/* One connection: answer every request (a blank line ends one; no bodies are sent). */
static void *serve_conn(void *arg) {
  int fd = (int) (long) arg, state = 0;
  char buf[8192];
  ssize_t n, i;

  while ((n = read(fd, buf, sizeof(buf))) > 0) {
    for (i = 0; i < n; i++) {
      /* Count CR LF CR LF. */
      char c = buf[i];
      state = (c == '\r') ? (state == 2 ? 3 : 1) : (c == '\n' && (state == 1 || state == 3))
                                                       ? state + 1
                                                       : 0;
      if (state == 4) {
        if (write(fd, reply, sizeof(reply) - 1) < 0)
          goto out;
        state = 0;
      }
    }
  }
out:
  close(fd);
  return NULL;
}

static void *serve(void *arg) {
  int ls = (int) (long) arg;
  for (;;) {
    pthread_t t;
    int one = 1, fd = accept(ls, NULL, NULL);
    if (fd < 0)
      continue;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (pthread_create(&t, NULL, serve_conn, (void *) (long) fd) != 0)
      close(fd);
    else
      pthread_detach(t);
  }
  return NULL;
}

static int start_server(char *url, size_t len) {
  struct sockaddr_in a;
  socklen_t al = sizeof(a);
  pthread_t t;
  int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);

  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (ls < 0 || bind(ls, (struct sockaddr *) &a, sizeof(a)) != 0 || listen(ls, 512) != 0 ||
      getsockname(ls, (struct sockaddr *) &a, &al) != 0)
    return -1;
  snprintf(url, len, "http://127.0.0.1:%d/v1/ping", ntohs(a.sin_port));
  return pthread_create(&t, NULL, serve, (void *) (long) ls) == 0 ? 0 : -1;
}

static size_t discard(char *p, size_t s, size_t n, void *u) {
  (void) p;
  (void) u;
  return s * n;
}

static long rss_kb(void) {
  long size = 0, res = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2)
      res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int one(CURL *c, const char *url) {
  long code = 0;
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  if (curl_easy_perform(c) != CURLE_OK)
    return -1;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  return code == 200 ? 0 : -1;
}

int main(int argc, char **argv) {
  char own[128];
  const char *url;
  long n1, n2, i, bad = 0;
  int reuse;
  CURL *shared = NULL;

  if (argc > 2 && strcmp(argv[1], "maxrss") == 0) {
    struct rusage ru;
    int status;
    pid_t pid = fork();
    if (pid == 0) {
      execvp(argv[2], argv + 2);
      _exit(127);
    }
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid)
      return 2;
    printf("maxrss %ld\n", ru.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  if (argc == 2 && strcmp(argv[1], "serve") == 0) {
    if (start_server(own, sizeof(own)) != 0) {
      perror("rsshost: server");
      return 2;
    }
    printf("%s\n", own);
    fflush(stdout);
    for (;;)
      pause();
  }
  if (argc < 4 || (strcmp(argv[1], "new") != 0 && strcmp(argv[1], "reuse") != 0)) {
    fprintf(stderr, "usage: rsshost new|reuse N1 N2 [URL]\n");
    return 2;
  }
  reuse = strcmp(argv[1], "reuse") == 0;
  n1 = atol(argv[2]);
  n2 = atol(argv[3]);
  if (argc > 4) {
    url = argv[4];
  } else {
    if (start_server(own, sizeof(own)) != 0) {
      perror("rsshost: server");
      return 2;
    }
    url = own;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  if (reuse)
    shared = curl_easy_init();
  for (i = 1; i <= n2; i++) {
    CURL *c = reuse ? shared : curl_easy_init();
    if (!c || one(c, url) != 0)
      bad++;
    if (!reuse)
      curl_easy_cleanup(c);
    if (i == n1 || i == n2)
      printf("rss %ld %ld\n", i, rss_kb());
  }
  if (shared)
    curl_easy_cleanup(shared);
  curl_global_cleanup();
  if (bad)
    fprintf(stderr, "rsshost: %ld of %ld requests failed\n", bad, n2);
  fflush(stdout);
  return bad ? 1 : 0;
}
