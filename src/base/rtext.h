/* rtext: an immutable string shared by reference.
 *
 * One stored value is held by several owners, on several threads: the
 * object cache (the event-loop thread), the scheduling loop's changes and
 * its kept world (the cycle's worker). Each takes a reference instead of a
 * copy, and the last to let go frees it, so a job's text is in memory once
 * however many of them hold it (at 10,000 nodes and 100,000 jobs, two
 * copies were 60 MB).
 *
 * The handle is the string itself: readers use it as any const char *.
 * Only a string made by sc_rtext_new may be given to sc_rtext_ref and
 * sc_rtext_unref, never to free(). The count is atomic; the text never
 * changes once made. */
#ifndef SC_BASE_RTEXT_H
#define SC_BASE_RTEXT_H

#include <stddef.h>

/* A new shared copy of s (one reference); NULL for NULL. Never fails
 * (sc_oom on out of memory). */
char *sc_rtext_new(const char *s);
/* One more reference to t (returned); NULL stays NULL. */
char *sc_rtext_ref(char *t);
/* Drops one reference; the last frees t. Accepts NULL. */
void sc_rtext_unref(char *t);

#endif
