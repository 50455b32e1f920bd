/* Shared immutable strings (rtext.h): a count in front of the bytes. */
#include "base/rtext.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

/* Text needs no alignment: the bytes follow the count directly. */
typedef struct head {
	size_t refs;
} head_t;

static head_t *head_of(char *t)
{
	return (head_t *)(void *)(t - sizeof(head_t));
}

char *sc_rtext_new(const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s);
	head_t *h = sc_xmalloc(sizeof(*h) + n + 1);
	h->refs = 1;
	char *t = (char *)(h + 1);
	memcpy(t, s, n + 1);
	return t;
}

char *sc_rtext_ref(char *t)
{
	if (t)
		__atomic_add_fetch(&head_of(t)->refs, 1, __ATOMIC_RELAXED);
	return t;
}

void sc_rtext_unref(char *t)
{
	if (t && __atomic_sub_fetch(&head_of(t)->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(head_of(t));
}
