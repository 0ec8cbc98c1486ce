/* status.c -- status names and the thread-local error message behind la_errmsg(). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

static _Thread_local char la_errbuf[1024];

const char *la_status_name(la_status s) {
    switch (s) {
    case LA_OK: return "LA_OK";
    case LA_EINVAL: return "LA_EINVAL";
    case LA_ESHAPE: return "LA_ESHAPE";
    case LA_ESPEC: return "LA_ESPEC";
    case LA_ENOMEM: return "LA_ENOMEM";
    case LA_EIO: return "LA_EIO";
    case LA_EFORMAT: return "LA_EFORMAT";
    case LA_EUNSUPPORTED: return "LA_EUNSUPPORTED";
    case LA_EINTERRUPTED: return "LA_EINTERRUPTED";
    case LA_ENUMERIC: return "LA_ENUMERIC";
    }
    return "LA_UNKNOWN";
}

const char *la_errmsg(void) { return la_errbuf; }

void la_clear_error(void) { la_errbuf[0] = '\0'; }

la_status la_fail(la_status s, const char *fmt, ...) {
    /* formatted aside first: callers wrap the previous message (la_fail(st, "x: %s",
     * la_errmsg())), which must not be read while it is being overwritten */
    char tmp[sizeof la_errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(la_errbuf, tmp, sizeof tmp);
    return s;
}
