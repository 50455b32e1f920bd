/* Continuous batching: every sequence of every request to one model shares
 * each forward step (vLLM's and SGLang's scheduling, on a CPU).
 *
 * A model's batcher keeps a queue of waiting sequences and a list of
 * running ones (at most --max-batch; each holds a KV cache). While any
 * model has work, the loop's idle handle runs one step per loop turn, so
 * requests are read, answered and cancelled between steps. A step:
 *   1. lets go of finished and cancelled sequences (their KV caches are
 *      freed here, at once);
 *   2. admits waiting sequences while there is room (first come, first
 *      served), each with a fresh KV cache;
 *   3. builds one batch of at most --max-batch-tokens items: every
 *      decoding sequence's next token first (running streams keep their
 *      pace), then the prompts being fed, the remaining room shared
 *      equally among them (chunked prefill: a long prompt does not hold
 *      up a short one, and no prompt waits for another to finish);
 *   4. runs the forward pass once for the whole batch;
 *   5. hands each sequence its logits: it picks and emits its next token,
 *      or ends.
 * A request that arrives while others generate is admitted at the next
 * step and starts producing tokens after its own prefill, however long
 * the answers already running are. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "starcloud/error.h"
#include "worker/gen.h"

struct sc_batcher {
	sc_worker_t *w;
	sc_wmodel_t *m;
	sc_fwd_t *fwd;
	int max_seqs, max_tokens;
	sc_seq_t *wait, *wait_tail;
	int nwait;
	sc_seq_t *run, *run_tail;
	int nrun;
	int dirty;             /* a sequence was marked done from outside a step */
	sc_step_item_t *items; /* [max_tokens] */
	sc_seq_t **owner;      /* [max_tokens]: the sequence of each item */
	int *take;             /* [max_seqs]: items per running sequence this step */
	float *hid;            /* [max_tokens][dim]: hidden states of embedding items */
};

sc_batcher_t *sc__batcher_new(sc_worker_t *w, sc_wmodel_t *m, int max_seqs, int max_tokens)
{
	sc_batcher_t *b = sc_calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->w = w;
	b->m = m;
	b->max_seqs = max_seqs;
	b->max_tokens = max_tokens;
	b->fwd = sc_fwd_new(m->model, max_tokens);
	b->items = sc_calloc((size_t)max_tokens, sizeof(*b->items));
	b->owner = sc_calloc((size_t)max_tokens, sizeof(*b->owner));
	b->take = sc_calloc((size_t)max_seqs, sizeof(*b->take));
	b->hid = sc_malloc((size_t)max_tokens * (size_t)m->model->cfg.dim * sizeof(float));
	if (!b->fwd || !b->items || !b->owner || !b->take || !b->hid) {
		sc__batcher_free(b);
		return NULL;
	}
	return b;
}

void sc__batcher_free(sc_batcher_t *b)
{
	if (!b)
		return;
	sc_fwd_free(b->fwd);
	free(b->items);
	free(b->owner);
	free(b->take);
	free(b->hid);
	free(b);
}

void sc__batcher_load(const sc_batcher_t *b, int *waiting, int *running)
{
	*waiting = b->nwait;
	*running = b->nrun;
}

size_t sc__batcher_kv_bytes(const sc_batcher_t *b)
{
	size_t n = 0;
	for (const sc_seq_t *s = b->run; s; s = s->next)
		if (s->sess)
			n += sc_session_bytes(b->m->model);
	return n;
}

static int has_work(const sc_batcher_t *b)
{
	return b->nwait > 0 || b->nrun > 0 || b->dirty;
}

static void batch_run(sc_worker_t *w);

static void on_idle(uv_idle_t *h)
{
	batch_run(h->data);
}

/* An active idle handle makes the loop poll without blocking: steps run
 * back to back, with the loop's I/O served between them. */
static void kick(sc_worker_t *w)
{
	if (!uv_is_active((uv_handle_t *)&w->step_idle))
		uv_idle_start(&w->step_idle, on_idle);
}

int sc__batcher_add(sc_batcher_t *b, sc_seq_t *s)
{
	/* Waiting sequences that the next step admits are not queued. */
	int room = b->max_seqs - b->nrun;
	if (b->w->max_queue > 0 && b->nwait - (room > 0 ? room : 0) >= b->w->max_queue)
		return SC_ELIMIT;
	s->state = SEQ_WAITING;
	s->next = NULL;
	if (b->wait_tail)
		b->wait_tail->next = s;
	else
		b->wait = s;
	b->wait_tail = s;
	b->nwait++;
	sc__batcher_kick(b);
	return 0;
}

void sc__batcher_kick(sc_batcher_t *b)
{
	b->dirty = 1;
	kick(b->w);
}

/* ---------------------------------------------------------------------
 * Lists
 * ------------------------------------------------------------------- */

/* Lets go of every done sequence of a list: frees its KV cache now. */
static void sweep_list(sc_seq_t **head, sc_seq_t **tail, int *count)
{
	sc_seq_t *prev = NULL, *s = *head;
	while (s) {
		sc_seq_t *next = s->next;
		if (s->state != SEQ_DONE) {
			prev = s;
			s = next;
			continue;
		}
		if (prev)
			prev->next = next;
		else
			*head = next;
		if (*tail == s)
			*tail = prev;
		(*count)--;
		sc_session_free(s->sess);
		s->sess = NULL;
		s->next = NULL;
		s->ops->released(s); /* may free s with its request */
		s = next;
	}
}

static void sweep(sc_batcher_t *b)
{
	b->dirty = 0;
	sweep_list(&b->wait, &b->wait_tail, &b->nwait);
	sweep_list(&b->run, &b->run_tail, &b->nrun);
}

/* First come, first served, while there is room and memory. */
static void admit(sc_batcher_t *b)
{
	while (b->wait && b->nrun < b->max_seqs) {
		sc_seq_t *s = b->wait;
		sc_session_t *sess = sc_session_new(b->m->model);
		if (!sess) {
			if (b->nrun > 0)
				return; /* memory comes back as running sequences end */
			b->wait = s->next;
			if (!b->wait)
				b->wait_tail = NULL;
			b->nwait--;
			s->next = NULL;
			s->state = SEQ_DONE;
			s->ops->fail(s, 503, "out of memory for a KV cache");
			s->ops->released(s);
			continue;
		}
		b->wait = s->next;
		if (!b->wait)
			b->wait_tail = NULL;
		b->nwait--;
		s->next = NULL;
		s->sess = sess;
		s->state = s->fed < s->n_feed ? SEQ_FEEDING : SEQ_DECODING;
		if (b->run_tail)
			b->run_tail->next = s;
		else
			b->run = s;
		b->run_tail = s;
		b->nrun++;
		s->ops->admitted(s); /* a decode emits first_token here */
	}
}

/* ---------------------------------------------------------------------
 * The step
 * ------------------------------------------------------------------- */

/* How many feed tokens each feeding sequence gets out of room: an equal
 * share, then what is left to those that can use more. */
static void share_room(sc_batcher_t *b, int room)
{
	int nfeed = 0, k = 0;
	for (sc_seq_t *s = b->run; s; s = s->next)
		nfeed += s->state == SEQ_FEEDING;
	if (!nfeed || room <= 0)
		return;
	int share = room / nfeed > 0 ? room / nfeed : 1;
	for (sc_seq_t *s = b->run; s; s = s->next, k++) {
		if (s->state != SEQ_FEEDING || room == 0)
			continue;
		int want = s->n_feed - s->fed;
		b->take[k] = want < share ? want : share;
		if (b->take[k] > room)
			b->take[k] = room;
		room -= b->take[k];
	}
	k = 0;
	for (sc_seq_t *s = b->run; s && room > 0; s = s->next, k++) {
		if (s->state != SEQ_FEEDING)
			continue;
		int more = s->n_feed - s->fed - b->take[k];
		if (more > room)
			more = room;
		b->take[k] += more;
		room -= more;
	}
}

/* The batch: decoding sequences' pending tokens, then prompt chunks. */
static int build(sc_batcher_t *b)
{
	int n = 0, k = 0, dim = b->m->model->cfg.dim;
	for (sc_seq_t *s = b->run; s; s = s->next, k++) {
		b->take[k] = 0;
		if (s->state != SEQ_DECODING || n == b->max_tokens)
			continue;
		b->take[k] = 1;
		b->items[n] =
		    (sc_step_item_t){.s = s->sess, .token = s->pending, .logits = s->logits};
		b->owner[n++] = s;
	}
	share_room(b, b->max_tokens - n);
	k = 0;
	for (sc_seq_t *s = b->run; s; s = s->next, k++) {
		if (s->state != SEQ_FEEDING)
			continue;
		for (int i = 0; i < b->take[k]; i++) {
			int last = s->fed + i + 1 == s->n_feed;
			sc_step_item_t *it = &b->items[n];
			*it = (sc_step_item_t){.s = s->sess, .token = s->feed[s->fed + i]};
			if (s->hidden)
				it->hidden = b->hid + (size_t)n * (size_t)dim;
			else if (last)
				it->logits = s->logits;
			b->owner[n++] = s;
		}
	}
	return n;
}

/* After the step: each sequence whose feed is complete, or whose pending
 * token was fed, goes on; embeddings add up their hidden states. */
static void after(sc_batcher_t *b, int n)
{
	sc_counters_t *c = &b->w->c;
	int dim = b->m->model->cfg.dim;
	for (int i = 0; i < n; i++) {
		sc_seq_t *s = b->owner[i];
		if (s->state == SEQ_DONE)
			continue; /* cancelled by an earlier sequence's failed write */
		if (s->state == SEQ_DECODING) {
			c->decode_steps++;
			s->ops->after_step(s, s->logits);
			continue;
		}
		if (s->fed < s->n_prompt && !s->kv_tokens)
			c->prefill_tokens++;
		else
			c->decode_steps++; /* a token the client already has */
		if (s->hidden) {
			const float *h = b->hid + (size_t)i * (size_t)dim;
			for (int d = 0; d < dim; d++)
				s->hidden[d] += h[d];
		}
		if (++s->fed == s->n_feed) {
			if (s->n_prompt > 0 && !s->kv_tokens)
				c->prefills++;
			s->ops->after_step(s, s->hidden ? NULL : s->logits);
		}
	}
}

static void step(sc_batcher_t *b)
{
	sweep(b);
	admit(b);
	sweep(b); /* an admission may have ended a sequence (a bad KV block) */
	int n = build(b);
	if (n == 0)
		return;
	int rc = sc_fwd_step(b->fwd, b->items, n);
	b->w->c.batch_steps++;
	b->w->c.batch_items += (uint64_t)n;
	if (rc < 0) {
		/* The batch was checked while it was built: a bug, not input. */
		for (int i = 0; i < n; i++)
			if (b->owner[i]->state != SEQ_DONE)
				b->owner[i]->ops->fail(b->owner[i], 500, "forward pass failed");
	} else {
		after(b, n);
	}
	sweep(b); /* finished sequences free their KV caches at once */
}

/* One step of every model with work. */
static void batch_run(sc_worker_t *w)
{
	int busy = 0;
	for (sc_wmodel_t *m = w->models; m; m = m->next) {
		if (!m->batch || !has_work(m->batch))
			continue;
		step(m->batch);
		busy |= has_work(m->batch);
	}
	if (!busy)
		uv_idle_stop(&w->step_idle);
}
