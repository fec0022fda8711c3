/* guard.h - the attempt loop of one guarded curl_easy_perform call.
 *
 * admit -> attempt -> classify -> decide -> wait -> record, until the call is done:
 *   - the call's deadline is the smaller of CURLGUARD_DEADLINE_MS and the host's own
 *     CURLOPT_TIMEOUT(_MS); every attempt gets what is left of it as its timeout, and
 *     no wait ends past it;
 *   - each attempt is classified (classify.h) and decided (policy.h);
 *   - one usage record per attempt (record.h);
 *   - the host sees the final attempt only: its bytes, its CURLcode, its getinfo.
 */
#ifndef CG_GUARD_H
#define CG_GUARD_H

#include "handle.h"

#include <curl/curl.h>

/* Run one guarded perform on the handle of shadow `h`.  Requests the guard does not
 * cover (not http/https, host outside CURLGUARD_HOSTS) go straight to libcurl. */
CURLcode cg_guard_perform(struct cg_handle *h);

#endif
