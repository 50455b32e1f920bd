/* Bearer-token authentication and role checks.
 *
 * A token is "sc_" followed by 48 hex digits of kernel randomness. Only its
 * SHA-256 is stored, under /registry/tokens/<first 16 hex of the digest>
 * (the token's id), so a copy of the database does not hand out access.
 * The first start of a server with no tokens mints an admin token and
 * prints it once on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>

#include "base/parse.h"

#include "base/log.h"
#include "base/version.h"
#include "base/alloc.h"
#include "server/cache.h"
#include "server/server.h"
#include "starcloud/error.h"
#include "starcloud/sha256.h"

#define TOKEN_PREFIX SC_KEY_PREFIX "tokens/"
#define TOKEN_RANDOM_BYTES 24
#define MAX_TOKEN_LEN 128
#define ID_LEN 16

static int sc__role_parse(const char *name)
{
	for (int i = SC_ROLE_ADMIN; i <= SC_ROLE_AGENT; i++)
		if (name && strcmp(name, sc__role_name(i)) == 0)
			return i;
	return SC_ROLE_NONE;
}

/* What a new token is: role, queues (borrowed, may be NULL), for agent
 * tokens node and optionally address (borrowed, else NULL), and expires
 * (unix seconds, 0: never). */
typedef struct sc_token_spec {
	int role;
	json_t *queues;
	const char *node;
	const char *address;
	int64_t expires;
} sc_token_spec_t;

/* Constant-time comparison so a timing side channel cannot recover a
 * digest byte by byte. */
static int digest_equal(const char *a, const char *b)
{
	unsigned char d = 0;
	size_t n = strlen(a);
	if (n != strlen(b))
		return 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* Mints a token as spec says; writes the secret (owned by caller, free()),
 * the id, the store key and the record to store (*text, owned by the
 * caller). */
static int sc__token_mint(const sc_token_spec_t *spec, char **secret, char *id, size_t idsz,
                          char *key, size_t keysz, char **text)
{
	int role = spec->role;
	json_t *queues = spec->queues;
	const char *node = spec->node;
	unsigned char rnd[TOKEN_RANDOM_BYTES];
	char tok[4 + 2 * TOKEN_RANDOM_BYTES + 1], hash[65], ts[40];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return SC_EIO;
	memcpy(tok, "sc_", 3);
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(tok + 3 + 2 * i, 3, "%02x", rnd[i]);
	sc_sha256_hex(tok, strlen(tok), hash);
	snprintf(id, idsz, "%.*s", ID_LEN, hash);
	snprintf(key, keysz, TOKEN_PREFIX "%.*s", ID_LEN, hash);
	sc__now_rfc3339(ts, sizeof(ts));
	json_t *qs = queues ? json_incref(queues) : json_array();
	json_t *rec = json_pack("{s:s,s:s,s:s,s:o,s:s}", "id", id, "hash", hash, "role",
	                        sc__role_name(role), "queues", qs, "createdAt", ts);
	if (node)
		json_object_set_new(rec, "node", json_string(node));
	if (spec->address && spec->address[0])
		json_object_set_new(rec, "address", json_string(spec->address));
	if (spec->expires > 0) {
		char exp[40];
		time_t t = (time_t)spec->expires;
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(exp, sizeof(exp), "%Y-%m-%dT%H:%M:%SZ", &tm);
		json_object_set_new(rec, "expiresAt", json_string(exp));
		json_object_set_new(rec, "expires", json_integer(spec->expires));
	}
	*text = sc_xcheck(json_dumps(rec, JSON_COMPACT));
	json_decref(rec);
	*secret = sc_xstrdup(tok);
	return 0;
}

/* Mints a token and stores it, waiting for the store (start-up, the
 * node-pool controller). */
static int sc__token_create(sc_server_t *s, const sc_token_spec_t *spec, char **secret, char *id,
                            size_t idsz)
{
	char key[128], *text;
	int rc = sc__token_mint(spec, secret, id, idsz, key, sizeof(key), &text);
	if (rc < 0)
		return rc;
	rc = sc_store_put(s->store, key, text, SC_REV_ABSENT, NULL);
	free(text);
	if (rc < 0) {
		free(*secret);
		*secret = NULL;
	}
	return rc;
}

/* An agent token on its way to the store. */
typedef struct mint {
	sc_token_fn fn;
	void *ud;
	char *secret;
	char id[ID_LEN + 1];
} mint_t;

static void agent_token_stored(const sc_store_res_t *res, void *ud)
{
	mint_t *m = ud;
	m->fn(res->rc, res->rc == 0 ? m->secret : NULL, m->id, m->ud);
	free(m->secret);
	free(m);
}

void sc__auth_agent_token(sc_server_t *s, const char *node, sc_token_fn fn, void *ud)
{
	sc_token_spec_t spec = {.role = SC_ROLE_AGENT, .node = node};
	mint_t *m = sc_xcalloc(1, sizeof(*m));
	char key[128], *text;
	m->fn = fn;
	m->ud = ud;
	int rc = sc__token_mint(&spec, &m->secret, m->id, sizeof(m->id), key, sizeof(key), &text);
	if (rc < 0) {
		sc_store_res_t res = {.rc = rc};
		agent_token_stored(&res, m);
		return;
	}
	sc_store_op_t op = {SC_STORE_PUT, key, text, SC_REV_ABSENT};
	sc_store_txn_async(s->store, &op, 1, agent_token_stored, m);
	free(text);
}

static void token_deleted(const sc_store_res_t *res, void *ud)
{
	if (res->rc < 0 && res->rc != SC_ENOTFOUND)
		sc_log_warn("token: cannot delete a node's token: %s", sc_strerror(res->rc));
}

void sc__auth_token_delete(sc_server_t *s, const char *id)
{
	char key[128];
	if (!id || !id[0])
		return;
	snprintf(key, sizeof(key), TOKEN_PREFIX "%s", id);
	sc_store_op_t op = {SC_STORE_DELETE, key, NULL, SC_REV_ANY};
	sc_store_txn_async(s->store, &op, 1, token_deleted, NULL);
}

/* Writes "TOKEN\n" to fd, makes it durable and closes fd. 0 or < 0. */
static int write_token(int fd, const char *secret)
{
	size_t n = strlen(secret);
	int ok = fchmod(fd, 0600) == 0 && write(fd, secret, n) == (ssize_t)n &&
	         write(fd, "\n", 1) == 1 && fsync(fd) == 0;
	return close(fd) == 0 && ok ? 0 : SC_EIO;
}

int sc__auth_init(sc_server_t *s)
{
	sc_kv_list_t l;
	int rc = sc_store_list(s->store, TOKEN_PREFIX, &l);
	if (rc < 0)
		return rc;
	size_t n = l.n;
	sc_kv_list_free(&l);
	if (n > 0)
		return 0;
	char *secret = NULL, id[32];
	/* The file is opened first: a server that cannot write it stops before
	 * a token nobody will ever see exists. */
	int fd = -1;
	if (s->admin_token_file &&
	    (fd = open(s->admin_token_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		sc_log_error("--admin-token-file %s: %s", s->admin_token_file, strerror(errno));
		return SC_EIO;
	}
	sc_token_spec_t spec = {.role = SC_ROLE_ADMIN};
	rc = sc__token_create(s, &spec, &secret, id, sizeof(id));
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	/* Shown once: only its digest is kept, so it cannot be shown again. */
	if (fd >= 0 && write_token(fd, secret) == 0) {
		printf("starcloud: admin token written to %s\n", s->admin_token_file);
	} else {
		if (fd >= 0)
			sc_log_error("--admin-token-file %s: write failed; printing the token",
			             s->admin_token_file);
		printf("starcloud: admin token (shown once, store it now): %s\n", secret);
	}
	fflush(stdout);
	free(secret);
	return 0;
}

static int load_principal(json_t *rec, sc_principal_t *who)
{
	who->role = sc__role_parse(json_string_value(json_object_get(rec, "role")));
	snprintf(who->id, sizeof(who->id), "%s", json_string_value(json_object_get(rec, "id")));
	json_t *qs = json_object_get(rec, "queues"), *q;
	const char *node = json_string_value(json_object_get(rec, "node"));
	size_t i;
	const char *addr = json_string_value(json_object_get(rec, "address"));
	snprintf(who->node, sizeof(who->node), "%s", node ? node : "");
	snprintf(who->address, sizeof(who->address), "%s", addr ? addr : "");
	json_t *exp = json_object_get(rec, "expires");
	who->expires = json_is_integer(exp) ? json_integer_value(exp) : 0;
	if (who->role == SC_ROLE_AGENT && !who->node[0])
		return SC_EINVAL; /* an agent token acts for one node */
	who->nqueues = 0;
	json_array_foreach(qs, i, q)
	{
		if (who->nqueues == SC_MAX_TOKEN_QUEUES || !json_is_string(q))
			break;
		snprintf(who->queues[who->nqueues++], sizeof(who->queues[0]), "%s",
		         json_string_value(q));
	}
	return who->role == SC_ROLE_NONE ? SC_EINVAL : 0;
}

int sc__auth_expired(const sc_principal_t *who, int64_t now)
{
	return who->expires > 0 && now >= who->expires;
}

/* mTLS: a client certificate (verified against --tls-client-ca) whose
 * common name is "node:NAME" authenticates the agent of NAME, with no
 * token at all. */
#define CERT_NODE_PREFIX "node:"

static int cert_principal(sc_http_req_t *r, sc_principal_t *who)
{
	char cn[SC_MAX_NAME + 16];
	sc_http_peer_name(r, cn, sizeof(cn));
	if (strncmp(cn, CERT_NODE_PREFIX, strlen(CERT_NODE_PREFIX)) != 0 ||
	    !sc__name_valid(cn + strlen(CERT_NODE_PREFIX)))
		return SC_EINVAL;
	who->role = SC_ROLE_AGENT;
	snprintf(who->id, sizeof(who->id), "cert");
	snprintf(who->node, sizeof(who->node), "%.253s", cn + strlen(CERT_NODE_PREFIX));
	return 0;
}

/* With --agents-need-cert an agent token counts only on a connection that
 * also shows its node's certificate: a stolen token alone is not enough. */
static int agent_cert_ok(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *who)
{
	sc_principal_t cert;
	if (!s->sec.agents_need_cert || who->role != SC_ROLE_AGENT)
		return 1;
	memset(&cert, 0, sizeof(cert));
	return cert_principal(r, &cert) == 0 && strcmp(cert.node, who->node) == 0;
}

static int token_principal(sc_server_t *s, sc_http_req_t *r, sc_principal_t *who);

/* Fills who from the Authorization header, or from a client certificate
 * when there is none; 0, or SC_EINVAL (no valid credential). */
int sc__auth_check(sc_server_t *s, sc_http_req_t *r, sc_principal_t *who)
{
	memset(who, 0, sizeof(*who));
	if (!sc_http_header(r, "Authorization"))
		return cert_principal(r, who);
	int rc = token_principal(s, r, who);
	if (rc == 0 && !agent_cert_ok(s, r, who)) {
		memset(who, 0, sizeof(*who));
		return SC_EINVAL;
	}
	return rc;
}

static int token_principal(sc_server_t *s, sc_http_req_t *r, sc_principal_t *who)
{
	const char *h = sc_http_header(r, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return SC_EINVAL;
	const char *tok = h + 7;
	while (*tok == ' ')
		tok++;
	size_t n = strlen(tok);
	if (n < 8 || n > MAX_TOKEN_LEN)
		return SC_EINVAL;
	char hash[65], id[ID_LEN + 1];
	sc_sha256_hex(tok, n, hash);
	if (s->cache && sc__cache_token_get(s->cache, hash, who))
		return sc__auth_expired(who, (int64_t)time(NULL)) ? SC_EINVAL : 0;
	snprintf(id, sizeof(id), "%.*s", ID_LEN, hash);
	const char *text = s->cache ? sc__cache_token_record(s->cache, id) : NULL;
	if (!text)
		return SC_EINVAL;
	json_t *rec = json_loads(text, 0, NULL);
	int rc = SC_EINVAL;
	if (rec && digest_equal(json_string_value(json_object_get(rec, "hash")) ?: "", hash))
		rc = load_principal(rec, who);
	json_decref(rec);
	if (rc == 0 && s->cache)
		sc__cache_token_put(s->cache, hash, who);
	if (rc == 0 && sc__auth_expired(who, (int64_t)time(NULL)))
		rc = SC_EINVAL; /* kept until an admin deletes it, but refused */
	return rc;
}

int sc__auth_request(sc_server_t *s, sc_http_req_t *r, sc_principal_t *who)
{
	char msg[512];
	/* Before the token: a client too old to work with this server is told
	 * so, whatever its token, rather than failing later in stranger ways. */
	if (sc_version_check(sc_http_header(r, "User-Agent"), msg, sizeof(msg)) < 0) {
		memset(who, 0, sizeof(*who));
		sc__api_error(r, 400, "ClientTooOld", NULL, "%s", msg);
		return SC_ERANGE;
	}
	int rc = sc__auth_check(s, r, who);
	if (rc == SC_EUNAVAIL || rc == SC_EUNSURE) {
		/* The token could not be looked up: not the caller's fault. */
		sc__api_store_error(r, rc, "token");
		return rc;
	}
	if (rc < 0) {
		sc__api_error(r, 401, "Unauthorized", NULL, "a valid bearer token is required");
		return SC_EINVAL;
	}
	return 0;
}

int sc__auth_has_queue(const sc_principal_t *who, const char *queue)
{
	if (!queue)
		return 0;
	for (size_t i = 0; i < who->nqueues; i++)
		if (strcmp(who->queues[i], queue) == 0)
			return 1;
	return 0;
}

/* Node authorization (as Kubernetes' node authorizer): an agent sees a job
 * or deployment only while one of its pods is bound to the agent's node,
 * whatever its phase, so it can start, report and stop exactly those. */
static int bound_to(json_t *obj, const char *node)
{
	json_t *e;
	size_t i;
	json_array_foreach(json_object_get(json_object_get(obj, "status"), "pods"), i, e)
	{
		const char *n = json_string_value(json_object_get(e, "node"));
		if (n && strcmp(n, node) == 0)
			return 1;
	}
	return 0;
}

int sc__auth_can_see(const sc_principal_t *who, const sc_kind_t *k, json_t *obj)
{
	if (who->role == SC_ROLE_AGENT) {
		/* Other kinds: check_role (api.c) lets an agent write its own
		 * node only, and read none, so a write to another node is 403. */
		return k->queue_scoped ? bound_to(obj, who->node) : 1;
	}
	if (who->role != SC_ROLE_TENANT)
		return 1;
	if (k->queue_scoped)
		return sc__auth_has_queue(
		    who, json_string_value(json_object_get(json_object_get(obj, "spec"), "queue")));
	if (strcmp(k->kind, "Queue") == 0)
		return sc__auth_has_queue(who, json_string_value(json_object_get(
		                                   json_object_get(obj, "metadata"), "name")));
	if (strcmp(k->kind, "Event") == 0)
		return sc__auth_has_queue(who, json_string_value(json_object_get(obj, "queue")));
	return 1; /* nodes and priority classes are cluster facts tenants need */
}

/* ---------------------------------------------------------------------
 * /api/v1/tokens (admin only)
 * ------------------------------------------------------------------- */

/* An agent token names the one node it acts for; others name none. */
static int check_token_node(sc_http_req_t *r, json_t *req, int role)
{
	json_t *node = json_object_get(req, "node");
	if (role != SC_ROLE_AGENT && node) {
		sc__api_error(r, 400, "Invalid", "node", "node: only agent tokens name a node");
		return SC_EINVAL;
	}
	if (role == SC_ROLE_AGENT &&
	    (!json_is_string(node) || !sc__name_valid(json_string_value(node)))) {
		sc__api_error(r, 400, "Invalid", "node",
		              "node: an agent token needs the name of its node");
		return SC_EINVAL;
	}
	return 0;
}

/* Checks a token request {"role": ..., "queues": [...], "node": ...};
 * answers on error. */
static int parse_token_request(sc_http_req_t *r, json_t *req, int *role)
{
	const char *key;
	json_t *v, *q;
	size_t i;
	if (!json_is_object(req)) {
		sc__api_error(r, 400, "BadRequest", "", "expected a JSON object");
		return SC_EINVAL;
	}
	json_object_foreach(req, key, v)
	{
		if (strcmp(key, "role") != 0 && strcmp(key, "queues") != 0 &&
		    strcmp(key, "node") != 0 && strcmp(key, "address") != 0 &&
		    strcmp(key, "expiresIn") != 0) {
			sc__api_error(r, 400, "Invalid", key, "%s: unknown field", key);
			return SC_EINVAL;
		}
	}
	*role = sc__role_parse(json_string_value(json_object_get(req, "role")));
	if (*role == SC_ROLE_NONE) {
		sc__api_error(r, 400, "Invalid", "role",
		              "role: expected admin, tenant, viewer or agent");
		return SC_EINVAL;
	}
	json_t *qs = json_object_get(req, "queues");
	if (qs && (!json_is_array(qs) || json_array_size(qs) > SC_MAX_TOKEN_QUEUES)) {
		sc__api_error(r, 400, "Invalid", "queues", "queues: expected at most %d names",
		              SC_MAX_TOKEN_QUEUES);
		return SC_EINVAL;
	}
	json_array_foreach(qs, i, q)
	{
		if (!json_is_string(q) || !sc__name_valid(json_string_value(q))) {
			sc__api_error(r, 400, "Invalid", "queues",
			              "queues[%zu]: invalid queue name", i);
			return SC_EINVAL;
		}
	}
	if (*role == SC_ROLE_TENANT && json_array_size(qs) == 0) {
		sc__api_error(r, 400, "Invalid", "queues", "queues: a tenant token needs a queue");
		return SC_EINVAL;
	}
	return check_token_node(r, req, *role);
}

/* A token request waiting for the store (store.h): the answer, made now,
 * leaves once the record is written. */
typedef struct token_req {
	sc_http_req_t *r; /* NULL once the client left */
	json_t *answer;
	int ok; /* the status of success */
	char id[ID_LEN + 1];
} token_req_t;

static void token_gone(sc_http_req_t *r, void *ud)
{
	((token_req_t *)ud)->r = NULL;
}

static void token_written(const sc_store_res_t *res, void *ud)
{
	token_req_t *t = ud;
	if (t->r && res->rc == SC_ENOTFOUND)
		sc__api_error(t->r, 404, "NotFound", NULL, "token %s not found", t->id);
	else if (t->r && res->rc < 0)
		sc__api_store_error(t->r, res->rc, "token");
	else if (t->r)
		sc__api_json(t->r, t->ok, json_incref(t->answer));
	json_decref(t->answer);
	free(t);
}

static void token_write(sc_server_t *s, sc_http_req_t *r, const sc_store_op_t *op, json_t *answer,
                        int ok, const char *id)
{
	token_req_t *t = sc_xcalloc(1, sizeof(*t));
	t->r = r;
	t->answer = answer;
	t->ok = ok;
	snprintf(t->id, sizeof(t->id), "%s", id);
	sc_http_on_close(r, token_gone, t);
	sc_store_txn_async(s->store, op, 1, token_written, t);
}

/* address (agent tokens: the status port an admin fixes, HOST:PORT) and
 * expiresIn (a duration: the token is refused after it). */
static int parse_token_extras(sc_http_req_t *r, json_t *req, int role, sc_token_spec_t *spec)
{
	json_t *addr = json_object_get(req, "address"), *exp = json_object_get(req, "expiresIn");
	sc_hostport_t hp;
	if (addr && (role != SC_ROLE_AGENT || !json_is_string(addr) ||
	             strlen(json_string_value(addr)) > 256 ||
	             sc_parse_hostport(json_string_value(addr), &hp) < 0 || hp.port == 0)) {
		sc__api_error(r, 400, "Invalid", "address",
		              "address: only agent tokens fix an address, as HOST:PORT");
		return SC_EINVAL;
	}
	uint64_t ms = 0;
	if (exp && (!json_is_string(exp) ||
	            sc_parse_duration_ms(json_string_value(exp), 1000, 3650 * 86400e3, &ms) < 0)) {
		sc__api_error(r, 400, "Invalid", "expiresIn",
		              "expiresIn: expected a duration such as 24h (1s to 3650d)");
		return SC_EINVAL;
	}
	spec->address = json_string_value(addr);
	spec->expires = exp ? (int64_t)time(NULL) + (int64_t)((ms + 999) / 1000) : 0;
	return 0;
}

static void token_create(sc_server_t *s, sc_http_req_t *r)
{
	size_t len;
	const char *body = sc_http_body(r, &len);
	json_error_t jerr;
	json_t *req = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	int role;
	if (!req) {
		sc__api_error(r, 400, "BadRequest", "", "malformed JSON: %s", jerr.text);
		return;
	}
	sc_token_spec_t spec = {0};
	if (parse_token_request(r, req, &role) == 0 &&
	    parse_token_extras(r, req, role, &spec) == 0) {
		char *secret = NULL, id[32], key[128], *text = NULL;
		json_t *qs = json_object_get(req, "queues");
		const char *node = json_string_value(json_object_get(req, "node"));
		spec.role = role;
		spec.queues = qs;
		spec.node = node;
		int rc = sc__token_mint(&spec, &secret, id, sizeof(id), key, sizeof(key), &text);
		if (rc < 0) {
			sc__api_store_error(r, rc, "token");
		} else {
			json_t *out = json_pack("{s:s,s:s,s:s,s:o}", "token", secret, "id", id,
			                        "role", sc__role_name(role), "queues",
			                        qs ? json_incref(qs) : json_array());
			if (node)
				json_object_set_new(out, "node", json_string(node));
			if (spec.address)
				json_object_set_new(out, "address", json_string(spec.address));
			if (spec.expires)
				json_object_set_new(out, "expires", json_integer(spec.expires));
			sc_store_op_t op = {SC_STORE_PUT, key, text, SC_REV_ABSENT};
			token_write(s, r, &op, out, 201, id);
		}
		free(text);
		free(secret);
	}
	json_decref(req);
}

static void list_one(const char *text, void *ud)
{
	json_t *rec = json_loads(text, 0, NULL);
	if (!rec)
		return;
	json_object_del(rec, "hash"); /* never leaves the server */
	json_array_append_new(ud, rec);
}

static void token_list(sc_server_t *s, sc_http_req_t *r)
{
	json_t *items = json_array();
	sc__cache_token_records(s->cache, list_one, items);
	sc__api_json(r, 200, json_pack("{s:s,s:o}", "kind", "TokenList", "items", items));
}

static void token_delete(sc_server_t *s, sc_http_req_t *r, const char *id)
{
	char key[128];
	if (strlen(id) != ID_LEN || strspn(id, "0123456789abcdef") != ID_LEN) {
		sc__api_error(r, 404, "NotFound", NULL, "token not found");
		return;
	}
	snprintf(key, sizeof(key), TOKEN_PREFIX "%s", id);
	sc_store_op_t op = {SC_STORE_DELETE, key, NULL, SC_REV_ANY};
	token_write(s, r, &op, json_pack("{s:s}", "deleted", id), 200, id);
}

static void tokens(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *whop);

static void handle_tokens(sc_http_req_t *r, void *ud)
{
	sc_server_t *s = ud;
	sc_principal_t who;
	if (sc__auth_request(s, r, &who) == 0)
		tokens(s, r, &who);
	sc__audit_request(s, r, &who, sc_http_status(r));
}

static void tokens(sc_server_t *s, sc_http_req_t *r, const sc_principal_t *whop)
{
	sc_principal_t who = *whop;
	const char *m = sc_http_method(r);
	const char *rest = sc_http_path(r) + strlen(SC_API_PREFIX "tokens");
	/* Anyone may ask who they are; the CLI uses it for `token whoami`. */
	if (strcmp(rest, "/self") == 0 && strcmp(m, "GET") == 0) {
		json_t *qs = json_array();
		for (size_t i = 0; i < who.nqueues; i++)
			json_array_append_new(qs, json_string(who.queues[i]));
		json_t *self = json_pack("{s:s,s:s,s:o}", "id", who.id, "role",
		                         sc__role_name(who.role), "queues", qs);
		if (who.node[0])
			json_object_set_new(self, "node", json_string(who.node));
		if (who.address[0])
			json_object_set_new(self, "address", json_string(who.address));
		if (who.expires)
			json_object_set_new(self, "expires", json_integer(who.expires));
		sc__api_json(r, 200, self);
		return;
	}
	if (who.role != SC_ROLE_ADMIN) {
		sc__api_error(r, 403, "Forbidden", NULL, "only admins manage tokens");
		return;
	}
	if ((rest[0] == '\0' || strcmp(rest, "/") == 0) && strcmp(m, "POST") == 0)
		token_create(s, r);
	else if ((rest[0] == '\0' || strcmp(rest, "/") == 0) && strcmp(m, "GET") == 0)
		token_list(s, r);
	else if (rest[0] == '/' && strcmp(m, "DELETE") == 0)
		token_delete(s, r, rest + 1);
	else
		sc__api_error(r, 405, "MethodNotAllowed", NULL, "%s not allowed here", m);
}

int sc__auth_register(sc_server_t *s)
{
	return sc_http_route(s->http, NULL, SC_API_PREFIX "tokens", handle_tokens, s);
}
