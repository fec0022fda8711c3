/* exporter.h - `curlguard exporter --listen ADDR`: the state file's metrics over HTTP.
 *
 * A small HTTP/1.1 server in the CLI only (the guard never starts one inside a host): one
 * thread, one poll(2) loop over up to CG_EXPORTER_CONNS connections at once, every socket
 * non-blocking; each request answered and its connection closed (Connection: close).  GET
 * or HEAD /metrics reads the state file read-only (metrics.h) and answers in the text
 * exposition format 0.0.4; / says where the metrics are; any other path 404, any other
 * method 405.  A client gets CG_EXPORTER_TIMEOUT_MS for its request head, at most
 * CG_EXPORTER_HEAD_MAX bytes of it (else 408 or 431, then the connection is closed), and
 * as long again to take the answer.  A slow, silent or malformed client delays no other
 * (before, connections were served one at a time, and five silent clients held a scrape
 * 10 s); with CG_EXPORTER_CONNS of them open, new connections wait in the listen backlog
 * until one ends.
 */
#ifndef CG_EXPORTER_H
#define CG_EXPORTER_H

#include <stddef.h>

#define CG_EXPORTER_TIMEOUT_MS 2000 /* to send the request head; again to read the answer */
#define CG_EXPORTER_HEAD_MAX 8192   /* bytes of request line and headers */
#define CG_EXPORTER_CONNS 64        /* connections served at once */

/* Split a listen address: "HOST:PORT", "[IPv6]:PORT" or ":PORT" (every interface) into
 * `host` ("" for every interface) and `port` (digits, 0-65535; 0 = any free port).  0, or
 * -1 with a one-line reason in `why`. */
int cg_exporter_addr(const char *addr, char *host, size_t hostlen, char *port,
                     size_t portlen, char *why, size_t whylen);

/* What a request head asks for. */
enum cg_route {
  CG_ROUTE_METRICS,     /* GET/HEAD /metrics (any query string) */
  CG_ROUTE_INDEX,       /* GET/HEAD / */
  CG_ROUTE_NOT_FOUND,   /* any other path: 404 */
  CG_ROUTE_BAD_METHOD,  /* a method other than GET and HEAD: 405 */
  CG_ROUTE_BAD_REQUEST, /* not an HTTP/1.x request line: 400 */
};

/* Route the request head `head` (`len` bytes, the request line first; need not be
 * NUL-terminated).  `*head_only` is set for HEAD. */
enum cg_route cg_exporter_route(const char *head, size_t len, int *head_only);

/* The length of the request head in `buf` (through its blank line: CRLF CRLF, or LF LF
 * from a lenient client), or 0 while it is incomplete. */
size_t cg_exporter_head_end(const char *buf, size_t len);

#endif
