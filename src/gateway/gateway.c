/* `starcloud gateway`: options, configuration, start-up and shutdown.
 *
 * Backends come from --backend flags, a --config file (JSON or YAML) and,
 * with --server, from the control plane; all three may be combined. The
 * configuration is read and checked completely before anything listens, so
 * a bad flag or file changes nothing and exits 2 naming the field. */
#include "gateway/gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cmdline.h"
#include "base/flags.h"
#include "base/secret.h"
#include "net/tlsflags.h"
#include "net/tlsreload.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/alloc.h"
#include "base/flagfile.h"
#include "gateway/gw_int.h"
#include "gateway/proxy.h"
#include "net/sdnotify.h"
#include "starcloud/error.h"

/* Parses "10,50,100" (or '/' separated) percent steps ending at 100. */
static int sc__gw_parse_steps(const char *s, int *steps, size_t *n)
{
	char step[16];
	*n = 0;
	while (*s) {
		size_t len = strcspn(s, ",/");
		int v;
		if (len >= sizeof(step) || *n == GW_MAX_STEPS)
			return SC_EINVAL;
		memcpy(step, s, len);
		step[len] = '\0';
		if (sc_parse_int(step, 1, 100, &v) < 0 || (*n && v <= steps[*n - 1]))
			return SC_EINVAL;
		steps[(*n)++] = v;
		s += len;
		if (*s && !*++s)
			return SC_EINVAL; /* a trailing separator */
	}
	return *n && steps[*n - 1] == 100 ? 0 : SC_EINVAL;
}

/* ---------------------------------------------------------------------
 * Backend and rollout descriptions
 * ------------------------------------------------------------------- */

static int set_field(char *dst, size_t dsz, const char *v, size_t vl)
{
	if (vl == 0 || vl >= dsz)
		return SC_EINVAL;
	memcpy(dst, v, vl);
	dst[vl] = '\0';
	return 0;
}

static int backend_check(gw_backend_t *b, char *err, size_t errsz)
{
	char host[64];
	int port;
	const char *path;
	if (b->repository && (b->model[0] || b->version[0] || b->kind != GW_BK_STARCLOUD ||
	                      b->role != GW_ROLE_BOTH)) {
		snprintf(err, errsz,
		         "repository: a replica whose model repository says what it "
		         "serves takes url (and weight) only");
		return SC_EINVAL;
	}
	if ((!b->repository && (!b->model[0] || !b->version[0])) || !b->url[0]) {
		snprintf(err, errsz, "model, version and url are required");
		return SC_EINVAL;
	}
	if (sc_hcli_parse_url(b->url, host, sizeof(host), &port, &path) < 0 ||
	    strcmp(path, "/") != 0) {
		snprintf(err, errsz, "url: expected http://HOST:PORT, got \"%s\"", b->url);
		return SC_EINVAL;
	}
	size_t ul = strlen(b->url);
	if (b->url[ul - 1] == '/')
		b->url[ul - 1] = '\0';
	if (strchr(b->model, ':')) {
		snprintf(err, errsz, "model: a name may not contain ':'");
		return SC_EINVAL;
	}
	if (b->kind == GW_BK_OPENAI && b->role != GW_ROLE_BOTH) {
		snprintf(err, errsz, "role: an OpenAI backend serves whole requests (role both)");
		return SC_EINVAL;
	}
	if (b->kind != GW_BK_OPENAI && b->upstream_model[0]) {
		snprintf(err, errsz, "upstream-model: only for kind=openai backends");
		return SC_EINVAL;
	}
	if (!b->health[0])
		snprintf(b->health, sizeof(b->health), "%s",
		         b->kind == GW_BK_OPENAI ? "/health" : "/v2/health/ready");
	else if (b->health[0] != '/' || strpbrk(b->health, " \r\n?#")) {
		snprintf(err, errsz, "health: expected a path such as /health");
		return SC_EINVAL;
	}
	return 0;
}

static int kind_parse(const char *v, size_t vl)
{
	if (vl == 9 && strncmp(v, "starcloud", 9) == 0)
		return GW_BK_STARCLOUD;
	if (vl == 6 && strncmp(v, "openai", 6) == 0)
		return GW_BK_OPENAI;
	return -1;
}

static int role_parse(const char *v, size_t vl)
{
	if (vl == 4 && strncmp(v, "both", 4) == 0)
		return GW_ROLE_BOTH;
	if (vl == 7 && strncmp(v, "prefill", 7) == 0)
		return GW_ROLE_PREFILL;
	if (vl == 6 && strncmp(v, "decode", 6) == 0)
		return GW_ROLE_DECODE;
	return -1;
}

/* Parses "model=M,version=V,url=U[,role=R][,weight=W][,kind=K]
 * [,upstream-model=NAME][,health=PATH]" into a backend description; errors
 * name the field. */
static int sc__gw_parse_backend(const char *spec, gw_backend_t *b, char *err, size_t errsz)
{
	memset(b, 0, sizeof(*b));
	b->weight = 1;
	b->ready = 1;
	const char *p = spec;
	while (*p) {
		size_t fl = strcspn(p, ",");
		const char *eq = memchr(p, '=', fl);
		if (!eq) {
			snprintf(err, errsz, "expected key=value, got \"%.*s\"", (int)fl, p);
			return SC_EINVAL;
		}
		size_t kl = (size_t)(eq - p);
		const char *v = eq + 1;
		size_t vl = fl - kl - 1;
		int rc = 0;
		if (kl == 5 && strncmp(p, "model", 5) == 0)
			rc = set_field(b->model, sizeof(b->model), v, vl);
		else if (kl == 7 && strncmp(p, "version", 7) == 0)
			rc = set_field(b->version, sizeof(b->version), v, vl);
		else if (kl == 3 && strncmp(p, "url", 3) == 0)
			rc = set_field(b->url, sizeof(b->url), v, vl);
		else if (kl == 4 && strncmp(p, "role", 4) == 0)
			rc = (b->role = role_parse(v, vl)) < 0 ? SC_EINVAL : 0;
		else if (kl == 4 && strncmp(p, "kind", 4) == 0)
			rc = (b->kind = kind_parse(v, vl)) < 0 ? SC_EINVAL : 0;
		else if (kl == 14 && strncmp(p, "upstream-model", 14) == 0)
			rc = set_field(b->upstream_model, sizeof(b->upstream_model), v, vl);
		else if (kl == 6 && strncmp(p, "health", 6) == 0)
			rc = set_field(b->health, sizeof(b->health), v, vl);
		else if (kl == 10 && strncmp(p, "repository", 10) == 0)
			rc = vl == 4 && strncmp(v, "true", 4) == 0    ? (b->repository = 1, 0)
			     : vl == 5 && strncmp(v, "false", 5) == 0 ? 0
			                                              : SC_EINVAL;
		else if (kl == 6 && strncmp(p, "weight", 6) == 0) {
			char w[32];
			rc = vl < sizeof(w) ? 0 : SC_EINVAL;
			if (rc == 0) {
				memcpy(w, v, vl);
				w[vl] = '\0';
				rc = sc_parse_num(w, 0, 1000, &b->weight);
			}
			if (rc == 0 && b->weight == 0)
				rc = SC_EINVAL;
		} else {
			snprintf(err, errsz, "unknown field \"%.*s\"", (int)kl, p);
			return SC_EINVAL;
		}
		if (rc < 0) {
			snprintf(err, errsz, "%.*s: bad value \"%.*s\"", (int)kl, p, (int)vl, v);
			return rc;
		}
		p += fl + (p[fl] == ',');
	}
	return backend_check(b, err, errsz);
}

typedef struct rollout_desc {
	char model[GW_MAX_NAME], stable[GW_MAX_VERSION], canary[GW_MAX_VERSION];
	char deployment[GW_MAX_NAME];
	int steps[GW_MAX_STEPS];
	size_t nsteps;
	uint64_t window_ms;
	double max_error_rate;
	uint64_t min_requests;
	double confidence;
} rollout_desc_t;

static int parse_rollout_field(rollout_desc_t *d, const char *k, size_t kl, const char *v,
                               size_t vl)
{
	char val[256];
	if (vl >= sizeof(val))
		return SC_EINVAL;
	memcpy(val, v, vl);
	val[vl] = '\0';
	if (kl == 5 && strncmp(k, "model", 5) == 0)
		return set_field(d->model, sizeof(d->model), v, vl);
	if (kl == 6 && strncmp(k, "stable", 6) == 0)
		return set_field(d->stable, sizeof(d->stable), v, vl);
	if (kl == 6 && strncmp(k, "canary", 6) == 0)
		return set_field(d->canary, sizeof(d->canary), v, vl);
	if (kl == 10 && strncmp(k, "deployment", 10) == 0)
		return set_field(d->deployment, sizeof(d->deployment), v, vl);
	if (kl == 5 && strncmp(k, "steps", 5) == 0)
		return sc__gw_parse_steps(val, d->steps, &d->nsteps);
	if (kl == 6 && strncmp(k, "window", 6) == 0)
		return sc_parse_duration_ms(val, 50, GW_MAX_DURATION_MS, &d->window_ms);
	if (kl == 14 && strncmp(k, "max-error-rate", 14) == 0)
		return sc_parse_num(val, 0, 1, &d->max_error_rate);
	if (kl == 12 && strncmp(k, "min-requests", 12) == 0)
		return sc_parse_u64(val, 1, 1000000000, &d->min_requests);
	if (kl == 25 && strncmp(k, "early-rollback-confidence", 25) == 0) {
		int rc = sc_parse_num(val, 0, 0.9999, &d->confidence);
		return rc < 0 || d->confidence == 0 || d->confidence >= 0.5 ? rc : SC_EINVAL;
	}
	return SC_ENOTFOUND;
}

static int parse_rollout(const gw_opts_t *o, const char *spec, rollout_desc_t *d, char *err,
                         size_t errsz)
{
	memset(d, 0, sizeof(*d));
	memcpy(d->steps, o->steps, sizeof(d->steps));
	d->nsteps = o->nsteps;
	d->window_ms = o->window_ms;
	d->max_error_rate = o->max_error_rate;
	d->min_requests = 1;
	d->confidence = GW_EARLY_CONFIDENCE;
	const char *p = spec;
	while (*p) {
		size_t fl = strcspn(p, ",");
		const char *eq = memchr(p, '=', fl);
		if (!eq) {
			snprintf(err, errsz, "expected key=value, got \"%.*s\"", (int)fl, p);
			return SC_EINVAL;
		}
		size_t kl = (size_t)(eq - p);
		int rc = parse_rollout_field(d, p, kl, eq + 1, fl - kl - 1);
		if (rc == SC_ENOTFOUND) {
			snprintf(err, errsz, "unknown field \"%.*s\"", (int)kl, p);
			return SC_EINVAL;
		}
		if (rc < 0) {
			snprintf(err, errsz, "%.*s: bad value \"%.*s\"", (int)kl, p,
			         (int)(fl - kl - 1), eq + 1);
			return SC_EINVAL;
		}
		p += fl + (p[fl] == ',');
	}
	if (!d->model[0] || !d->stable[0] || !d->canary[0] || strcmp(d->stable, d->canary) == 0) {
		snprintf(err, errsz, "model, stable and canary are required (two versions)");
		return SC_EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------- */

#define MAX_FLAGS 256

typedef struct args {
	gw_opts_t o;
	gw_backend_t backends[MAX_FLAGS];
	size_t nbackends;
	rollout_desc_t rollouts[16];
	size_t nrollouts;
	const char *rollout_specs[16];
	const char *config;
	int check_config;
	const char *token_file;
	sc_tls_serve_flags_t tls; /* the listener */
	const char *ca;           /* CA of https:// backends and servers */
} args_t;

static int backend_flag(void *opts, const char *v, char *err, size_t errsz)
{
	args_t *a = opts;
	if (a->nbackends == MAX_FLAGS) {
		snprintf(err, errsz, "at most %d", MAX_FLAGS);
		return SC_ELIMIT;
	}
	char why[256];
	if (sc__gw_parse_backend(v, &a->backends[a->nbackends], why, sizeof(why)) < 0) {
		snprintf(err, errsz, "\"%s\": %s", v, why);
		return SC_EINVAL;
	}
	a->nbackends++;
	return 0;
}

/* Rollouts are parsed once the defaults they inherit are final. */
static int rollout_flag(void *opts, const char *v, char *err, size_t errsz)
{
	args_t *a = opts;
	if (a->nrollouts == 16) {
		snprintf(err, errsz, "at most 16");
		return SC_ELIMIT;
	}
	a->rollout_specs[a->nrollouts++] = v;
	return 0;
}

/* ---------------------------------------------------------------------
 * The configuration file's structured lists (docs/GATEWAY.md):
 *   backends: [{model, version, url, role?, weight?, kind?, upstreamModel?, health?}]
 *   rollouts: [{model, stable, canary, steps?, analysisWindow?, maxErrorRate?,
 *               deployment?, minRequests?}]
 * Each entry is written as the spec of a --backend or --rollout flag and
 * goes through the same parser, so a file and a flag accept the same.
 * ------------------------------------------------------------------- */

/* Appends ",name=value" for field (a string, or a whole number written
 * out; a list of whole numbers is joined with '/'). Absent: nothing. */
static int spec_field(char *spec, size_t sz, json_t *e, const char *field, const char *name,
                      char *err, size_t errsz)
{
	json_t *v = json_object_get(e, field);
	size_t n = strlen(spec);
	char num[32];
	if (!v)
		return 0;
	if (json_is_string(v) && !strpbrk(json_string_value(v), ",=")) {
		snprintf(spec + n, sz - n, "%s%s=%s", n ? "," : "", name, json_string_value(v));
		return 0;
	}
	if (json_is_boolean(v)) {
		snprintf(spec + n, sz - n, "%s%s=%s", n ? "," : "", name,
		         json_is_true(v) ? "true" : "false");
		return 0;
	}
	if (json_is_integer(v) || json_is_real(v)) {
		if (json_is_integer(v))
			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		else
			snprintf(num, sizeof(num), "%.17g", json_real_value(v));
		snprintf(spec + n, sz - n, "%s%s=%s", n ? "," : "", name, num);
		return 0;
	}
	if (json_is_array(v) && json_array_size(v) > 0) {
		snprintf(spec + n, sz - n, "%s%s=", n ? "," : "", name);
		for (size_t i = 0; i < json_array_size(v); i++) {
			json_t *x = json_array_get(v, i);
			if (!json_is_integer(x))
				goto bad;
			n = strlen(spec);
			snprintf(spec + n, sz - n, "%s%lld", i ? "/" : "",
			         (long long)json_integer_value(x));
		}
		return 0;
	}
bad:
	snprintf(err, errsz, "%s: expected %s", field,
	         json_is_array(v) ? "a list of whole numbers" : "a value without ',' or '='");
	return SC_EINVAL;
}

static int file_key(void *opts, const char *key, json_t *e, char *err, size_t errsz)
{
	static const char *const bf[][2] = {{"model", "model"},
	                                    {"version", "version"},
	                                    {"url", "url"},
	                                    {"role", "role"},
	                                    {"weight", "weight"},
	                                    {"kind", "kind"},
	                                    {"upstreamModel", "upstream-model"},
	                                    {"health", "health"},
	                                    {"repository", "repository"}};
	static const char *const rf[][2] = {
	    {"model", "model"},
	    {"stable", "stable"},
	    {"canary", "canary"},
	    {"steps", "steps"},
	    {"analysisWindow", "window"},
	    {"maxErrorRate", "max-error-rate"},
	    {"deployment", "deployment"},
	    {"minRequests", "min-requests"},
	    {"earlyRollbackConfidence", "early-rollback-confidence"}};
	int backends = strcmp(key, "backends") == 0;
	if (!backends && strcmp(key, "rollouts") != 0)
		return SC_ENOTFOUND;
	if (!e)
		return 0; /* an empty list */
	if (!json_is_object(e)) {
		snprintf(err, errsz, "expected {model: ..., %s}",
		         backends ? "version: ..., url: ..." : "stable: ..., canary: ...");
		return SC_EINVAL;
	}
	char spec[1024] = "";
	size_t nf = backends ? sizeof(bf) / sizeof(bf[0]) : sizeof(rf) / sizeof(rf[0]);
	const char *const(*f)[2] = backends ? bf : rf;
	const char *k;
	json_t *v;
	json_object_foreach(e, k, v)
	{
		size_t i = 0;
		while (i < nf && strcmp(f[i][0], k) != 0)
			i++;
		if (i == nf) {
			snprintf(err, errsz, "%s: unknown field", k);
			return SC_EINVAL;
		}
	}
	for (size_t i = 0; i < nf; i++)
		if (spec_field(spec, sizeof(spec), e, f[i][0], f[i][1], err, errsz) < 0)
			return SC_EINVAL;
	if (backends)
		return backend_flag(opts, spec, err, errsz);
	/* Checked now, so that an error points into the file; parsed for good
	 * with the --rollout flags, once every default they inherit is known. */
	args_t *a = opts;
	rollout_desc_t check;
	if (parse_rollout(&a->o, spec, &check, err, errsz) < 0)
		return SC_EINVAL;
	return rollout_flag(opts, sc_xstrdup(spec), err, errsz);
}

#define WEEK_MS 604800000.0

static const sc_flag_t gw_flags[] = {
    {.name = "--listen",
     SC_FLAG_AT(ADDR, args_t, o.listen),
     .def = "127.0.0.1:8080",
     .help = "where to serve"},
    {.name = "--backend",
     .kind = SC_FLAG_FUNC,
     .fn = backend_flag,
     .meta = "SPEC",
     .flags = SC_FLAG_REPEAT,
     .help = "model=NAME,version=V,url=http://HOST:PORT\n[,role=both|prefill|decode][,weight=W]\n"
             "[,kind=starcloud|openai][,upstream-model=NAME][,health=PATH];\n"
             "or url=http://HOST:PORT,repository=true: what its model repository serves"},
    {.name = "--rollout",
     .kind = SC_FLAG_FUNC,
     .fn = rollout_flag,
     .meta = "SPEC",
     .flags = SC_FLAG_REPEAT,
     .help = "model=M,stable=V1,canary=V2[,steps=10/50/100]\n"
             "[,window=60s][,max-error-rate=0.05][,min-requests=1][,deployment=NAME]"},
    {.name = "--server",
     SC_FLAG_TEXT_AT(args_t, o.server),
     .meta = "URL[,URL...]",
     .help = "watch deployments on the control plane (the next\nserver when one is down or a "
             "follower)"},
    SC_TLS_SERVE_FLAGS(args_t, tls),
    {.name = "--ca",
     SC_FLAG_AT(STR, args_t, ca),
     .meta = "FILE",
     .env = "STARCLOUD_CA",
     .help = "CA certificate of https:// backends and control planes\n"
             "(reloaded on SIGHUP and when the file changes)"},
    {.name = "--token-file",
     SC_FLAG_AT(STR, args_t, token_file),
     .meta = "FILE",
     .help = "the control plane's API token, from a file of mode 0600"},
    {.name = "--token",
     SC_FLAG_TEXT_AT(args_t, o.token),
     .meta = "T",
     .env = "STARCLOUD_TOKEN",
     .help = "the token itself (warns on the command line: prefer\n--token-file or "
             "$STARCLOUD_TOKEN)"},
    {.name = "--otlp",
     SC_FLAG_TEXT_AT(args_t, o.otlp),
     .meta = "URL",
     .help = "export spans to URL/v1/traces (OTLP/HTTP JSON)"},
    {.name = "--timeout",
     SC_FLAG_AT(DURATION, args_t, o.timeout_ms),
     .max = WEEK_MS,
     .def = "60s",
     .help = "whole request"},
    {.name = "--attempt-timeout",
     SC_FLAG_AT(DURATION, args_t, o.attempt_timeout_ms),
     .min = 1,
     .max = WEEK_MS,
     .def = "10s",
     .help = "one upstream attempt: until the first byte of its answer"},
    {.name = "--idle-timeout",
     SC_FLAG_AT(DURATION, args_t, o.idle_timeout_ms),
     .min = 1,
     .max = WEEK_MS,
     .def = "5s",
     .help = "one upstream attempt: the longest silence once it answers\n(between "
             "streamed tokens)"},
    {.name = "--max-inflight",
     SC_FLAG_AT(INT, args_t, o.max_inflight),
     .min = 1,
     .max = 1e6,
     .def = "128",
     .help = "requests per replica before 429"},
    {.name = "--max-retries",
     SC_FLAG_AT(INT, args_t, o.max_retries),
     .min = 0,
     .max = 10,
     .def = "2",
     .help = "per request"},
    {.name = "--retry-budget",
     SC_FLAG_AT(NUM, args_t, o.retry_budget),
     .min = 0,
     .max = 1,
     .def = "0.2",
     .help = "retries in flight / active requests (at least 3)"},
    {.name = "--eject-after",
     SC_FLAG_AT(INT, args_t, o.eject_after),
     .min = 1,
     .max = 1000,
     .def = "5",
     .help = "consecutive failures"},
    {.name = "--eject-time",
     SC_FLAG_AT(DURATION, args_t, o.eject_base_ms),
     .max = WEEK_MS,
     .def = "30s",
     .help = "base ejection, x ejections, max 300s"},
    {.name = "--probe-interval",
     SC_FLAG_AT(DURATION, args_t, o.probe_interval_ms),
     .max = WEEK_MS,
     .def = "2s",
     .help = "readiness probes, 0 = off"},
    {.name = "--prefill-failure",
     SC_FLAG_AT(CHOICE, args_t, o.prefill_retry),
     .choices = "fail|retry",
     .def = "retry",
     .help = "a failed prefill fails the request, or is retried"},
    {.name = "--analysis-window",
     SC_FLAG_AT(DURATION, args_t, o.window_ms),
     .max = WEEK_MS,
     .def = "60s",
     .help = "default rollout window"},
    {.name = "--max-error-rate",
     SC_FLAG_AT(NUM, args_t, o.max_error_rate),
     .min = 0,
     .max = 1,
     .def = "0.05",
     .help = "default rollout threshold"},
    {.name = "--max-body",
     SC_FLAG_AT(SIZE, args_t, o.max_body),
     .min = 1024,
     .max = 64 << 20,
     .def = "4194304",
     .help = "largest request body"},
    SC_FLAGS_CONFIG(args_t),
};

static const sc_command_t gw_cmd = {
    .file_key = file_key,
    .name = "gateway",
    .about = "The serving gateway: balances, retries, ejects bad replicas, sheds load,\n"
             "runs canary rollouts and prefill/decode disaggregation (docs/GATEWAY.md).",
    .flags = gw_flags,
    .nflags = sizeof(gw_flags) / sizeof(gw_flags[0]),
};

/* Defaults that no flag sets. */
static void fixed_defaults(gw_opts_t *o)
{
	o->retry_budget_min = 3;
	o->eject_max_ms = 300000;
	o->max_response = 16u << 20;
	int st[] = {10, 50, 100};
	memcpy(o->steps, st, sizeof(st));
	o->nsteps = 3;
}

static int parse_args(int argc, char **argv, args_t *a)
{
	fixed_defaults(&a->o);
	int rc = sc_flags_parse(&gw_cmd, a, argc, argv, NULL);
	if (rc != 0)
		return rc;
	char given[sizeof(a->o.token)];
	snprintf(given, sizeof(given), "%s", a->o.token); /* the flag's copy, or "" */
	if ((a->token_file || given[0]) &&
	    sc_secret_token("gateway", given[0] ? given : NULL, a->token_file, "STARCLOUD_TOKEN",
	                    argc, argv, a->o.token, sizeof(a->o.token)) < 0)
		return SC_EINVAL;
	char err[256];
	size_t n = a->nrollouts;
	for (size_t i = 0; i < n; i++) {
		if (parse_rollout(&a->o, a->rollout_specs[i], &a->rollouts[i], err, sizeof(err)) <
		    0) {
			fprintf(stderr, "starcloud gateway: --rollout \"%s\": %s\n",
			        a->rollout_specs[i], err);
			return SC_EINVAL;
		}
	}
	char serr[GW_MAX_URL + 64];
	if (a->o.server[0] && sc__gw_parse_servers(&a->o, serr, sizeof(serr)) < 0) {
		fprintf(stderr, "starcloud gateway: --server: %s\n", serr);
		return SC_EINVAL;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Start-up and shutdown
 * ------------------------------------------------------------------- */

static void on_signal(uv_signal_t *h, int signum)
{
	sc_gw_t *gw = h->data;
	sc_log_info("signal %d, shutting down", signum);
	sc_sd_notify("STOPPING=1");
	uv_close((uv_handle_t *)&gw->watchdog, NULL);
	sc__gw_proxy_shutdown(gw);
	sc_http_server_close(gw->http);
	gw->http = NULL;
	sc__gw_control_stop(gw);
	sc__gw_trace_close(gw);
	sc__gw_rollout_stop_all(gw);
	if (gw->o.probe_interval_ms)
		uv_close((uv_handle_t *)&gw->probe_timer, NULL);
	sc_hcli_close(gw->hc);
	gw->hc = NULL;
	uv_close((uv_handle_t *)&gw->sigint, NULL);
	uv_close((uv_handle_t *)&gw->sigterm, NULL);
	sc_tls_reload_stop();
}

static int setup(sc_gw_t *gw, args_t *a)
{
	gw->o = a->o;
	gw->rng = (uint64_t)uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ 0x9E3779B97F4A7C15ull;
	sc_http_limits_t lim = {
	    .max_body_bytes = a->o.max_body, .max_conns = 16384, .idle_timeout_ms = 120000};
	gw->http = sc_http_server_new(gw->loop, &lim);
	sc_hcli_opts_t hco = {.max_idle_per_host = 256, .connect_timeout_ms = 1000};
	gw->hc = sc_hcli_new(gw->loop, &hco);
	if (!gw->http || !gw->hc)
		return SC_ENOMEM;
	char err[512];
	int trc;
	if ((trc = sc_tls_serve_setup("gateway", &a->tls, a->o.listen.host, gw->http, &gw->tls)) <
	    0)
		return trc;
	if (sc_tls_client_ctx(a->ca, NULL, NULL, &gw->tls_client, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud gateway: %s\n", err);
		return SC_EINVAL;
	}
	sc_hcli_set_tls(gw->hc, gw->tls_client);
	sc_tls_reload_watch(gw->loop, "listener", gw->tls);
	sc_tls_reload_watch(gw->loop, "client", gw->tls_client);
	for (size_t i = 0; i < a->nbackends; i++) {
		gw_backend_t *b = &a->backends[i];
		if (b->repository ? !sc__gw_repo_add(gw, b->url, b->weight, GW_SRC_STATIC)
		                  : !sc__gw_backend_add(gw, b))
			return SC_ELIMIT;
	}
	for (size_t i = 0; i < a->nrollouts; i++) {
		rollout_desc_t *d = &a->rollouts[i];
		gw_rollout_t *ro =
		    sc__gw_rollout_set(gw, d->model, d->stable, d->canary, d->steps, d->nsteps,
		                       d->window_ms, d->max_error_rate, GW_SRC_STATIC);
		if (!ro)
			return SC_ELIMIT;
		snprintf(ro->deployment, sizeof(ro->deployment), "%s", d->deployment);
		ro->min_requests = d->min_requests;
		ro->confidence = d->confidence;
	}
	int rc = sc__gw_proxy_init(gw);
	if (rc == 0)
		rc = sc__gw_proxy_routes(gw);
	if (rc == 0)
		rc = sc__gw_admin_routes(gw);
	if (rc < 0)
		return rc;
	if ((rc = sc_http_listen(gw->http, a->o.listen.host, a->o.listen.port)) < 0) {
		sc_log_error("cannot listen on %s:%d: %s", a->o.listen.host, a->o.listen.port,
		             sc_http_listen_error(gw->http));
		return rc;
	}
	sc__gw_trace_init(gw);
	gw->probe_tick = sc__gw_repo_poll;
	sc__gw_probe_start(gw);
	sc__gw_control_start(gw);
	uv_signal_init(gw->loop, &gw->sigint);
	uv_signal_init(gw->loop, &gw->sigterm);
	gw->sigint.data = gw->sigterm.data = gw;
	uv_signal_start(&gw->sigint, on_signal, SIGINT);
	uv_signal_start(&gw->sigterm, on_signal, SIGTERM);
	return 0;
}

static void free_all(sc_gw_t *gw)
{
	sc__gw_proxy_free_pool(gw);
	for (size_t i = 0; i < gw->nbe; i++)
		free(gw->be[i]);
	for (size_t i = 0; i < gw->nrepos; i++)
		sc_buf_free(&gw->repos[i].body);
	for (size_t i = 0; i < gw->nstats; i++)
		free(gw->stats[i]);
}

int sc_gateway_main(int argc, char **argv)
{
	static args_t a; /* large: backends and rollouts from flags */
	memset(&a, 0, sizeof(a));
	sc_log_open("gateway");
	int rc = parse_args(argc, argv, &a);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (a.check_config)
		return sc_flags_config_ok(&gw_cmd, a.config);
	static sc_gw_t gw;
	memset(&gw, 0, sizeof(gw));
	uv_loop_t loop;
	uv_loop_init(&loop);
	gw.loop = &loop;
	rc = setup(&gw, &a);
	if (rc < 0) {
		if (!gw.http || !sc_http_listen_error(gw.http)[0]) /* else said */
			sc_log_error("start-up failed: %s", sc_strerror(rc));
		return 1;
	}
	printf("starcloud gateway listening on %s://%s:%d (%zu backends)\n",
	       gw.tls ? "https" : "http", a.o.listen.host, sc_http_port(gw.http), gw.nbe);
	fflush(stdout);
	sc_sd_watchdog_start(&loop, &gw.watchdog);
	sc_sd_notifyf("READY=1\nSTATUS=serving on http://%s:%d (%zu backends)", a.o.listen.host,
	              sc_http_port(gw.http), gw.nbe);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	free_all(&gw);
	return 0;
}
