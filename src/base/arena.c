#include "starcloud/arena.h"
#include "base/alloc.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocks form a singly linked list; the newest is at the head. Large
 * requests get a block of their own so a huge array does not waste the tail
 * of the current block. */
typedef struct block {
	struct block *next;
	size_t size, used;
	max_align_t data[];
} block_t;

struct sc_arena {
	block_t *head;
	block_t *spare; /* blocks kept by reset for reuse */
	size_t chunk;
	size_t used;
	long fail_after;
};

#define ALIGN (sizeof(max_align_t))

sc_arena_t *sc_arena_new(size_t chunk_size)
{
	sc_arena_t *a = sc_calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->chunk = chunk_size ? chunk_size : 64 * 1024;
	return a;
}

void sc_arena_free(sc_arena_t *a)
{
	if (!a)
		return;
	for (int list = 0; list < 2; list++) {
		block_t *b = list ? a->spare : a->head;
		while (b) {
			block_t *n = b->next;
			free(b);
			b = n;
		}
	}
	free(a);
}

/* The blocks the last cycle used are kept for the next one: a scheduler
 * that runs every second would otherwise hand its pages back to the kernel
 * and fault them in again each time, which costs more than the cycle's own
 * work. Spare blocks that this cycle did not take are freed: a cycle's big
 * arrays get blocks of their own size, which vary a little from cycle to
 * cycle (a job more or less), so keeping every block ever made grew the
 * arena by a staircase of near-equal blocks (the loop's grew from 40 to
 * 159 MB over 20 rounds of churn at 5,000 nodes, heaptrack). */
void sc_arena_reset(sc_arena_t *a)
{
	if (!a)
		return;
	block_t *b = a->spare;
	while (b) {
		block_t *n = b->next;
		free(b);
		b = n;
	}
	a->spare = NULL;
	b = a->head;
	while (b) {
		block_t *n = b->next;
		b->used = 0;
		b->next = a->spare;
		a->spare = b;
		b = n;
	}
	a->head = NULL;
	a->used = 0;
}

/* Takes the smallest spare block of at least `need` bytes, or NULL: a
 * small request then takes a chunk-sized block, not a big array's. */
static block_t *reuse_block(sc_arena_t *a, size_t need)
{
	block_t **best = NULL;
	for (block_t **pp = &a->spare; *pp; pp = &(*pp)->next)
		if ((*pp)->size >= need && (!best || (*pp)->size < (*best)->size))
			best = pp;
	if (!best)
		return NULL;
	block_t *b = *best;
	*best = b->next;
	b->next = NULL;
	b->used = 0;
	return b;
}

static block_t *new_block(sc_arena_t *a, size_t need)
{
	if (a->fail_after > 0 && --a->fail_after == 0)
		return NULL;
	block_t *r = reuse_block(a, need);
	if (r)
		return r;
	size_t size = need > a->chunk ? need : a->chunk;
	if (size > SIZE_MAX - sizeof(block_t))
		return NULL;
	block_t *b = sc_malloc(sizeof(block_t) + size);
	if (!b)
		return NULL;
	b->size = size;
	b->used = 0;
	return b;
}

void *sc_arena_alloc(sc_arena_t *a, size_t n)
{
	if (n == 0)
		n = 1;
	if (n > SIZE_MAX - ALIGN)
		return NULL;
	n = (n + ALIGN - 1) & ~(ALIGN - 1);
	block_t *b = a->head;
	if (!b || b->size - b->used < n) {
		block_t *nb = new_block(a, n);
		if (!nb)
			return NULL;
		if (b && n > a->chunk / 4) {
			/* Oversized: insert behind the head so the head keeps
			 * serving small requests from its remaining space. */
			nb->next = b->next;
			b->next = nb;
			nb->used = n;
			a->used += n;
			return (char *)nb->data;
		}
		nb->next = b;
		a->head = b = nb;
	}
	void *p = (char *)b->data + b->used;
	b->used += n;
	a->used += n;
	return p;
}

void *sc_arena_calloc(sc_arena_t *a, size_t nmemb, size_t size)
{
	if (size && nmemb > SIZE_MAX / size)
		return NULL;
	void *p = sc_arena_alloc(a, nmemb * size);
	if (p)
		memset(p, 0, nmemb * size);
	return p;
}

char *sc_arena_strdup(sc_arena_t *a, const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	char *p = sc_arena_alloc(a, n);
	if (p)
		memcpy(p, s, n);
	return p;
}

char *sc_arena_printf(sc_arena_t *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	char *p = sc_arena_alloc(a, (size_t)n + 1);
	if (!p)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

size_t sc_arena_used(const sc_arena_t *a)
{
	return a->used;
}

void sc_arena_fail_after(sc_arena_t *a, long n)
{
	a->fail_after = n;
}
