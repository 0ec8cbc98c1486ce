/* internal.h -- helpers shared by the library's source files (not public). */
#ifndef LA_INTERNAL_H
#define LA_INTERNAL_H

#include "longattn.h"

/* Record a formatted error message for la_errmsg() and return status s, so that a
 * failing path reads `return la_fail(LA_ESHAPE, "q has %d heads ...", h);`. */
la_status la_fail(la_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clear the thread's error message. */
void la_clear_error(void);

/* Propagate a failing status without touching its message. */
#define LA_TRY(expr)                      \
    do {                                  \
        la_status la_try_s_ = (expr);     \
        if (la_try_s_ != LA_OK) return la_try_s_; \
    } while (0)

#endif
