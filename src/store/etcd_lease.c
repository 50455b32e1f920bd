/* Leases and the leader key of the etcd backend: the primitives the
 * server's leader election (src/server/ha.c) is made of. A leader holds
 * the leader key, which is attached to its lease: when the leader stops
 * renewing (killed, stopped, cut off), etcd deletes the key after the TTL
 * and the next campaign wins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"
#include "store/etcd_int.h"

static int lease_call(sc_store_t *s, const char *path, json_t *req, json_t **resp)
{
	const char *lk;
	int rc = sc__etcd_call(sc__etcd_store_conn(s, &lk), path, req, resp);
	json_decref(req);
	return rc;
}

int sc_etcd_lease_grant(sc_store_t *s, int64_t ttl_s, int64_t *id)
{
	json_t *req = json_object(), *resp = NULL;
	sc__etcd_set_int(req, "TTL", ttl_s);
	int rc = lease_call(s, "/v3/lease/grant", req, &resp);
	if (rc == 0) {
		*id = sc__etcd_int(resp, "ID");
		if (*id == 0)
			rc = SC_EIO;
	}
	json_decref(resp);
	return rc;
}

int sc_etcd_lease_keepalive(sc_store_t *s, int64_t id, int64_t *ttl_left)
{
	json_t *req = json_object(), *resp = NULL;
	sc__etcd_set_int(req, "ID", id);
	*ttl_left = 0;
	int rc = lease_call(s, "/v3/lease/keepalive", req, &resp);
	if (rc == 0) {
		/* A stream of one answer: {"result":{"ID":..,"TTL":..}}; an
		 * expired lease answers with TTL 0 (omitted). */
		*ttl_left = sc__etcd_int(json_object_get(resp, "result"), "TTL");
		if (*ttl_left <= 0)
			rc = SC_ENOTFOUND;
	}
	json_decref(resp);
	return rc;
}

int sc_etcd_lease_revoke(sc_store_t *s, int64_t id)
{
	json_t *req = json_object(), *resp = NULL;
	sc__etcd_set_int(req, "ID", id);
	int rc = lease_call(s, "/v3/lease/revoke", req, &resp);
	json_decref(resp);
	return rc;
}

static json_t *leader_compare(const char *key, const char *target, const char *field, int64_t v)
{
	json_t *c = json_object();
	sc__etcd_set_b64(c, "key", key);
	json_object_set_new(c, "target", json_string(target));
	json_object_set_new(c, "result", json_string("EQUAL"));
	sc__etcd_set_int(c, field, v);
	return c;
}

/* Reads who holds the key from the failure branch's range. */
static int holder_of(json_t *resp, int64_t lease, int64_t *mod_rev, char **holder)
{
	json_t *rr = json_object_get(json_array_get(json_object_get(resp, "responses"), 0),
	                             "response_range");
	json_t *kv = json_array_get(json_object_get(rr, "kvs"), 0);
	if (!kv)
		return 0; /* deleted in between: the next campaign decides */
	if (sc__etcd_int(kv, "lease") == lease) {
		*mod_rev = sc__etcd_int(kv, "mod_revision");
		return 1;
	}
	const char *v = json_string_value(json_object_get(kv, "value"));
	if (holder && v)
		sc__b64_dec(v, holder, NULL);
	return 0;
}

int sc_etcd_campaign(sc_store_t *s, int64_t lease, const char *value, int64_t *mod_rev,
                     char **holder)
{
	const char *lk;
	sc__etcd_store_conn(s, &lk);
	json_t *put = json_object(), *get = json_object(), *resp = NULL;
	sc__etcd_set_b64(put, "key", lk);
	sc__etcd_set_b64(put, "value", value);
	sc__etcd_set_int(put, "lease", lease);
	sc__etcd_set_b64(get, "key", lk);
	/* Create-if-absent: create_revision == 0 only when no one holds it. */
	json_t *req = json_pack("{s:[o],s:[{s:o}],s:[{s:o}]}", "compare",
	                        leader_compare(lk, "CREATE", "create_revision", 0), "success",
	                        "request_put", put, "failure", "request_range", get);
	if (holder)
		*holder = NULL;
	int rc = lease_call(s, "/v3/kv/txn", req, &resp);
	if (rc == 0 && json_is_true(json_object_get(resp, "succeeded"))) {
		*mod_rev = sc__etcd_int(json_object_get(resp, "header"), "revision");
		rc = 1;
	} else if (rc == 0) {
		rc = holder_of(resp, lease, mod_rev, holder);
	}
	json_decref(resp);
	return rc;
}

int sc_etcd_resign(sc_store_t *s, int64_t mod_rev)
{
	const char *lk;
	sc__etcd_store_conn(s, &lk);
	json_t *del = json_object(), *resp = NULL;
	sc__etcd_set_b64(del, "key", lk);
	json_t *req = json_pack("{s:[o],s:[{s:o}]}", "compare",
	                        leader_compare(lk, "MOD", "mod_revision", mod_rev), "success",
	                        "request_delete_range", del);
	int rc = lease_call(s, "/v3/kv/txn", req, &resp);
	json_decref(resp);
	return rc;
}
