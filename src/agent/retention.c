/* Retention selection (see retention.h): age first, then count. The count
 * pass is O(n * removed), fine for the few hundred folders a node keeps and
 * free of allocation. */
#include "agent/retention.h"

#include <string.h>

/* The oldest item not yet marked, or n when none is left. */
static size_t oldest_kept(const int64_t *mtime, size_t n, const unsigned char *remove)
{
	size_t best = n;
	for (size_t i = 0; i < n; i++)
		if (!remove[i] && (best == n || mtime[i] < mtime[best]))
			best = i;
	return best;
}

size_t sc_retention_select(const int64_t *mtime, size_t n, int64_t now, int64_t max_age,
                           size_t keep, unsigned char *remove)
{
	size_t marked = 0;
	if (n == 0)
		return 0;
	memset(remove, 0, n);
	for (size_t i = 0; i < n; i++)
		if (max_age >= 0 && now - mtime[i] > max_age) {
			remove[i] = 1;
			marked++;
		}
	while (n - marked > keep) {
		size_t i = oldest_kept(mtime, n, remove);
		remove[i] = 1;
		marked++;
	}
	return marked;
}
