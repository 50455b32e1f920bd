/* Lists served from the object cache (cache.h).
 *
 * A list costs no parsing and, after the first list of an object revision,
 * no serialising: each item is the cached answer bytes of the object,
 * copied into the response. The items are chosen when the request arrives
 * (one consistent revision); a small answer goes out at once with a
 * Content-Length, a large one as a chunked stream that is filled as the
 * client reads (sc_http_stream_on_drain), so a slow reader of 10,000 jobs
 * holds about 1 MiB of output, not the whole list, and never blocks the
 * loop.
 *
 * Paging (an addition to interface.md): ?limit=N returns at most N items
 * and, when more follow, metadata.continue, an opaque token; passing it
 * back as ?continue=TOKEN (same filters) returns the next page. Pages are
 * each read at their own revision: an object created or deleted between
 * two pages shows up, or not, like in a fresh list.
 *
 * Paged by default: without ?limit a list returns DEFAULT_LIMIT items, and
 * a page stops early at PAGE_BYTES of items (with at least one), so a
 * collection of large objects is never one huge answer (300 jobs of
 * 900 KB made a 270 MB list that took 22 s). ?limit=0 asks for everything
 * in one answer (streamed, as before). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/cache.h"
#include "base/parse.h"
#include "base/alloc.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

#define ONE_SHOT_MAX (256u << 10) /* answers up to this size are sent whole */
#define CHUNK_BYTES (64u << 10)   /* bytes per chunk of a streamed list */
#define HIGH_WATER (1u << 20)     /* stop filling above this much unsent output */
#define MAX_LIMIT 100000
#define DEFAULT_LIMIT 500
#define PAGE_BYTES (8u << 20)

typedef struct list_stream {
	sc_http_req_t *r;
	sc_wire_t **items; /* owned references */
	size_t n, next;
	char head[SC_MAX_NAME + 256];
	int pumping; /* inside pump(): a close there must not free us */
	int closed;  /* the connection went away */
} list_stream_t;

static void ls_free(list_stream_t *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		sc__wire_unref(ls->items[i]);
	free(ls->items);
	free(ls);
}

/* Takes w (a reference). */
static void ls_add(list_stream_t *ls, size_t *cap, sc_wire_t *w)
{
	if (ls->n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		ls->items = sc_xreallocarray(ls->items, *cap, sizeof(*ls->items));
	}
	ls->items[ls->n++] = w;
}

/* Parses ?limit= and ?continue=; answers 400 and returns < 0 when bad. */
static int parse_paging(sc_http_req_t *r, long *limit, char *after, size_t aftersz)
{
	char tmp[32];
	int n = sc_http_query_param(r, "limit", tmp, sizeof(tmp));
	*limit = DEFAULT_LIMIT;
	if (n >= 0 || n == SC_ETOOBIG) {
		int v = -1;
		if (n <= 0 || sc_parse_int(tmp, 0, MAX_LIMIT, &v) < 0) {
			sc__api_error(r, 400, "BadRequest", "limit",
			              "limit must be a whole number from 0 to %d (0: no limit; "
			              "default %d)",
			              MAX_LIMIT, DEFAULT_LIMIT);
			return SC_EINVAL;
		}
		*limit = v;
	}
	after[0] = '\0';
	n = sc_http_query_param(r, "continue", after, aftersz);
	if (n == SC_ETOOBIG || (n >= 0 && (n == 0 || !sc__name_valid(after)))) {
		sc__api_error(r, 400, "BadRequest", "continue",
		              "continue must be the metadata.continue of a previous page");
		return SC_EINVAL;
	}
	if (n < 0)
		after[0] = '\0';
	return 0;
}

/* Picks the items; *more is set to the name of the last one when a next
 * page exists. */
static void choose(sc_server_t *s, list_stream_t *ls, const sc_kind_t *k, const sc_principal_t *who,
                   const char *sel, long limit, const char *after, const char **more)
{
	size_t n, cap = 0;
	sc_cobj_t *const *v = sc__cache_items(s->cache, k, &n);
	size_t i = after[0] ? sc__cache_after(s->cache, k, after) : 0, bytes = 0;
	const char *last = NULL;
	*more = NULL;
	/* An admin's or viewer's list without a selector looks at nothing but
	 * the answer bytes, a tenant's at the queue the cache noted; any other
	 * filter parses each object for the call only (a job's tree is not
	 * kept: sc__cache_parse). */
	int by_queue = who->role == SC_ROLE_TENANT && k->queue_scoped && !sel[0];
	int filter =
	    !by_queue && (who->role == SC_ROLE_TENANT || who->role == SC_ROLE_AGENT || sel[0]);
	for (; i < n; i++) {
		sc_cobj_t *o = v[i];
		if (by_queue && !sc__auth_has_queue(who, o->queue))
			continue;
		if (filter) {
			json_t *obj = sc__cache_parse(o);
			int ok =
			    obj && sc__auth_can_see(who, k, obj) && sc__selector_match(sel, obj);
			json_decref(obj);
			if (!ok)
				continue;
		}
		sc_wire_t *w = sc__cache_wire_ref(o);
		if (!w)
			continue; /* not a JSON object: never written by this server */
		if (limit > 0 &&
		    (ls->n == (size_t)limit || (ls->n && bytes + w->len > PAGE_BYTES))) {
			/* The token is the last name sent, never one the caller
			 * may not see (a tenant must not learn other queues' jobs). */
			*more = last;
			sc__wire_unref(w);
			break;
		}
		ls_add(ls, &cap, w); /* takes w */
		bytes += w->len;
		last = o->name;
	}
}

static void head_text(list_stream_t *ls, const sc_kind_t *k, int64_t rev, const char *more)
{
	char cont[SC_MAX_NAME + 32] = "";
	if (more)
		snprintf(cont, sizeof(cont), ",\"continue\":\"%s\"", more); /* a valid name */
	snprintf(ls->head, sizeof(ls->head),
	         "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"%sList\",\"metadata\":{"
	         "\"resourceVersion\":\"%lld\"%s},\"items\":[",
	         k->kind, (long long)rev, cont);
}

/* Appends items from ls->next until about max bytes are in b. */
static void fill(list_stream_t *ls, sc_buf_t *b, size_t max)
{
	while (ls->next < ls->n && b->len < max) {
		const sc_wire_t *w = ls->items[ls->next];
		if ((ls->next && sc_buf_append(b, ",", 1) < 0) ||
		    sc_buf_append(b, w->data, w->len) < 0)
			sc_oom();
		ls->next++;
	}
}

static void on_drain(sc_http_req_t *r, void *ud);

static void pump(list_stream_t *ls)
{
	sc_buf_t b;
	sc_buf_init(&b, 0);
	ls->pumping = 1;
	while (!ls->closed && ls->next < ls->n && sc_http_pending_out(ls->r) < HIGH_WATER) {
		sc_buf_reset(&b);
		fill(ls, &b, CHUNK_BYTES);
		if (sc_http_stream_write(ls->r, b.data, b.len) < 0)
			break;
	}
	ls->pumping = 0;
	sc_buf_free(&b);
	if (ls->closed) {
		ls_free(ls);
	} else if (ls->next < ls->n && sc_http_pending_out(ls->r) >= HIGH_WATER) {
		sc_http_stream_on_drain(ls->r, on_drain, ls);
	} else {
		/* Finished (or the connection failed: end it, it is closing). */
		sc_http_stream_write(ls->r, "]}\n", 3);
		sc_http_stream_end(ls->r);
		ls_free(ls);
	}
}

static void on_drain(sc_http_req_t *r, void *ud)
{
	(void)r;
	pump(ud);
}

static void on_closed(sc_http_req_t *r, void *ud)
{
	list_stream_t *ls = ud;
	(void)r;
	ls->closed = 1;
	if (!ls->pumping)
		ls_free(ls);
}

static size_t total_bytes(const list_stream_t *ls)
{
	size_t t = strlen(ls->head) + 4;
	for (size_t i = 0; i < ls->n; i++)
		t += ls->items[i]->len + 1;
	return t;
}

static void send_whole(list_stream_t *ls)
{
	sc_buf_t b;
	sc_buf_init(&b, 0);
	if (sc_buf_puts(&b, ls->head) < 0)
		sc_oom();
	fill(ls, &b, (size_t)-1);
	if (sc_buf_append(&b, "]}\n", 3) < 0)
		sc_oom();
	sc_http_respond(ls->r, 200, "application/json", b.data, b.len);
	sc_buf_free(&b);
	ls_free(ls);
}

void sc__list_serve(sc_server_t *s, sc_http_req_t *r, const sc_kind_t *k, const sc_principal_t *who,
                    const char *sel)
{
	long limit;
	char after[SC_MAX_NAME + 1];
	const char *more;
	if (parse_paging(r, &limit, after, sizeof(after)) < 0)
		return;
	list_stream_t *ls = sc_xcalloc(1, sizeof(*ls));
	ls->r = r;
	choose(s, ls, k, who, sel, limit, after, &more);
	head_text(ls, k, sc__cache_rev(s->cache), more);
	if (total_bytes(ls) <= ONE_SHOT_MAX) {
		send_whole(ls);
		return;
	}
	sc_http_stream_start(r, 200, "application/json", on_closed, ls);
	if (sc_http_stream_write(r, ls->head, strlen(ls->head)) < 0) {
		ls->next = ls->n; /* closing: end at once */
	}
	pump(ls);
}
