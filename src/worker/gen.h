/* Generation jobs and their sequences, shared by gen.c (a request's life
 * and its text), genjson.c (the answer's JSON shapes) and batch.c (the
 * continuous batcher that runs every sequence's forward passes).
 *
 * A job is one request: one or more sequences (prompts x choices). A
 * sequence is fed its tokens to feed (the prompt, then any tokens the
 * client already has from an earlier, broken attempt) in chunks, then
 * decodes one token per batch step until it stops. Sequences of all
 * requests of one model share each forward step. */
#ifndef SC_WORKER_GEN_H
#define SC_WORKER_GEN_H

#include "worker/worker_int.h"

enum { SEQ_WAITING, SEQ_FEEDING, SEQ_DECODING, SEQ_DONE };

typedef struct sc_job sc_job_t;
struct sc_seq;

/* What the batcher tells a sequence (gen.c's, set on every sequence it
 * makes), so the batcher does not call back into the module that feeds
 * it. */
typedef struct sc_seq_ops {
	/* The admitted sequence got its session: loads a fetched KV, and for
	 * a decode emits first_token. 0, or a negative code once the sequence
	 * is done (its state is then SEQ_DONE). */
	int (*admitted)(struct sc_seq *s);
	/* After a step that fed s's last feed token or its pending token:
	 * logits (scratch, may be changed; NULL for embeddings) are the
	 * next-token logits. Picks the next token and emits it, or ends it. */
	void (*after_step)(struct sc_seq *s, float *logits);
	/* Ends a sequence the batcher could not serve (out of memory). */
	void (*fail)(struct sc_seq *s, int status, const char *msg);
	/* The batcher has let go of s (done, its session freed). */
	void (*released)(struct sc_seq *s);
} sc_seq_ops_t;

/* A token's logprobs: its own and the top alternatives. */
typedef struct seq_lp {
	float lp;
	int ntop;
	int top[SC_WORKER_MAX_TOP_LOGPROBS];
	float top_lp[SC_WORKER_MAX_TOP_LOGPROBS];
} seq_lp_t;

typedef struct sc_seq {
	const sc_seq_ops_t *ops;
	sc_job_t *job;
	int index;  /* choice index in the answer (prompt x n + choice) */
	int prompt; /* which prompt */
	int state;
	sc_session_t *sess; /* while admitted */
	int *feed;          /* prompt ids, then forced ids (owned) */
	int n_feed, fed;
	int n_prompt, n_forced;
	int pending; /* the next token to emit, once decoding */
	seq_lp_t pending_lp;
	int n_out; /* tokens emitted or replayed */
	int prev_tok;
	int *out_ids, n_ids; /* emitted ids (max_tokens room) */
	sc_buf_t text;       /* released text (non-streamed answers) */
	sc_buf_t hold;       /* generated text not yet released: may start a stop sequence */
	sc_utf8_t utf8;
	int stopped;        /* a stop sequence completed */
	int chunks;         /* tokens emitted to the client */
	size_t toff;        /* text offset of the next token (completion logprobs) */
	const char *finish; /* "stop" | "length" once done; NULL when cancelled */
	uint64_t seed;
	float *logits;           /* the last step's logits (vocab floats) */
	double *hidden;          /* embeddings: sum of hidden states (dim doubles) */
	json_t *lps;             /* logprobs of the released tokens (non-streamed) */
	unsigned char *kv_block; /* decode: the fetched KV, imported at admission */
	size_t kv_len;
	int kv_tokens;
	struct sc_seq *next; /* the batcher's list */
} sc_seq_t;

struct sc_job {
	wreq_t q;
	gen_params_t p;
	sc_seq_t *seqs;
	int nseq, nlive; /* sequences, and those not done */
	int n_prompt_total;
	int streaming, gone, answered, freeing;
	int early; /* a non-streamed answer's head went out (heartbeat) */
	char id[48];
	long long created;
	uv_timer_t timer;     /* --latency-ms before the work starts */
	sc_hcli_req_t *fetch; /* decode: the KV pull in flight */
	char *kv_url;
	seq_lp_t first_lp; /* decode: the prefill's logprobs of first_token */
	int first_lp_set;
	int first_token;
	int inb;        /* sequences the batcher holds */
	float *scratch; /* logits before sampling (logprobs), vocab floats */
};

/* ---- batch.c, called by gen.c ---- */
/* Queues s; it is admitted when there is room. SC_ELIMIT when the queue is
 * full (--max-queue). */
int sc__batcher_add(sc_batcher_t *b, sc_seq_t *s);
/* Makes the batcher look at its sequences on the next loop turn (one was
 * marked done from outside a step). */
void sc__batcher_kick(sc_batcher_t *b);

/* ---- genjson.c ---- */
/* One streamed chunk of sequence s: text (valid UTF-8), the ids it carries,
 * their logprobs (may be NULL), finish NULL until the last. */
json_t *sc__chunk_json(const sc_seq_t *s, const char *text, size_t len, const int *ids, int n,
                       const seq_lp_t *lp, const char *finish);
/* The usage-only last chunk (stream_options.include_usage). */
json_t *sc__usage_chunk_json(const sc_job_t *j);
/* The complete non-streamed answer of a job. */
json_t *sc__final_json(const sc_job_t *j);
/* One released token's logprobs entry, for the non-streamed answer. */
void sc__lp_append(sc_seq_t *s, int token, const seq_lp_t *lp);
/* The KServe binary answer (JSON header + tensors); sets *hlen, the JSON
 * header's length. NULL when out of memory. */
unsigned char *sc__kserve_binary(const sc_job_t *j, size_t *len, size_t *hlen);
/* Embeddings answer. */
json_t *sc__embed_json(const sc_job_t *j);
/* A token's logprobs as the prefill answers them ({"token", "logprob",
 * "top": [[id, logprob], ...]}), and back (0, or SC_EINVAL). */
json_t *sc__lp_json(const sc_job_t *j, int token, const seq_lp_t *lp);
int sc__lp_parse(const sc_job_t *j, json_t *o, seq_lp_t *lp);

#endif
