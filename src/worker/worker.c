/* `starcloud worker`: flags, model loading, --gen-checkpoint, and the
 * daemon's loop. See docs/WORKER.md for the API and the flags. */
#include "worker/worker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/sdnotify.h"
#include "base/flagfile.h"
#include "base/cmdline.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/version.h"
#include "base/alloc.h"
#include "starcloud/error.h"
#include "net/tlsflags.h"
#include "net/tlsreload.h"
#include "worker/worker_int.h"

typedef struct wopts {
	const char *checkpoint, *tokenizer, *gen_out, *id, *otlp, *advertise;
	char model[128], version[32];
	sc_hostport_t listen;
	int role_choice; /* index in "prefill|decode|both" */
	int max_tokens, kv_max, max_batch, max_batch_tokens, max_queue;
	uint64_t kv_lease_ms, fault_seed;
	int64_t crash_after, hang_after, latency_ms, fail_decode_after;
	double fail_rate;
	sc_model_gen_t gen;
	const char *config; /* --config */
	int check_config;   /* --check-config */
	const char *repository;
	int control_mode; /* index in "none|explicit" */
	const char *load[64];
	size_t nload;
	sc_tls_serve_flags_t tls;
	const char *ca; /* CA of https:// peers (KV pulls, OTLP) */
} wopts_t;

/* Served names go into URLs, metrics labels and JSON: letters, digits,
 * '.', '_', '-'. */
static int name_into(char *dst, size_t cap, const char *v, char *err, size_t errsz)
{
	if (!*v || strlen(v) >= cap ||
	    strspn(v, "abcdefghijklmnopqrstuvwxyz"
	              "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	              "0123456789._-") != strlen(v)) {
		snprintf(err, errsz, "expected a short name of letters, digits, '.', '_', '-'");
		return SC_EINVAL;
	}
	snprintf(dst, cap, "%s", v);
	return 0;
}

static int model_flag(void *opts, const char *v, char *err, size_t errsz)
{
	wopts_t *o = opts;
	return name_into(o->model, sizeof(o->model), v, err, errsz);
}

static int load_flag(void *opts, const char *v, char *err, size_t errsz)
{
	wopts_t *o = opts;
	if (o->nload == sizeof(o->load) / sizeof(o->load[0])) {
		snprintf(err, errsz, "at most 64");
		return SC_ELIMIT;
	}
	char tmp[128];
	if (name_into(tmp, sizeof(tmp), v, err, errsz) < 0)
		return SC_EINVAL;
	o->load[o->nload++] = v;
	return 0;
}

static int version_flag(void *opts, const char *v, char *err, size_t errsz)
{
	wopts_t *o = opts;
	return name_into(o->version, sizeof(o->version), v, err, errsz);
}

static const sc_flag_t worker_flags[] = {
    {.name = "--checkpoint",
     SC_FLAG_AT(STR, wopts_t, checkpoint),
     .meta = "FILE",
     .help = "model weights (default: a built-in tiny model, seed 1)"},
    {.name = "--tokenizer",
     SC_FLAG_AT(STR, wopts_t, tokenizer),
     .meta = "FILE",
     .help = "llama2.c tokenizer.bin (default: byte-level tokenizer)"},
    {.name = "--model",
     .kind = SC_FLAG_FUNC,
     .fn = model_flag,
     .meta = "NAME",
     .def = "tiny",
     .help = "served model name"},
    {.name = "--version",
     .kind = SC_FLAG_FUNC,
     .fn = version_flag,
     .meta = "V",
     .def = "1",
     .help = "served version"},
    {.name = "--model-repository",
     SC_FLAG_AT(STR, wopts_t, repository),
     .meta = "DIR",
     .help = "serve the models of a Triton model repository (DIR/<model>/config.pbtxt,\n"
             "DIR/<model>/<version>/model.bin) instead of one checkpoint"},
    {.name = "--model-control-mode",
     SC_FLAG_AT(CHOICE, wopts_t, control_mode),
     .choices = "none|explicit",
     .def = "none",
     .help = "none: load every model of the repository at start; explicit: only\n"
             "--load-model ones (the repository API loads and unloads in both)"},
    {.name = "--load-model",
     .kind = SC_FLAG_FUNC,
     .fn = load_flag,
     .meta = "NAME",
     .flags = SC_FLAG_REPEAT,
     .help = "a model to load at start in explicit mode"},
    {.name = "--listen",
     SC_FLAG_AT(ADDR, wopts_t, listen),
     .def = "127.0.0.1:9000",
     .help = "address (port 0 = any free port)"},
    SC_TLS_SERVE_FLAGS(wopts_t, tls),
    {.name = "--ca",
     SC_FLAG_AT(STR, wopts_t, ca),
     .meta = "FILE",
     .env = "STARCLOUD_CA",
     .help = "CA certificate of https:// peers: prefill workers' kv_url\n"
             "and the --otlp collector (default: the system's CAs; reloaded\n"
             "on SIGHUP and when the file changes)"},
    {.name = "--id",
     SC_FLAG_AT(STR, wopts_t, id),
     .meta = "ID",
     .help = "x-starcloud-replica value (default HOST:PORT)"},
    {.name = "--advertise",
     SC_FLAG_AT(STR, wopts_t, advertise),
     .meta = "HOST",
     .help = "host named in kv_url (default: the listen host; 127.0.0.1\nwhen listening on "
             "0.0.0.0)"},
    {.name = "--role",
     SC_FLAG_AT(CHOICE, wopts_t, role_choice),
     .meta = "R",
     .choices = "prefill|decode|both",
     .def = "both",
     .help = "prefill | decode | both"},
    {.name = "--max-tokens",
     SC_FLAG_AT(INT, wopts_t, max_tokens),
     .min = 1,
     .max = SC_MODEL_MAX_SEQ,
     .def = "256",
     .help = "largest max_tokens accepted (at most seq_len)"},
    {.name = "--max-batch",
     SC_FLAG_AT(INT, wopts_t, max_batch),
     .min = 1,
     .max = 1024,
     .def = "32",
     .help = "sequences that share a forward step (continuous batching)"},
    {.name = "--max-batch-tokens",
     SC_FLAG_AT(INT, wopts_t, max_batch_tokens),
     .min = 1,
     .max = 65536,
     .def = "256",
     .help = "token positions per forward step, prompt chunks included\n(at least "
             "--max-batch)"},
    {.name = "--max-queue",
     SC_FLAG_AT(INT, wopts_t, max_queue),
     .min = 1,
     .max = 1 << 20,
     .def = "1024",
     .help = "sequences waiting for room before requests get 429"},
    {.name = "--kv-lease",
     SC_FLAG_AT(DURATION, wopts_t, kv_lease_ms),
     .min = 1,
     .max = 86400e3,
     .def = "30s",
     .help = "KV handle lease, e.g. 30s, 500ms"},
    {.name = "--kv-max-handles",
     SC_FLAG_AT(INT, wopts_t, kv_max),
     .min = 1,
     .max = 100000,
     .def = "64",
     .help = "live KV handles at most"},
    {.name = "--otlp",
     SC_FLAG_AT(STR, wopts_t, otlp),
     .meta = "URL",
     .help = "export a span per request (OTLP/HTTP JSON, URL/v1/traces)"},
    {.kind = SC_FLAG_SECTION,
     .help = "fault injection (model requests only: completions, chat, infer, prefill, decode):"},
    {.name = "--crash-after",
     SC_FLAG_AT(I64, wopts_t, crash_after),
     .min = 1,
     .max = 0x1p40,
     .help = "exit (status 3) once N model requests were answered"},
    {.name = "--hang-after",
     SC_FLAG_AT(I64, wopts_t, hang_after),
     .min = 0,
     .max = 0x1p40,
     .help = "from model request N+1 on, answer nothing at all"},
    {.name = "--fail-rate",
     SC_FLAG_AT(NUM, wopts_t, fail_rate),
     .min = 0,
     .max = 1,
     .help = "answer this fraction of model requests 500 (seeded)"},
    {.name = "--fault-seed",
     SC_FLAG_AT(U64, wopts_t, fault_seed),
     .def = "1",
     .help = "seed of --fail-rate"},
    {.name = "--latency-ms",
     SC_FLAG_AT(I64, wopts_t, latency_ms),
     .meta = "L",
     .min = 0,
     .max = 600000,
     .help = "wait L ms before working on each model request"},
    {.name = "--fail-decode-after-tokens",
     SC_FLAG_AT(I64, wopts_t, fail_decode_after),
     .meta = "K",
     .min = 1,
     .max = 1 << 20,
     .help = "close the connection after K generated tokens"},
    {.kind = SC_FLAG_SECTION, .help = "a generated checkpoint (--gen-checkpoint FILE, then exit):"},
    {.name = "--gen-checkpoint",
     SC_FLAG_AT(STR, wopts_t, gen_out),
     .meta = "FILE",
     .help = "write a checkpoint of this shape and exit"},
    {.name = "--dim",
     SC_FLAG_AT(INT, wopts_t, gen.cfg.dim),
     .min = 2,
     .max = SC_MODEL_MAX_DIM,
     .def = "64",
     .help = "model width"},
    {.name = "--hidden-dim",
     SC_FLAG_AT(INT, wopts_t, gen.cfg.hidden_dim),
     .min = 0,
     .max = 4 * SC_MODEL_MAX_DIM,
     .def = "0",
     .help = "feed-forward width (0: 8/3 x dim)"},
    {.name = "--layers",
     SC_FLAG_AT(INT, wopts_t, gen.cfg.n_layers),
     .min = 1,
     .max = SC_MODEL_MAX_LAYERS,
     .def = "2",
     .help = "layers"},
    {.name = "--heads",
     SC_FLAG_AT(INT, wopts_t, gen.cfg.n_heads),
     .min = 1,
     .max = SC_MODEL_MAX_DIM,
     .def = "4",
     .help = "attention heads"},
    {.name = "--kv-heads",
     SC_FLAG_AT(INT, wopts_t, gen.cfg.n_kv_heads),
     .min = 1,
     .max = SC_MODEL_MAX_DIM,
     .def = "2",
     .help = "key/value heads"},
    {.name = "--vocab",
     SC_FLAG_AT(INT, wopts_t, gen.cfg.vocab_size),
     .min = 259,
     .max = SC_MODEL_MAX_VOCAB,
     .def = "512",
     .help = "vocabulary size"},
    {.name = "--seq-len",
     SC_FLAG_AT(INT, wopts_t, gen.cfg.seq_len),
     .min = 2,
     .max = SC_MODEL_MAX_SEQ,
     .def = "256",
     .help = "longest sequence"},
    {.name = "--seed", SC_FLAG_AT(U64, wopts_t, gen.seed), .def = "1", .help = "weights' seed"},
    {.name = "--shared",
     SC_FLAG_AT(BOOL, wopts_t, gen.cfg.shared_classifier),
     .help = "the classifier shares the embedding's weights"},
    SC_FLAGS_CONFIG(wopts_t),
};

static const sc_command_t worker_cmd = {
    .name = "worker",
    .args = "[--checkpoint FILE] [options]",
    .about = "Serves a llama2.c checkpoint over OpenAI and KServe v2 (docs/WORKER.md).",
    .flags = worker_flags,
    .nflags = sizeof(worker_flags) / sizeof(worker_flags[0]),
};

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
	sc_wmodel_t *m;
	if (o->repository) {
		char rerr[600];
		int rc = sc__repo_open(w, o->repository, o->control_mode == 1, o->load, o->nload,
		                       rerr, sizeof(rerr));
		if (rc < 0)
			fprintf(stderr, "starcloud worker: %s\n", rerr);
		return rc;
	}
	int rc = sc__wmodel_load(w, o->model, o->version, o->checkpoint, o->tokenizer, &o->gen, 0,
	                         &m, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "starcloud worker: %s\n", err);
		return rc;
	}
	m->served = 1;
	w->models = m;
	return 0;
}

static uv_signal_t sigint_h, sigterm_h;
static uv_timer_t watchdog_h;

static void on_signal(uv_signal_t *h, int signum)
{
	sc_log_info("signal %d, shutting down", signum);
	sc_sd_notify("STOPPING=1");
	uv_stop(h->loop);
}

static int setup(sc_worker_t *w, const wopts_t *o)
{
	/* kv_url must name an address a decode worker can reach. */
	const char *adv = o->advertise                             ? o->advertise
	                  : strcmp(o->listen.host, "0.0.0.0") == 0 ? "127.0.0.1"
	                                                           : o->listen.host;
	snprintf(w->host, sizeof(w->host), "%s", adv);
	snprintf(w->otlp_url, sizeof(w->otlp_url), "%s%s", o->otlp ? o->otlp : "",
	         o->otlp && !strstr(o->otlp, "/v1/traces") ? "/v1/traces" : "");
	w->role = o->role_choice + 1; /* ROLE_PREFILL, ROLE_DECODE, ROLE_BOTH */
	w->crash_after = o->crash_after;
	w->hang_after = o->hang_after;
	w->latency_ms = o->latency_ms;
	w->fail_decode_after = o->fail_decode_after;
	w->fail_rate = o->fail_rate;
	w->fault_rng = o->fault_seed * 0x9e3779b97f4a7c15ull + 1;
	w->kv = sc_kvstore_new((size_t)o->kv_max, o->kv_lease_ms, uv_hrtime());
	sc_http_limits_t lim = {.max_body_bytes = SC_WORKER_MAX_BODY, .idle_timeout_ms = 60000};
	w->http = sc_http_server_new(w->loop, &lim);
	sc_hcli_opts_t hco = {.user_agent = SC_USER_AGENT("worker")};
	w->hcli = sc_hcli_new(w->loop, &hco);
	if (!w->kv || !w->http || !w->hcli)
		return SC_ENOMEM;
	/* KV pulls from https:// prefill workers and the OTLP export verify
	 * their peer against --ca (the name or IP in the URL too). */
	if (o->ca && access(o->ca, R_OK) != 0) {
		fprintf(stderr, "starcloud worker: --ca: cannot read %s: %s\n", o->ca,
		        strerror(errno));
		return SC_EINVAL;
	}
	char terr[512];
	if (sc_tls_client_ctx(o->ca, NULL, NULL, &w->tls_client, terr, sizeof(terr)) < 0) {
		fprintf(stderr, "starcloud worker: %s\n", terr);
		return SC_EINVAL;
	}
	sc_hcli_set_tls(w->hcli, w->tls_client);
	sc__worker_serve_init(w);
	if (sc_tls_serve_setup("worker", &o->tls, o->listen.host, w->http, &w->tls) < 0)
		return SC_EINVAL;
	if (sc_http_listen(w->http, o->listen.host, o->listen.port) < 0) {
		sc_log_error("cannot listen on %s:%d: %s", o->listen.host, o->listen.port,
		             sc_http_listen_error(w->http));
		return SC_EIO;
	}
	sc_tls_reload_watch(w->loop, "listener", w->tls);
	sc_tls_reload_watch(w->loop, "client", w->tls_client);
	w->port = sc_http_port(w->http);
	snprintf(w->id, sizeof(w->id), "%s", o->id ? o->id : "");
	if (!o->id)
		snprintf(w->id, sizeof(w->id), "%s:%d", o->listen.host, w->port);
	uv_signal_init(w->loop, &sigint_h);
	uv_signal_init(w->loop, &sigterm_h);
	uv_signal_start(&sigint_h, on_signal, SIGINT);
	uv_signal_start(&sigterm_h, on_signal, SIGTERM);
	return 0;
}

/* Flags that parse alone but not together; 1 after a message. */
static int flags_conflict(const wopts_t *o)
{
	if (o->repository && (o->checkpoint || o->tokenizer)) {
		fprintf(stderr, "starcloud worker: --model-repository: the repository holds the "
		                "checkpoints; leave out --checkpoint and --tokenizer\n");
		return 1;
	}
	if (o->nload && (!o->repository || o->control_mode != 1)) {
		fprintf(stderr, "starcloud worker: --load-model: only with --model-repository and "
		                "--model-control-mode explicit\n");
		return 1;
	}
	if (o->max_batch_tokens < o->max_batch) {
		fprintf(stderr,
		        "starcloud worker: --max-batch-tokens (%d) must be at least --max-batch "
		        "(%d): every running sequence needs a place in a step\n",
		        o->max_batch_tokens, o->max_batch);
		return 1;
	}
	return 0;
}

/* Says what is served (log, stdout for scripts and tests, systemd), once
 * the models are loaded and the port listens. */
static void announce(sc_worker_t *w)
{
	char who[sizeof(w->id) + 8];
	snprintf(who, sizeof(who), "worker %s", w->id);
	sc_log_open(who);
	int nmodels = 0;
	for (sc_wmodel_t *m = w->models; m; m = m->next, nmodels++) {
		const sc_model_config_t *c = &m->model->cfg;
		sc_log_info("serving %s:%s (dim %d, layers %d, heads %d/%d, vocab %d, seq_len %d) "
		            "role %s, batches of %d sequences / %d tokens, on http://%s:%d",
		            m->name, m->version, c->dim, c->n_layers, c->n_heads, c->n_kv_heads,
		            c->vocab_size, c->seq_len,
		            w->role == ROLE_BOTH      ? "both"
		            : w->role == ROLE_PREFILL ? "prefill"
		                                      : "decode",
		            w->max_batch, w->max_batch_tokens, w->host, w->port);
	}
	if (w->repo_dir[0])
		sc_log_info("model repository %s: %d versions loaded", w->repo_dir, nmodels);
	printf("listening on http://%s:%d\n", w->host, w->port);
	fflush(stdout);
	sc_sd_watchdog_start(w->loop, &watchdog_h);
	if (w->repo_dir[0])
		sc_sd_notifyf("READY=1\nSTATUS=serving model repository %s (%d versions) on "
		              "http://%s:%d",
		              w->repo_dir, nmodels, w->host, w->port);
	else
		sc_sd_notifyf("READY=1\nSTATUS=serving %s:%s on http://%s:%d", w->models->name,
		              w->models->version, w->host, w->port);
}

/* After the loop ends (SIGTERM, SIGINT): handles closed, then what they
 * used freed. */
static void shut_down(sc_worker_t *w)
{
	uv_close((uv_handle_t *)&watchdog_h, NULL);
	sc_http_server_close(w->http);
	sc_hcli_close(w->hcli);
	sc_tls_reload_stop();
	/* The KV sweep must not run again: the store is freed below while
	 * the loop still turns to close handles. */
	uv_timer_stop(&w->sweep_timer);
	uv_run(w->loop, UV_RUN_NOWAIT);
	sc_tls_ctx_free(w->tls_client);
	sc_kvstore_free(w->kv);
	uv_close((uv_handle_t *)&w->step_idle, NULL);
	uv_run(w->loop, UV_RUN_NOWAIT);
	while (w->models) {
		sc_wmodel_t *m = w->models;
		w->models = m->next;
		sc__wmodel_unref(m);
	}
}

int sc_worker_main(int argc, char **argv)
{
	wopts_t o;
	memset(&o, 0, sizeof(o));
	sc_log_open("worker");
	int rc = sc_flags_parse(&worker_cmd, &o, argc, argv, NULL);
	if (rc != 0)
		return rc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (o.gen_out)
		return gen_checkpoint(&o);
	if (flags_conflict(&o))
		return SC_EXIT_USAGE;
	static sc_worker_t w;
	w.loop = uv_default_loop();
	w.max_tokens = o.max_tokens;
	w.max_batch = o.max_batch;
	w.max_batch_tokens = o.max_batch_tokens;
	w.max_queue = o.max_queue;
	uv_idle_init(w.loop, &w.step_idle);
	w.step_idle.data = &w;
	if (load_model(&w, &o) < 0)
		return SC_EXIT_USAGE;
	if (o.check_config) /* the model loads: what a start checks */
		return sc_flags_config_ok(&worker_cmd, o.config);
	if ((rc = setup(&w, &o)) < 0)
		return SC_EXIT_FAIL;
	announce(&w);
	uv_run(w.loop, UV_RUN_DEFAULT);
	shut_down(&w);
	return SC_EXIT_OK;
}
