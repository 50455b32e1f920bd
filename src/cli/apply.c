/* `apply -f` / `delete -f` over one pipelined connection (apply.h).
 *
 * At most WINDOW objects are in flight; each has a slot that remembers
 * what to print and, for apply, the body a PUT needs after a 409. A file
 * of JSON values is checked whole first (syntax, kinds, names, so a bad
 * file applies nothing) and then read again one value at a time. */
#include "cli/apply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/yamljson.h"
#include "cli/hpipe.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

#define WINDOW 256
#define RETRIES 8 /* of one object answered 429 or 503 */

enum { ST_POST, ST_PUT, ST_DELETE };

/* A source of objects: next() returns a new reference, or NULL at the
 * end (*err set when the input was bad). total: objects expected, or 0
 * when unknown. */
typedef struct sc_objsrc {
	json_t *(*next)(struct sc_objsrc *src, int *err);
	size_t total;
	void *ud;
} sc_objsrc_t;

typedef struct slot {
	char what[300]; /* "jobs/x" */
	char path[300]; /* /api/v1/jobs[/x] */
	char *body;     /* owned; NULL for a delete */
	size_t len;
	int stage;
	int tries;
	double not_before; /* a retry waits until then (seconds, monotonic) */
	int next_free;
} slot_t;

typedef struct run {
	sc_apply_t *a;
	sc_hpipe_t *p;
	slot_t slots[WINDOW];
	int free_head;
	size_t inflight; /* slots in use, answered or waiting for a retry */
	int retrying[WINDOW];
	size_t nretry;
	size_t done, total;
	bool lines, progress;
	size_t was[4]; /* a's counts when this run started */
	double start, drawn;
} run_t;

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *plural_of_kind(const char *kind)
{
	static const char *const map[][2] = {
	    {"Node", "nodes"},
	    {"Queue", "queues"},
	    {"PriorityClass", "priorityclasses"},
	    {"Job", "jobs"},
	    {"Deployment", "deployments"},
	    {"Event", "events"},
	    {"NodePool", "nodepools"},
	    {"SchedulerConfig", "schedulerconfigs"},
	    {"Topology", "topologies"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (kind && strcmp(kind, map[i][0]) == 0)
			return map[i][1];
	return NULL;
}

static const char *name_of(json_t *obj)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

/* ---- progress ---- */

static void draw(run_t *r, int last)
{
	double t = mono();
	if (!r->progress || (!last && t - r->drawn < 0.1))
		return;
	r->drawn = t;
	double rate = t > r->start ? (double)r->done / (t - r->start) : 0;
	if (r->total)
		fprintf(stderr, "\r\033[Kstarcloud: %zu of %zu objects (%.0f/s)", r->done, r->total,
		        rate);
	else
		fprintf(stderr, "\r\033[Kstarcloud: %zu objects (%.0f/s)", r->done, rate);
	if (last)
		fprintf(stderr, "\r\033[K");
	fflush(stderr);
}

/* ---- slots ---- */

static void slot_free(run_t *r, int i)
{
	free(r->slots[i].body);
	r->slots[i].body = NULL;
	r->slots[i].next_free = r->free_head;
	r->free_head = i;
	r->inflight--;
	r->done++;
}

static void send_slot(run_t *r, int i)
{
	slot_t *s = &r->slots[i];
	static const char *const methods[] = {"POST", "PUT", "DELETE"};
	sc__hpipe_send(r->p, methods[s->stage], s->path, s->body, s->len, (uint64_t)i);
}

static void print_error(run_t *r, slot_t *s, long status, const char *body, size_t len)
{
	json_t *doc = json_loadb(body, len, 0, NULL);
	const char *msg =
	    json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
	if (status < 0)
		fprintf(stderr, "starcloud: %s: the server could not be reached\n", s->what);
	else
		fprintf(stderr, "starcloud: %s: %ld %s\n", s->what, status,
		        msg ? msg : "request failed");
	json_decref(doc);
	int rc = status == 400 || status == 413 ? 2 : 1;
	r->a->worst = rc > r->a->worst ? rc : r->a->worst;
	r->a->failed++;
}

static void on_reply(void *ud, uint64_t tag, const sc_hpipe_reply_t *rep)
{
	run_t *r = ud;
	int i = (int)tag;
	slot_t *s = &r->slots[i];
	long st = rep->status;
	if (st >= 200 && st < 300) {
		const char *verb = s->stage == ST_POST  ? "created"
		                   : s->stage == ST_PUT ? "configured"
		                                        : "deleted";
		*(s->stage == ST_POST  ? &r->a->created
		  : s->stage == ST_PUT ? &r->a->configured
		                       : &r->a->deleted) += 1;
		if (r->lines)
			printf("%s %s\n", s->what, verb);
		slot_free(r, i);
		return;
	}
	if (st == 409 && s->stage == ST_POST) {
		/* It exists: replace it (conditional on the version read). */
		snprintf(s->path + strlen(s->path), sizeof(s->path) - strlen(s->path), "/%s",
		         strchr(s->what, '/') + 1);
		s->stage = ST_PUT;
		send_slot(r, i);
		return;
	}
	if ((st == 429 || st == 503) && s->tries < RETRIES) {
		/* Flow control or a store that cannot be reached for a moment:
		 * the request changed nothing, so it can simply go again. */
		double wait = rep->retry_after > 0 ? rep->retry_after : 0.1 * (1 << s->tries);
		s->tries++;
		s->not_before = mono() + (wait > 5 ? 5 : wait);
		r->retrying[r->nretry++] = i;
		return;
	}
	print_error(r, s, st, rep->body, rep->len);
	slot_free(r, i);
}

/* Sends the retries that are due; returns the seconds until the next. */
static double send_due(run_t *r)
{
	double t = mono(), next = 1e9;
	for (size_t k = 0; k < r->nretry;) {
		int i = r->retrying[k];
		if (r->slots[i].not_before <= t) {
			send_slot(r, i);
			r->retrying[k] = r->retrying[--r->nretry];
			continue;
		}
		if (r->slots[i].not_before - t < next)
			next = r->slots[i].not_before - t;
		k++;
	}
	return next;
}

/* Runs I/O until one more slot is free (or everything is answered). */
static void step(run_t *r)
{
	double next = send_due(r);
	size_t pend = sc__hpipe_pending(r->p);
	if (pend > 0) {
		sc__hpipe_drain(r->p, pend - 1);
	} else if (r->nretry) {
		struct timespec ts = {0, (long)(next * 1e9)};
		if (next >= 1)
			ts = (struct timespec){1, 0};
		nanosleep(&ts, NULL);
	}
	draw(r, 0);
}

/* Fills a slot for obj; 0, 1 when obj is skipped (an Event), or 2 when
 * obj cannot be sent (printed). */
static int prepare(run_t *r, json_t *obj, int i)
{
	slot_t *s = &r->slots[i];
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *res = plural_of_kind(kind);
	const char *name = name_of(obj);
	memset(s, 0, sizeof(*s));
	if (!res || !name) {
		fprintf(stderr, "starcloud: %s\n",
		        !res ? "an object of unknown kind" : "an object without metadata.name");
		return 2;
	}
	snprintf(s->what, sizeof(s->what), "%s/%.250s", res, name);
	if (strcmp(res, "events") == 0) {
		/* `get events` prints them with the rest; the server writes them. */
		if (r->lines)
			printf("%s skipped (events are written by the server)\n", s->what);
		return 1;
	}
	if (r->a->del) {
		s->stage = ST_DELETE;
		snprintf(s->path, sizeof(s->path), "/api/v1/%s/%.250s", res, name);
	} else {
		s->stage = ST_POST;
		snprintf(s->path, sizeof(s->path), "/api/v1/%s", res);
		s->body = sc_xcheck(json_dumps(obj, JSON_COMPACT));
		s->len = strlen(s->body);
	}
	return 0;
}

static sc_hpipe_t *connect_any(run_t *r)
{
	const char *p = r->a->servers;
	char err[600] = "no server given";
	while (*p) {
		int n = (int)strcspn(p, ",");
		sc_hpipe_t *h = sc__hpipe_open(p, (size_t)n, r->a->token, r->a->ca, on_reply, r,
		                               err, sizeof(err));
		if (h)
			return h;
		p += n;
		p += *p == ',';
	}
	fprintf(stderr, "starcloud: %s\n", err);
	return NULL;
}

static int apply_run(sc_apply_t *a, sc_objsrc_t *src)
{
	run_t *r = sc_xcalloc(1, sizeof(*r));
	int err = 0;
	r->a = a;
	r->total = src->total;
	r->lines = !a->quiet && (!a->tty || (src->total > 0 && src->total <= SC_APPLY_LINES));
	r->progress = !r->lines && a->progress;
	r->start = r->drawn = mono();
	r->was[0] = a->created;
	r->was[1] = a->configured;
	r->was[2] = a->deleted;
	r->was[3] = a->failed;
	for (int i = 0; i < WINDOW; i++)
		r->slots[i].next_free = i + 1 < WINDOW ? i + 1 : -1;
	r->p = connect_any(r);
	if (!r->p) {
		a->worst = a->worst > 1 ? a->worst : 1;
		free(r);
		return a->worst;
	}
	json_t *obj;
	while ((obj = src->next(src, &err)) != NULL) {
		while (r->free_head < 0)
			step(r);
		int i = r->free_head, next = r->slots[i].next_free;
		int rc = prepare(r, obj, i);
		json_decref(obj);
		r->slots[i].next_free = next;
		if (rc == 1) {
			r->done++;
			continue;
		}
		if (rc) {
			a->worst = rc > a->worst ? rc : a->worst;
			a->failed++;
			continue;
		}
		r->free_head = next;
		r->inflight++;
		send_slot(r, i);
		if (sc__hpipe_pending(r->p) >= WINDOW / 2)
			sc__hpipe_drain(r->p, WINDOW / 2 - 1);
		draw(r, 0);
	}
	while (r->inflight > 0)
		step(r);
	draw(r, 1);
	if (!r->lines && !a->quiet)
		printf(
		    "%zu objects in %.1f s: %zu created, %zu configured, %zu deleted, %zu failed\n",
		    r->done, mono() - r->start, a->created - r->was[0], a->configured - r->was[1],
		    a->deleted - r->was[2], a->failed - r->was[3]);
	if (err)
		a->worst = 2;
	sc__hpipe_close(r->p);
	free(r);
	return a->worst;
}

/* ---------------------------------------------------------------------
 * Sources
 * ------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "starcloud: cannot read %s\n", path);
		return NULL;
	}
	sc_buf_t b;
	sc_buf_init(&b, SC_APPLY_MAX_FILE);
	char chunk[65536];
	size_t n;
	int rc = 0;
	while (rc == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		rc = sc_buf_append(&b, chunk, n);
	fclose(f);
	if (rc < 0) {
		fprintf(stderr, "starcloud: %s is larger than %u bytes\n", path, SC_APPLY_MAX_FILE);
		sc_buf_free(&b);
		return NULL;
	}
	if (!b.data)
		sc_buf_append(&b, "", 0);
	return sc_buf_steal(&b, len);
}

/* A stream of JSON values (`{...}\n{...}`, which YAML does not accept but
 * JSON tooling writes), one of which may be a list: values are read one
 * at a time; the elements of a top-level list one at a time too. */
typedef struct jstream {
	const char *text;
	size_t len, off;
	int in_list;  /* inside a top-level [ ... ] */
	json_t *held; /* a List object or nested array being handed out */
	size_t at;
} jstream_t;

/* The objects a value stands for: a List ("kind": "JobList", "items"),
 * as `get -o yaml|json` prints one, or an array, or the value itself. */
static json_t *items_of(json_t *v)
{
	const char *kind = json_string_value(json_object_get(v, "kind"));
	size_t kl = kind ? strlen(kind) : 0;
	json_t *items = json_object_get(v, "items");
	if (json_is_array(v))
		return v;
	if (kl >= 4 && strcmp(kind + kl - 4, "List") == 0 && json_is_array(items))
		return items;
	return NULL;
}

static void skip_ws(jstream_t *j)
{
	while (j->off < j->len && strchr(" \t\r\n", j->text[j->off]))
		j->off++;
}

/* The next value (new reference), NULL at the end; *bad on a syntax
 * error, with err filled. */
static json_t *jstream_next(jstream_t *j, int *bad, json_error_t *err)
{
	for (;;) {
		if (j->held) {
			json_t *v = json_array_get(items_of(j->held), j->at++);
			if (v)
				return json_incref(v);
			json_decref(j->held);
			j->held = NULL;
		}
		skip_ws(j);
		if (j->in_list && j->off < j->len && j->text[j->off] == ',') {
			j->off++;
			continue;
		}
		if (j->in_list && j->off < j->len && j->text[j->off] == ']') {
			j->off++;
			j->in_list = 0;
			continue;
		}
		if (j->off >= j->len) {
			if (j->in_list) {
				*bad = 1;
				snprintf(err->text, sizeof(err->text), "the list is not closed");
				err->line = -1;
			}
			return NULL;
		}
		if (!j->in_list && j->text[j->off] == '[') {
			j->off++;
			j->in_list = 1;
			continue;
		}
		json_t *v = json_loadb(j->text + j->off, j->len - j->off,
		                       JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, err);
		if (!v) {
			*bad = 1;
			return NULL;
		}
		j->off += err->position;
		if (!items_of(v))
			return v;
		j->held = v;
		j->at = 0;
	}
}

/* The line of byte offset off, 1-based. */
static int line_at(const char *text, size_t off)
{
	int line = 1;
	for (size_t i = 0; i < off; i++)
		line += text[i] == '\n';
	return line;
}

/* Checks what the server would refuse before anything is sent: every
 * value is an object of a known kind with a name. */
static int check_object(json_t *v, const char *path, size_t index)
{
	const char *kind = json_string_value(json_object_get(v, "kind"));
	if (!json_is_object(v))
		fprintf(stderr, "starcloud: %s: object %zu: expected an object\n", path, index + 1);
	else if (!plural_of_kind(kind))
		fprintf(stderr, "starcloud: %s: object %zu: kind: unknown kind \"%s\"\n", path,
		        index + 1, kind ? kind : "");
	else if (!name_of(v))
		fprintf(stderr,
		        "starcloud: %s: object %zu (%s): metadata.name: expected a string\n", path,
		        index + 1, kind);
	else
		return 0;
	return SC_EINVAL;
}

/* Counts and checks every value; 0, SC_EPARSE (not JSON: try YAML when
 * nothing parsed) or SC_EINVAL (reported). */
static int jstream_check(const char *text, size_t len, const char *path, size_t *count)
{
	jstream_t j = {text, len, 0, 0, NULL, 0};
	json_error_t err;
	int bad = 0;
	json_t *v;
	*count = 0;
	while ((v = jstream_next(&j, &bad, &err)) != NULL) {
		int rc = check_object(v, path, *count);
		json_decref(v);
		if (rc < 0) {
			json_decref(j.held);
			return rc;
		}
		(*count)++;
	}
	if (!bad)
		return 0;
	if (*count == 0)
		return SC_EPARSE;
	fprintf(stderr, "starcloud: %s:%d: %s\n", path,
	        err.line < 0 ? line_at(text, len) : line_at(text, j.off) + err.line - 1, err.text);
	return SC_EINVAL;
}

static json_t *next_json(sc_objsrc_t *src, int *bad)
{
	json_error_t err;
	return jstream_next(src->ud, bad, &err);
}

typedef struct docs_src {
	json_t *all; /* array of objects */
	size_t i;
} docs_src_t;

static json_t *next_doc(sc_objsrc_t *src, int *bad)
{
	docs_src_t *d = src->ud;
	(void)bad;
	json_t *v = json_array_get(d->all, d->i);
	if (v)
		d->i++;
	return json_incref(v);
}

/* YAML documents (or one JSON document the JSON reader refused), all
 * loaded and checked first. NULL when the file is bad (reported). */
static json_t *load_yaml(const char *text, size_t len, const char *path)
{
	sc_yj_docs_t *docs = NULL;
	sc_yj_error_t err;
	if (sc_yj_load(text, len, NULL, &docs, &err) < 0) {
		fprintf(stderr, "starcloud: %s:%d:%d: %s\n", path, err.line, err.col, err.msg);
		return NULL;
	}
	json_t *all = json_array();
	for (size_t i = 0; i < sc_yj_count(docs); i++) {
		json_t *doc = sc_yj_doc(docs, i);
		if (items_of(doc))
			json_array_extend(all, items_of(doc));
		else
			json_array_append(all, doc);
	}
	sc_yj_free(docs);
	for (size_t i = 0; i < json_array_size(all); i++)
		if (check_object(json_array_get(all, i), path, i) < 0) {
			json_decref(all);
			return NULL;
		}
	return all;
}

int sc__apply_file(sc_apply_t *a, const char *path)
{
	size_t len, count = 0;
	char *text = read_file(path, &len);
	if (!text) {
		a->worst = 2;
		return 2;
	}
	int rc = 0;
	size_t lead = strspn(text, " \t\r\n");
	if (text[lead] == '{' || text[lead] == '[')
		rc = jstream_check(text, len, path, &count);
	if (rc == SC_EINVAL) {
		free(text);
		a->worst = 2;
		return 2;
	}
	if ((text[lead] == '{' || text[lead] == '[') && rc == 0) {
		jstream_t j = {text, len, 0, 0, NULL, 0};
		sc_objsrc_t src = {.next = next_json, .total = count, .ud = &j};
		rc = apply_run(a, &src);
		free(text);
		return rc;
	}
	json_t *all = load_yaml(text, len, path);
	free(text);
	if (!all) {
		a->worst = 2;
		return 2;
	}
	docs_src_t d = {all, 0};
	sc_objsrc_t src = {.next = next_doc, .total = json_array_size(all), .ud = &d};
	rc = apply_run(a, &src);
	json_decref(all);
	return rc;
}
