/* The models a worker serves: loading one (weights, tokenizer, batcher),
 * references, and finding one by name and version (worker_int.h,
 * "wmodel.c"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/parse.h"
#include "starcloud/error.h"
#include "worker/worker_int.h"

int sc__wmodel_load(sc_worker_t *w, const char *name, const char *version, const char *ckpt,
                    const char *tokenizer, const sc_model_gen_t *gen, int max_batch,
                    sc_wmodel_t **out, char *err, size_t errsz)
{
	sc_wmodel_t *m = sc_calloc(1, sizeof(*m));
	int rc = m ? 0 : SC_ENOMEM;
	if (!m) {
		snprintf(err, errsz, "out of memory");
		return rc;
	}
	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->version, sizeof(m->version), "%s", version);
	if (ckpt) {
		rc = sc_model_load_file(ckpt, &m->model, err, errsz);
	} else {
		void *buf;
		size_t len;
		if ((rc = sc_model_gen(gen, &buf, &len)) == 0) {
			rc = sc_model_load_mem(buf, len, &m->model, err, errsz);
			free(buf);
		} else {
			snprintf(err, errsz, "bad model shape");
		}
	}
	if (rc == 0) {
		int vocab = m->model->cfg.vocab_size;
		rc = tokenizer ? sc_tokenizer_load_file(tokenizer, vocab, &m->tok, err, errsz)
		               : sc_tokenizer_bytes(vocab, &m->tok);
		if (rc < 0 && !tokenizer)
			snprintf(err, errsz,
			         "the byte-level tokenizer needs a vocabulary of at "
			         "least 259 (give a tokenizer)");
	}
	if (rc == 0) {
		int seq = m->model->cfg.seq_len;
		m->max_tokens_cap = w->max_tokens < seq ? w->max_tokens : seq;
		int seqs = max_batch > 0 && max_batch < w->max_batch ? max_batch : w->max_batch;
		m->batch = sc__batcher_new(w, m, seqs, w->max_batch_tokens);
		if (!m->batch) {
			snprintf(err, errsz, "out of memory for the batch scratch");
			rc = SC_ENOMEM;
		}
	}
	if (rc < 0) {
		m->refs = 1;
		sc__wmodel_unref(m);
		return rc;
	}
	m->refs = 1; /* the worker's own, dropped when it stops serving it */
	*out = m;
	return 0;
}

void sc__wmodel_unref(sc_wmodel_t *m)
{
	if (!m || --m->refs > 0)
		return;
	sc__batcher_free(m->batch);
	sc_tokenizer_free(m->tok);
	sc_model_free(m->model);
	free(m);
}

/* Versions compare as numbers when both are (Triton's are), else as text. */
static int version_newer(const char *a, const char *b)
{
	int64_t x, y;
	if (sc_parse_i64(a, 0, INT64_MAX, &x) == 0 && sc_parse_i64(b, 0, INT64_MAX, &y) == 0)
		return x > y;
	return strcmp(a, b) > 0;
}

sc_wmodel_t *sc__worker_model(sc_worker_t *w, const char *name, const char *version)
{
	char buf[sizeof(((sc_wmodel_t *)0)->name)];
	if (!name || !*name) {
		/* No name: the only model served, if there is just one. */
		sc_wmodel_t *only = NULL;
		for (sc_wmodel_t *m = w->models; m; m = m->next)
			if (m->served) {
				if (only || version)
					return NULL;
				only = m;
			}
		return only;
	}
	const char *colon = version ? NULL : strchr(name, ':');
	if (colon) {
		size_t n = (size_t)(colon - name);
		if (n >= sizeof(buf))
			return NULL;
		memcpy(buf, name, n);
		buf[n] = '\0';
		version = colon + 1;
		name = buf;
	}
	sc_wmodel_t *best = NULL;
	for (sc_wmodel_t *m = w->models; m; m = m->next) {
		if (!m->served || strcmp(m->name, name) != 0)
			continue;
		if (version && strcmp(m->version, version) == 0)
			return m;
		if (!version && (!best || version_newer(m->version, best->version)))
			best = m;
	}
	return best;
}
