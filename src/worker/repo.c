/* The Triton model repository (`--model-repository DIR`) and its API.
 *
 * The layout is Triton's: DIR/<model>/config.pbtxt (the model
 * configuration, protobuf text format) and DIR/<model>/<version>/, one
 * directory per version, named by a positive integer, holding the
 * checkpoint (`model.bin`, or default_model_filename) and optionally a
 * tokenizer.bin (else one in DIR/<model>/, else the byte-level one). The
 * configuration's version_policy chooses which versions are served: the
 * latest N (`latest { num_versions: N }`, Triton's default with N = 1),
 * given ones (`specific { versions: [1, 3] }`), or all (`all {}`).
 *
 *   POST /v2/repository/index                 every model: READY versions,
 *                                             UNAVAILABLE ones with the reason
 *   POST /v2/repository/models/{m}/load       (re)reads config and versions
 *   POST /v2/repository/models/{m}/unload     stops serving every version
 *
 * A load builds every new version aside and swaps only when all of them
 * loaded, so a failed (re)load keeps what was served (nginx's rule for a
 * configuration); an unchanged version (same checkpoint size and mtime)
 * is kept as it is. A version no longer served stops taking requests at
 * once and is freed when its last request is done. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/pbtxt.h"
#include "starcloud/error.h"
#include "worker/worker_int.h"

#define MAX_CONFIG (1u << 20)
#define MAX_VERSIONS 64

typedef struct mconfig {
	char name[128];
	char file[128];      /* default_model_filename */
	char tokenizer[128]; /* parameters "tokenizer", or "" */
	int max_batch;       /* 0: the worker's */
	int policy;          /* 0 latest, 1 specific, 2 all */
	int latest;
	int64_t specific[MAX_VERSIONS];
	size_t nspecific;
} mconfig_t;

/* Fields of Triton's model configuration that this backend accepts and
 * does not use (they describe other backends' tensors and scheduling). */
static const char *const ignored[] = {"platform",
                                      "input",
                                      "output",
                                      "instance_group",
                                      "dynamic_batching",
                                      "sequence_batching",
                                      "ensemble_scheduling",
                                      "optimization",
                                      "model_warmup",
                                      "model_transaction_policy",
                                      "response_cache",
                                      "batch_input",
                                      "batch_output",
                                      "model_operations",
                                      "runtime",
                                      NULL};

/* ---------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------- */

static int cfg_err(char *err, size_t errsz, const char *fmt, const char *a)
{
	snprintf(err, errsz, fmt, a);
	return SC_EINVAL;
}

static int read_file(const char *path, char **out, size_t *len, size_t max)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return SC_ENOTFOUND;
	char *buf = sc_malloc(max + 1);
	size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
	int rc = !buf ? SC_ENOMEM : ferror(f) ? SC_EIO : n > max ? SC_ETOOBIG : 0;
	fclose(f);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* version_policy: {latest: {num_versions}} | {specific: {versions}} | {all: {}}. */
static int read_policy(json_t *vp, mconfig_t *c, char *err, size_t errsz)
{
	c->policy = 0;
	c->latest = 1;
	if (!vp)
		return 0;
	json_t *lat = json_object_get(vp, "latest"), *sp = json_object_get(vp, "specific");
	json_t *all = json_object_get(vp, "all");
	if (!json_is_object(vp) || !!lat + !!sp + !!all != 1)
		return cfg_err(err, errsz,
		               "version_policy: expected one of latest, specific, all%s", "");
	if (all) {
		c->policy = 2;
		return 0;
	}
	if (lat) {
		json_t *n = json_object_get(lat, "num_versions");
		if (!json_is_integer(n) || json_integer_value(n) < 1 ||
		    json_integer_value(n) > MAX_VERSIONS)
			return cfg_err(err, errsz,
			               "version_policy.latest.num_versions: expected 1 to 64%s",
			               "");
		c->latest = (int)json_integer_value(n);
		return 0;
	}
	json_t *vs = json_object_get(sp, "versions"), *v;
	json_t *one = json_array();
	if (json_is_integer(vs))
		json_array_append(one, vs);
	json_t *list = json_is_array(vs) ? vs : one;
	size_t i;
	c->policy = 1;
	c->nspecific = 0;
	json_array_foreach(list, i, v)
	{
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    c->nspecific == MAX_VERSIONS) {
			json_decref(one);
			return cfg_err(
			    err, errsz,
			    "version_policy.specific.versions: expected positive integers%s", "");
		}
		c->specific[c->nspecific++] = json_integer_value(v);
	}
	json_decref(one);
	if (!c->nspecific)
		return cfg_err(err, errsz, "version_policy.specific.versions: none given%s", "");
	return 0;
}

/* parameters { key: "tokenizer" value: { string_value: "..." } }, once or
 * repeated. */
static int read_parameters(json_t *ps, mconfig_t *c, char *err, size_t errsz)
{
	json_t *one = json_array(), *p;
	if (json_is_object(ps))
		json_array_append(one, ps);
	json_t *list = json_is_array(ps) ? ps : one;
	size_t i;
	int rc = 0;
	json_array_foreach(list, i, p)
	{
		const char *k = json_string_value(json_object_get(p, "key"));
		const char *v =
		    json_string_value(json_object_get(json_object_get(p, "value"), "string_value"));
		if (!k || !v) {
			rc = cfg_err(err, errsz,
			             "parameters: expected {key, value: {string_value}}%s", "");
			break;
		}
		if (strcmp(k, "tokenizer") != 0) {
			rc = cfg_err(err, errsz,
			             "parameters: unknown key \"%.60s\" (known: tokenizer)", k);
			break;
		}
		if (!*v || strlen(v) >= sizeof(c->tokenizer) || strchr(v, '/')) {
			rc =
			    cfg_err(err, errsz, "parameters.tokenizer: expected a file name%s", "");
			break;
		}
		snprintf(c->tokenizer, sizeof(c->tokenizer), "%s", v);
	}
	json_decref(one);
	return rc;
}

static int read_config(const char *dir, const char *model, mconfig_t *c, char *err, size_t errsz)
{
	char path[2048], *text = NULL;
	size_t len = 0;
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", model);
	snprintf(c->file, sizeof(c->file), "model.bin");
	c->latest = 1; /* Triton's default policy: the latest version */
	snprintf(path, sizeof(path), "%s/%s/config.pbtxt", dir, model);
	int rc = read_file(path, &text, &len, MAX_CONFIG);
	if (rc == SC_ENOTFOUND)
		return cfg_err(err, errsz, "%s/config.pbtxt: missing", model);
	if (rc < 0)
		return cfg_err(err, errsz, "%s/config.pbtxt: unreadable or larger than 1 MiB",
		               model);
	char perr[200];
	json_t *o = sc_pbtxt_parse(text, len, perr, sizeof(perr));
	free(text);
	if (!o) {
		snprintf(err, errsz, "%s/config.pbtxt: %s", model, perr);
		return SC_EPARSE;
	}
	const char *k;
	json_t *v;
	rc = 0;
	json_object_foreach(o, k, v)
	{
		size_t i;
		for (i = 0; ignored[i] && strcmp(ignored[i], k) != 0; i++)
			;
		if (ignored[i])
			continue;
		if (strcmp(k, "name") == 0) {
			if (!json_is_string(v) || strcmp(json_string_value(v), model) != 0)
				rc = cfg_err(err, errsz,
				             "name: must be the model's directory, \"%s\"", model);
		} else if (strcmp(k, "backend") == 0) {
			if (!json_is_string(v) ||
			    strcmp(json_string_value(v), "starcloud_llama2c") != 0)
				rc = cfg_err(
				    err, errsz,
				    "backend: this worker runs \"starcloud_llama2c\" models only%s",
				    "");
		} else if (strcmp(k, "max_batch_size") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > 1024)
				rc =
				    cfg_err(err, errsz, "max_batch_size: expected 0 to 1024%s", "");
			else
				c->max_batch = (int)json_integer_value(v);
		} else if (strcmp(k, "default_model_filename") == 0) {
			const char *f = json_string_value(v);
			if (!f || !*f || strchr(f, '/') || strlen(f) >= sizeof(c->file))
				rc = cfg_err(err, errsz,
				             "default_model_filename: expected a file name%s", "");
			else
				snprintf(c->file, sizeof(c->file), "%s", f);
		} else if (strcmp(k, "version_policy") == 0) {
			rc = read_policy(v, c, err, errsz);
		} else if (strcmp(k, "parameters") == 0) {
			rc = read_parameters(v, c, err, errsz);
		} else {
			rc = cfg_err(err, errsz, "unknown field \"%.60s\"", k);
		}
		if (rc < 0)
			break;
	}
	json_decref(o);
	if (rc < 0) {
		char msg[300];
		snprintf(msg, sizeof(msg), "%s/config.pbtxt: %s", model, err);
		snprintf(err, errsz, "%s", msg);
	}
	return rc;
}

/* ---------------------------------------------------------------------
 * Versions
 * ------------------------------------------------------------------- */

static int cmp_i64_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The versions the policy serves, newest first. */
static int pick_versions(const char *dir, const mconfig_t *c, int64_t *out, size_t *n, char *err,
                         size_t errsz)
{
	char path[2048];
	int64_t have[MAX_VERSIONS];
	size_t nh = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, c->name);
	DIR *d = opendir(path);
	if (!d)
		return cfg_err(err, errsz, "%s: not a model directory", c->name);
	struct dirent *e;
	while ((e = readdir(d)) && nh < MAX_VERSIONS) {
		int64_t v;
		struct stat st;
		char f[2048 + 512];
		if (sc_parse_i64(e->d_name, 1, INT64_MAX, &v) < 0)
			continue;
		snprintf(f, sizeof(f), "%s/%s/%s", path, e->d_name, c->file);
		if (stat(f, &st) == 0 && S_ISREG(st.st_mode))
			have[nh++] = v;
	}
	closedir(d);
	qsort(have, nh, sizeof(have[0]), cmp_i64_desc);
	*n = 0;
	if (c->policy == 1) {
		for (size_t i = 0; i < c->nspecific; i++) {
			size_t k;
			for (k = 0; k < nh && have[k] != c->specific[i]; k++)
				;
			if (k == nh) {
				snprintf(err, errsz,
				         "%s: version %lld of version_policy.specific has no %s",
				         c->name, (long long)c->specific[i], c->file);
				return SC_ENOTFOUND;
			}
			out[(*n)++] = c->specific[i];
		}
		qsort(out, *n, sizeof(out[0]), cmp_i64_desc);
		return 0;
	}
	size_t want = c->policy == 2 ? nh : (size_t)c->latest < nh ? (size_t)c->latest : nh;
	memcpy(out, have, want * sizeof(int64_t));
	*n = want;
	if (!*n)
		return cfg_err(err, errsz, "%s: no version directory holds its checkpoint",
		               c->name);
	return 0;
}

/* The served instance of name:version, or NULL. */
static sc_wmodel_t *served(sc_worker_t *w, const char *name, const char *version)
{
	for (sc_wmodel_t *m = w->models; m; m = m->next)
		if (m->served && strcmp(m->name, name) == 0 && strcmp(m->version, version) == 0)
			return m;
	return NULL;
}

/* Stops serving m: no new request finds it; it is freed by the sweep once
 * its last request is done. */
static void retire(sc_wmodel_t *m)
{
	m->served = 0;
}

/* Version v of model, into *fresh unless the version served has the same
 * checkpoint file (size and time): then *fresh stays NULL. The tokenizer
 * is the version's, else the model's, else none (unless config.pbtxt
 * names one). 0 or < 0 with err. */
static int load_version(sc_worker_t *w, const char *model, const mconfig_t *c, int64_t v,
                        sc_wmodel_t **fresh, char *err, size_t errsz)
{
	char ver[32], ck[2048], tk[2048], *tok = NULL;
	struct stat st;
	snprintf(ver, sizeof(ver), "%lld", (long long)v);
	snprintf(ck, sizeof(ck), "%s/%s/%s/%s", w->repo_dir, model, ver, c->file);
	if (stat(ck, &st) < 0) {
		snprintf(err, errsz, "%s/%s/%s: %s", model, ver, c->file, strerror(errno));
		return SC_EIO;
	}
	sc_wmodel_t *old = served(w, model, ver);
	if (old && old->ck_size == (int64_t)st.st_size && old->ck_mtime == (int64_t)st.st_mtime)
		return 0;
	const char *tname = c->tokenizer[0] ? c->tokenizer : "tokenizer.bin";
	snprintf(tk, sizeof(tk), "%s/%s/%s/%s", w->repo_dir, model, ver, tname);
	if (stat(tk, &st) == 0)
		tok = tk;
	else {
		snprintf(tk, sizeof(tk), "%s/%s/%s", w->repo_dir, model, tname);
		if (stat(tk, &st) == 0)
			tok = tk;
		else if (c->tokenizer[0]) {
			snprintf(err, errsz, "%s: parameters.tokenizer %s: no such file", model,
			         c->tokenizer);
			return SC_ENOTFOUND;
		}
	}
	char lerr[256];
	int rc =
	    sc__wmodel_load(w, model, ver, ck, tok, NULL, c->max_batch, fresh, lerr, sizeof(lerr));
	if (rc < 0) {
		snprintf(err, errsz, "%s version %s: %s", model, ver, lerr);
		return rc;
	}
	stat(ck, &st);
	(*fresh)->ck_size = (int64_t)st.st_size;
	(*fresh)->ck_mtime = (int64_t)st.st_mtime;
	return 0;
}

static int repo_load(sc_worker_t *w, const char *model, char *err, size_t errsz)
{
	mconfig_t c;
	int64_t vs[MAX_VERSIONS];
	size_t nv = 0;
	if (!w->repo_dir[0])
		return cfg_err(err, errsz, "this worker has no --model-repository%s", "");
	if (!*model || strchr(model, '/') || model[0] == '.' || strlen(model) >= 128)
		return cfg_err(err, errsz, "\"%.60s\" is not a model name", model);
	int rc = read_config(w->repo_dir, model, &c, err, errsz);
	if (rc == 0)
		rc = pick_versions(w->repo_dir, &c, vs, &nv, err, errsz);
	if (rc < 0)
		return rc;
	/* Build every new or changed version aside. */
	sc_wmodel_t *fresh[MAX_VERSIONS] = {0};
	for (size_t i = 0; i < nv && rc == 0; i++)
		rc = load_version(w, model, &c, vs[i], &fresh[i], err, errsz);
	if (rc < 0) {
		for (size_t i = 0; i < nv; i++)
			sc__wmodel_unref(fresh[i]);
		return rc;
	}
	/* All loaded: swap. Versions outside the policy and replaced ones stop. */
	for (sc_wmodel_t *m = w->models; m; m = m->next) {
		if (!m->served || strcmp(m->name, model) != 0)
			continue;
		int keep = 0;
		for (size_t i = 0; i < nv; i++) {
			char ver[32];
			snprintf(ver, sizeof(ver), "%lld", (long long)vs[i]);
			keep |= strcmp(m->version, ver) == 0 && !fresh[i];
		}
		if (!keep)
			retire(m);
	}
	for (size_t i = 0; i < nv; i++)
		if (fresh[i]) {
			fresh[i]->served = 1;
			fresh[i]->next = w->models;
			w->models = fresh[i];
		}
	return 0;
}

/* Frees retired models whose last request is done (the worker's sweep). */
void sc__repo_sweep(sc_worker_t *w)
{
	sc_wmodel_t **pp = &w->models;
	while (*pp) {
		sc_wmodel_t *m = *pp;
		int waiting, running;
		sc__batcher_load(m->batch, &waiting, &running);
		if (!m->served && m->refs == 1 && !waiting && !running) {
			*pp = m->next;
			sc__wmodel_unref(m);
			continue;
		}
		pp = &m->next;
	}
}

/* ---------------------------------------------------------------------
 * API
 * ------------------------------------------------------------------- */

/* The model directories of the repository (sorted), as a JSON array. */
static json_t *repo_models(sc_worker_t *w)
{
	json_t *names = json_array();
	DIR *d = opendir(w->repo_dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[2048];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s", w->repo_dir, e->d_name);
		if (e->d_name[0] != '.' && stat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
		    strlen(e->d_name) < 128)
			json_array_append_new(names, json_string(e->d_name));
	}
	if (d)
		closedir(d);
	return names;
}

static void h_index(wreq_t *q)
{
	sc_worker_t *w = q->w;
	size_t len;
	const char *raw = sc_http_body(q->req, &len);
	json_t *body = len ? json_loadb(raw, len, 0, NULL) : json_object();
	json_t *ready = json_object_get(body, "ready");
	if (!json_is_object(body) || (ready && !json_is_boolean(ready))) {
		json_decref(body);
		return sc__reply_error(q, 400, "ready", "the body must be {} or {\"ready\": bool}");
	}
	int only_ready = json_is_true(ready);
	json_decref(body);
	json_t *out = json_array(), *names = repo_models(w), *n;
	size_t i;
	json_array_foreach(names, i, n)
	{
		const char *name = json_string_value(n);
		int any = 0;
		for (sc_wmodel_t *m = w->models; m; m = m->next)
			if (m->served && strcmp(m->name, name) == 0) {
				any = 1;
				json_array_append_new(out, json_pack("{s:s,s:s,s:s}", "name", name,
				                                     "version", m->version, "state",
				                                     "READY"));
			}
		if (any || only_ready)
			continue;
		const char *why = json_string_value(json_object_get(w->repo_errors, name));
		json_array_append_new(out,
		                      json_pack("{s:s,s:s,s:s}", "name", name, "state",
		                                "UNAVAILABLE", "reason", why ? why : "unloaded"));
	}
	json_decref(names);
	sc__reply_json(q, 200, out);
}

static void h_model_op(wreq_t *q)
{
	sc_worker_t *w = q->w;
	const char *p = sc_http_path(q->req) + strlen("/v2/repository/models/");
	char model[128];
	size_t n = strcspn(p, "/");
	if (n == 0 || n >= sizeof(model))
		return sc__reply_error(q, 404, "model", "unknown model");
	memcpy(model, p, n);
	model[n] = '\0';
	const char *op = p + n;
	char err[512], dir[2048];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s/%s", w->repo_dir, model);
	if (!w->repo_dir[0] || model[0] == '.' || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return sc__reply_error(q, 404, "model", "no model \"%s\" in the repository", model);
	if (strcmp(op, "/load") == 0) {
		int rc = repo_load(w, model, err, sizeof(err));
		if (rc < 0) {
			json_object_set_new(w->repo_errors, model, json_string(err));
			return sc__reply_error(q, 400, NULL, "failed to load %s: %s", model, err);
		}
		json_object_del(w->repo_errors, model);
		sc_log_info("repository: loaded %s", model);
		return sc__reply_raw(q, 200, "application/json", "{}", 2);
	}
	if (strcmp(op, "/unload") == 0) {
		for (sc_wmodel_t *m = w->models; m; m = m->next)
			if (m->served && strcmp(m->name, model) == 0)
				retire(m);
		json_object_del(w->repo_errors, model);
		sc_log_info("repository: unloaded %s", model);
		return sc__reply_raw(q, 200, "application/json", "{}", 2);
	}
	sc__reply_error(q, 404, "path", "no such path");
}

static void h_repo(wreq_t *q)
{
	q->err_shape = ERR_KSERVE;
	const char *path = sc_http_path(q->req);
	if (!q->w->repo_dir[0])
		return sc__reply_error(q, 404, "path", "this worker has no --model-repository");
	if (strcmp(path, "/v2/repository/index") == 0)
		return h_index(q);
	if (strncmp(path, "/v2/repository/models/", 22) == 0)
		return h_model_op(q);
	sc__reply_error(q, 404, "path", "no such path");
}

void sc__repo_routes(sc_worker_t *w)
{
	sc__worker_route(w, "POST", "/v2/repository/", h_repo);
}

int sc__repo_open(sc_worker_t *w, const char *dir, int explicit_mode, const char *const *load,
                  size_t nload, char *err, size_t errsz)
{
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return cfg_err(err, errsz, "--model-repository %s: not a directory", dir);
	if (strlen(dir) >= sizeof(w->repo_dir))
		return cfg_err(err, errsz, "--model-repository %s: path too long", dir);
	snprintf(w->repo_dir, sizeof(w->repo_dir), "%s", dir);
	w->repo_errors = sc_xcheck(json_object());
	json_t *names = explicit_mode ? json_array() : repo_models(w);
	for (size_t i = 0; explicit_mode && i < nload; i++)
		json_array_append_new(names, json_string(load[i]));
	size_t i;
	json_t *n;
	int rc = 0;
	json_array_foreach(names, i, n)
	{
		char one[400];
		if ((rc = repo_load(w, json_string_value(n), one, sizeof(one))) < 0) {
			snprintf(err, errsz, "%s", one);
			break;
		}
	}
	json_decref(names);
	return rc;
}
