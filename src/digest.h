/* digest.h - request body digests for the usage record (body_digest).
 *
 * XXH3 128-bit (xxHash, https://github.com/Cyan4973/xxHash, Debian libxxhash-dev),
 * compiled in (XXH_INLINE_ALL) so the interposer adds no run-time dependency.  The
 * digest identifies identical bodies; it is not a security hash.
 */
#ifndef CG_DIGEST_H
#define CG_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define CG_DIGEST_HEX 33 /* 32 hex digits + NUL */

/* Hex digest of `n` bytes at `p` into `out`. */
void cg_digest_hex(const void *p, size_t n, char out[CG_DIGEST_HEX]);

/* The same digest as two numbers (`out[0]` the high half, `out[1]` the low), and that
 * form in hex: cg_digest128_hex(h) after cg_digest128(p, n, h) is cg_digest_hex(p, n). */
void cg_digest128(const void *p, size_t n, uint64_t out[2]);
void cg_digest128_hex(const uint64_t h[2], char out[CG_DIGEST_HEX]);

/* Streaming form, for bodies handed out piecewise by a read callback. */
struct cg_digest;
struct cg_digest *cg_digest_new(void);            /* NULL when out of memory */
void cg_digest_update(struct cg_digest *d, const void *p, size_t n);
void cg_digest_final(struct cg_digest *d, char out[CG_DIGEST_HEX]);
void cg_digest_reset(struct cg_digest *d);
void cg_digest_free(struct cg_digest *d);

#endif
