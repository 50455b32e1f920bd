/* `starcloud worker`: flags, model loading, --gen-checkpoint, and the
 * daemon's loop. See docs/WORKER.md for the API and the flags. */
#include "worker/worker.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "net/sdnotify.h"
#include "starcloud/error.h"
#include "worker/worker_int.h"

typedef struct wopts {
	const char *checkpoint, *tokenizer, *gen_out, *id, *otlp, *advertise;
	char model[128], version[32], host[64];
	int port, role, max_tokens, kv_max;
	uint64_t kv_lease_ms, fault_seed;
	long crash_after, hang_after, latency_ms, fail_decode_after;
	double fail_rate;
	sc_model_gen_t gen;
} wopts_t;

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: starcloud worker [--checkpoint FILE] [options]\n"
	       "       starcloud worker --gen-checkpoint FILE [--dim 64 --hidden-dim 0 --layers 2\n"
	       "                        --heads 4 --kv-heads 2 --vocab 512 --seq-len 256 --seed 1\n"
	       "                        --shared]\n\n"
	       "Serves a llama2.c checkpoint over OpenAI and KServe v2 (docs/WORKER.md).\n"
	       "  --checkpoint FILE   model weights (default: a built-in tiny model, seed 1)\n"
	       "  --tokenizer FILE    llama2.c tokenizer.bin (default: byte-level tokenizer)\n"
	       "  --model NAME        served model name (default tiny)\n"
	       "  --version V         served version (default 1)\n"
	       "  --listen HOST:PORT  address (default 127.0.0.1:9000; port 0 = any free port)\n"
	       "  --id ID             x-starcloud-replica value (default HOST:PORT)\n"
	       "  --advertise HOST    host named in kv_url (default: the listen host; 127.0.0.1\n"
	       "                      when listening on 0.0.0.0)\n"
	       "  --role R            prefill | decode | both (default both)\n"
	       "  --max-tokens N      largest max_tokens accepted (default 256, at most seq_len)\n"
	       "  --kv-lease DUR      KV handle lease, e.g. 30s, 500ms (default 30s)\n"
	       "  --kv-max-handles N  live KV handles at most (default 64)\n"
	       "  --otlp URL          export a span per request (OTLP/HTTP JSON, URL/v1/traces)\n"
	       "fault injection (model requests only: completions, chat, infer, prefill, decode):\n"
	       "  --crash-after N     exit (status 3) once N model requests were answered\n"
	       "  --hang-after N      from model request N+1 on, answer nothing at all\n"
	       "  --fail-rate F       answer this fraction of model requests 500 (seeded)\n"
	       "  --fault-seed N      seed of --fail-rate (default 1)\n"
	       "  --latency-ms L      wait L ms before working on each model request\n"
	       "  --fail-decode-after-tokens K  close the connection after K generated tokens\n");
}

static int parse_listen(const char *s, wopts_t *o)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(o->host))
		return SC_EINVAL;
	char *end;
	errno = 0;
	long port = strtol(colon + 1, &end, 10);
	if (*end || errno || port < 0 || port > 65535 || colon[1] == '\0')
		return SC_EINVAL;
	snprintf(o->host, sizeof(o->host), "%.*s", (int)(colon - s), s);
	o->port = (int)port;
	return 0;
}

static int parse_long(const char *v, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (!*v || *end || errno || n < lo || n > hi)
		return SC_EINVAL;
	*out = n;
	return 0;
}

/* "30s", "500ms", "2m" or plain seconds -> milliseconds. */
static int parse_duration_ms(const char *v, uint64_t *ms)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (end == v || errno || !(d > 0) || d > 86400)
		return SC_EINVAL;
	double mult = strcmp(end, "ms") == 0             ? 1
	              : (strcmp(end, "s") == 0 || !*end) ? 1000
	              : strcmp(end, "m") == 0            ? 60000
	                                                 : -1;
	if (mult < 0)
		return SC_EINVAL;
	*ms = (uint64_t)ceil(d * mult);
	return 0;
}

/* Integer flags: name, bounds, where the value goes. */
typedef struct int_flag {
	const char *name;
	long lo, hi;
	size_t off;
	int is_int;
} int_flag_t;

#define L(n, lo, hi, f)                                                                            \
	{                                                                                          \
		n, lo, hi, offsetof(wopts_t, f), 0                                                 \
	}
#define I(n, lo, hi, f)                                                                            \
	{                                                                                          \
		n, lo, hi, offsetof(wopts_t, f), 1                                                 \
	}
static const int_flag_t int_flags[] = {
    L("--crash-after", 1, 1L << 40, crash_after),
    L("--hang-after", 0, 1L << 40, hang_after),
    L("--latency-ms", 0, 600000, latency_ms),
    L("--fail-decode-after-tokens", 1, 1 << 20, fail_decode_after),
    I("--max-tokens", 1, SC_MODEL_MAX_SEQ, max_tokens),
    I("--kv-max-handles", 1, 100000, kv_max),
    I("--dim", 2, SC_MODEL_MAX_DIM, gen.cfg.dim),
    I("--hidden-dim", 0, 4 * SC_MODEL_MAX_DIM, gen.cfg.hidden_dim),
    I("--layers", 1, SC_MODEL_MAX_LAYERS, gen.cfg.n_layers),
    I("--heads", 1, SC_MODEL_MAX_DIM, gen.cfg.n_heads),
    I("--kv-heads", 1, SC_MODEL_MAX_DIM, gen.cfg.n_kv_heads),
    I("--vocab", 259, SC_MODEL_MAX_VOCAB, gen.cfg.vocab_size),
    I("--seq-len", 2, SC_MODEL_MAX_SEQ, gen.cfg.seq_len),
};
#undef L
#undef I

static int int_flag(wopts_t *o, const char *a, const char *v)
{
	for (size_t i = 0; i < sizeof(int_flags) / sizeof(int_flags[0]); i++) {
		const int_flag_t *f = &int_flags[i];
		if (strcmp(a, f->name) != 0)
			continue;
		long n;
		if (!v || parse_long(v, f->lo, f->hi, &n) < 0) {
			fprintf(stderr,
			        "starcloud worker: %s: expected an integer from %ld to %ld\n", a,
			        f->lo, f->hi);
			return SC_EINVAL;
		}
		if (f->is_int)
			*(int *)((char *)o + f->off) = (int)n;
		else
			*(long *)((char *)o + f->off) = n;
		return 1;
	}
	return 0;
}

static void defaults(wopts_t *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->model, sizeof(o->model), "tiny");
	snprintf(o->version, sizeof(o->version), "1");
	parse_listen("127.0.0.1:9000", o);
	o->role = ROLE_BOTH;
	o->max_tokens = 256;
	o->kv_max = 64;
	o->kv_lease_ms = 30000;
	o->fault_seed = 1;
	o->gen.cfg = (sc_model_config_t){64, 0, 2, 4, 2, 512, 256, 0};
	o->gen.seed = 1;
}

static int bad(const char *flag, const char *what)
{
	fprintf(stderr, "starcloud worker: %s: %s\n", flag, what);
	return SC_EINVAL;
}

/* String-valued flags; returns 1 when a was one, <0 on a bad value. */
static int str_flag(wopts_t *o, const char *a, const char *v)
{
	if (!strcmp(a, "--checkpoint"))
		o->checkpoint = v;
	else if (!strcmp(a, "--tokenizer"))
		o->tokenizer = v;
	else if (!strcmp(a, "--gen-checkpoint"))
		o->gen_out = v;
	else if (!strcmp(a, "--id"))
		o->id = v;
	else if (!strcmp(a, "--otlp"))
		o->otlp = v;
	else if (!strcmp(a, "--advertise"))
		o->advertise = v;
	else if (!strcmp(a, "--model") || !strcmp(a, "--version")) {
		char *dst = a[2] == 'm' ? o->model : o->version;
		size_t cap = a[2] == 'm' ? sizeof(o->model) : sizeof(o->version);
		if (!v || !*v || strlen(v) >= cap ||
		    strspn(v, "abcdefghijklmnopqrstuvwxyz"
		              "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		              "0123456789._-") != strlen(v))
			return bad(a, "expected a short name of letters, digits, '.', '_', '-'");
		snprintf(dst, cap, "%s", v);
	} else if (!strcmp(a, "--listen")) {
		if (!v || parse_listen(v, o) < 0)
			return bad(a, "expected HOST:PORT");
	} else if (!strcmp(a, "--role")) {
		o->role = !v                      ? 0
		          : !strcmp(v, "both")    ? ROLE_BOTH
		          : !strcmp(v, "prefill") ? ROLE_PREFILL
		          : !strcmp(v, "decode")  ? ROLE_DECODE
		                                  : 0;
		if (!o->role)
			return bad(a, "expected prefill, decode or both");
	} else if (!strcmp(a, "--kv-lease")) {
		if (!v || parse_duration_ms(v, &o->kv_lease_ms) < 0)
			return bad(a, "expected a duration such as 30s or 500ms");
	} else if (!strcmp(a, "--fail-rate")) {
		char *end;
		o->fail_rate = v ? strtod(v, &end) : -1;
		if (!v || *end || !(o->fail_rate >= 0 && o->fail_rate <= 1))
			return bad(a, "expected a fraction from 0 to 1");
	} else if (!strcmp(a, "--seed") || !strcmp(a, "--fault-seed")) {
		char *end;
		errno = 0;
		unsigned long long n = v ? strtoull(v, &end, 10) : 0;
		if (!v || !*v || *end || errno)
			return bad(a, "expected a non-negative integer");
		*(a[2] == 's' ? &o->gen.seed : &o->fault_seed) = n;
	} else if (!strcmp(a, "--shared")) {
		o->gen.cfg.shared_classifier = 1;
		return 2; /* takes no value */
	} else
		return 0;
	if (!v)
		return bad(a, "needs a value");
	return 1;
}

static int parse_opts(int argc, char **argv, wopts_t *o)
{
	defaults(o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc = str_flag(o, a, v);
		if (rc == 0)
			rc = int_flag(o, a, v);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			fprintf(stderr, "starcloud worker: unknown option \"%s\" (see --help)\n",
			        a);
			return SC_EINVAL;
		}
		if (rc == 1)
			i++;
	}
	return 0;
}

static int gen_checkpoint(const wopts_t *o)
{
	void *buf;
	size_t len;
	if (sc_model_gen(&o->gen, &buf, &len) < 0) {
		fprintf(stderr,
		        "starcloud worker: --gen-checkpoint: invalid shape (dim must divide "
		        "by heads, heads by kv-heads, dim/heads must be even)\n");
		return SC_EXIT_USAGE;
	}
	FILE *f = fopen(o->gen_out, "wb");
	int ok = f && fwrite(buf, 1, len, f) == len;
	if (f && fclose(f) != 0)
		ok = 0;
	free(buf);
	if (!ok) {
		fprintf(stderr, "starcloud worker: cannot write %s\n", o->gen_out);
		return SC_EXIT_FAIL;
	}
	printf("wrote %s (%zu bytes)\n", o->gen_out, len);
	return SC_EXIT_OK;
}

static int load_model(sc_worker_t *w, const wopts_t *o)
{
	char err[256];
	int rc;
	if (o->checkpoint) {
		rc = sc_model_load_file(o->checkpoint, &w->model, err, sizeof(err));
	} else {
		void *buf;
		size_t len;
		if ((rc = sc_model_gen(&o->gen, &buf, &len)) == 0) {
			rc = sc_model_load_mem(buf, len, &w->model, err, sizeof(err));
			free(buf);
		}
	}
	if (rc < 0) {
		fprintf(stderr, "starcloud worker: %s\n",
		        rc == SC_EINVAL ? "bad model shape" : err);
		return rc;
	}
	int vocab = w->model->cfg.vocab_size;
	rc = o->tokenizer ? sc_tokenizer_load_file(o->tokenizer, vocab, &w->tok, err, sizeof(err))
	                  : sc_tokenizer_bytes(vocab, &w->tok);
	if (rc < 0) {
		fprintf(stderr, "starcloud worker: %s\n",
		        o->tokenizer ? err
		                     : "the byte-level tokenizer needs a vocabulary of at "
		                       "least 259 (give --tokenizer)");
		return rc;
	}
	return 0;
}

static uv_signal_t sigint_h, sigterm_h;
static uv_timer_t watchdog_h;

static void on_signal(uv_signal_t *h, int signum)
{
	fprintf(stderr, "worker: signal %d, shutting down\n", signum);
	sc_sd_notify("STOPPING=1");
	uv_stop(h->loop);
}

static int setup(sc_worker_t *w, const wopts_t *o)
{
	w->loop = uv_default_loop();
	snprintf(w->model_name, sizeof(w->model_name), "%s", o->model);
	snprintf(w->version, sizeof(w->version), "%s", o->version);
	/* kv_url must name an address a decode worker can reach. */
	const char *adv = o->advertise                      ? o->advertise
	                  : strcmp(o->host, "0.0.0.0") == 0 ? "127.0.0.1"
	                                                    : o->host;
	snprintf(w->host, sizeof(w->host), "%s", adv);
	snprintf(w->otlp_url, sizeof(w->otlp_url), "%s%s", o->otlp ? o->otlp : "",
	         o->otlp && !strstr(o->otlp, "/v1/traces") ? "/v1/traces" : "");
	w->role = o->role;
	w->max_tokens_cap =
	    o->max_tokens < w->model->cfg.seq_len ? o->max_tokens : w->model->cfg.seq_len;
	w->crash_after = o->crash_after;
	w->hang_after = o->hang_after;
	w->latency_ms = o->latency_ms;
	w->fail_decode_after = o->fail_decode_after;
	w->fail_rate = o->fail_rate;
	w->fault_rng = o->fault_seed * 0x9e3779b97f4a7c15ull + 1;
	w->kv = sc_kvstore_new((size_t)o->kv_max, o->kv_lease_ms, uv_hrtime());
	sc_http_limits_t lim = {.max_body_bytes = SC_WORKER_MAX_BODY, .idle_timeout_ms = 60000};
	w->http = sc_http_server_new(w->loop, &lim);
	w->httpc = sc_httpc_new(w->loop);
	if (!w->kv || !w->http || !w->httpc)
		return SC_ENOMEM;
	sc_httpc_set_user_agent(w->httpc, SC_USER_AGENT("worker"));
	sc__worker_serve_init(w);
	if (sc_http_listen(w->http, o->host, o->port) < 0) {
		fprintf(stderr, "starcloud worker: cannot listen on %s:%d\n", o->host, o->port);
		return SC_EIO;
	}
	w->port = sc_http_port(w->http);
	snprintf(w->id, sizeof(w->id), "%s", o->id ? o->id : "");
	if (!o->id)
		snprintf(w->id, sizeof(w->id), "%s:%d", o->host, w->port);
	uv_signal_init(w->loop, &sigint_h);
	uv_signal_init(w->loop, &sigterm_h);
	uv_signal_start(&sigint_h, on_signal, SIGINT);
	uv_signal_start(&sigterm_h, on_signal, SIGTERM);
	return 0;
}

int sc_worker_main(int argc, char **argv)
{
	if (sc__cli_wants_help(argc, argv)) {
		usage(stdout);
		return SC_EXIT_OK;
	}
	wopts_t o;
	if (parse_opts(argc, argv, &o) < 0)
		return SC_EXIT_USAGE;
	if (o.gen_out)
		return gen_checkpoint(&o);
	static sc_worker_t w;
	if (load_model(&w, &o) < 0)
		return SC_EXIT_USAGE;
	int rc = setup(&w, &o);
	if (rc < 0)
		return SC_EXIT_FAIL;
	const sc_model_config_t *c = &w.model->cfg;
	fprintf(stderr,
	        "worker %s: serving %s:%s (dim %d, layers %d, heads %d/%d, vocab %d, seq_len %d) "
	        "role %s on http://%s:%d\n",
	        w.id, w.model_name, w.version, c->dim, c->n_layers, c->n_heads, c->n_kv_heads,
	        c->vocab_size, c->seq_len,
	        w.role == ROLE_BOTH      ? "both"
	        : w.role == ROLE_PREFILL ? "prefill"
	                                 : "decode",
	        w.host, w.port);
	printf("listening on http://%s:%d\n", w.host, w.port);
	fflush(stdout);
	/* Ready for systemd once the model is loaded and the port listens. */
	sc_sd_watchdog_start(w.loop, &watchdog_h);
	sc_sd_notifyf("READY=1\nSTATUS=serving %s:%s on http://%s:%d", w.model_name, w.version,
		      w.host, w.port);
	uv_run(w.loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&watchdog_h, NULL);
	sc_http_server_close(w.http);
	sc_httpc_free(w.httpc);
	uv_run(w.loop, UV_RUN_NOWAIT);
	sc_kvstore_free(w.kv);
	sc_tokenizer_free(w.tok);
	sc_model_free(w.model);
	return SC_EXIT_OK;
}
