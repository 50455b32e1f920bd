/* Bounded retention of finished things (the agent's old pod folders):
 * which of n items to remove, given when each was last used. Pure. */
#ifndef SC_AGENT_RETENTION_H
#define SC_AGENT_RETENTION_H

#include <stddef.h>
#include <stdint.h>

/* Marks remove[i] = 1 for every item whose last use mtime[i] is more than
 * max_age before now, then for the oldest of the rest until at most keep
 * remain; 0 for the others. Ties go by index (lower removed first).
 * mtime and remove have n entries (borrowed). Returns how many are marked.
 * max_age < 0 means no age limit. */
size_t sc_retention_select(const int64_t *mtime, size_t n, int64_t now, int64_t max_age,
                           size_t keep, unsigned char *remove);

#endif
