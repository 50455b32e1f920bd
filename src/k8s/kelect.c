/* Leader election's requests: read the Lease every retry period, then
 * create, renew or take it as klease.c decides (see klease.h for the rules
 * and the fencing argument). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "k8s/k8s_int.h"
#include "starcloud/error.h"

static void lease_path(sc_k8s_t *k, char *buf, size_t size, bool item)
{
	snprintf(buf, size, "/apis/coordination.k8s.io/v1/namespaces/%s/leases%s%s", k->o.lease_ns,
	         item ? "/" : "", item ? k->o.lease_name : "");
}

static void became(sc_k8s_t *k, bool was)
{
	bool now = k->lease.leading;
	if (now && !was) {
		sc_log_info("leading (lease %s/%s, identity %s)", k->o.lease_ns, k->o.lease_name,
		            k->o.identity);
		sc__k8s_kick(k);
	} else if (!now && was) {
		sc_log_warn("lost the lease %s/%s: binding stops", k->o.lease_ns, k->o.lease_name);
		sc__kwriter_drop(k->writer);
		sc__kstatus_drop(k->status);
	}
}

static void write_done(int status, const char *body, size_t len, void *ud)
{
	sc_k8s_t *k = ud;
	bool was = k->lease.leading;
	char msg[300];
	k->el.busy = false;
	if (status == SC_ECANCELED)
		return; /* the client closed at shutdown */
	if (k->el.release) {
		if (k->el.released)
			k->el.released(k);
		return;
	}
	if (status == 200 || status == 201) {
		/* Keep what we wrote (its resourceVersion) for a release. */
		json_t *o = json_loadb(body, len, 0, NULL);
		sc_klease_parse(o, &k->el.rec);
		json_decref(o);
		sc_klease_won(&k->lease, k->el.sent_at);
	} else {
		if (status != 409)
			sc_log_warn("lease: %s",
			            status < 0 ? sc_strerror(status)
			                       : sc__k8s_status_msg(body, len, msg, sizeof(msg)));
		/* A conflict means someone else wrote since we read: not ours. */
		if (status == 409)
			sc_klease_lost(&k->lease);
	}
	became(k, was);
}

static void send_lease(sc_k8s_t *k, int action, const sc_klease_rec_t *rec, bool release)
{
	char path[512], now[48];
	sc__k8s_microtime(now, sizeof(now));
	json_t *b =
	    sc_klease_body(&k->lease, rec, action, k->o.lease_ns, k->o.lease_name, now, release);
	char *body = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	lease_path(k, path, sizeof(path), action != SC_KLEASE_CREATE);
	k->el.busy = true;
	k->el.release = release;
	k->el.sent_at = sc__k8s_now();
	long timeout = (long)(k->o.retry_period * 1000) + 1000;
	if (!sc__k8s_request(k, action == SC_KLEASE_CREATE ? "POST" : "PUT", path, NULL, body,
	                     strlen(body), timeout, 0, NULL, write_done, k))
		k->el.busy = false;
	free(body);
}

static void read_done(int status, const char *body, size_t len, void *ud)
{
	sc_k8s_t *k = ud;
	char msg[300];
	k->el.busy = false;
	if (k->stopping || status == SC_ECANCELED)
		return;
	if (status != 200 && status != 404) {
		sc_log_warn("lease: read failed: %s",
		            status < 0 ? sc_strerror(status)
		                       : sc__k8s_status_msg(body, len, msg, sizeof(msg)));
		return;
	}
	sc_klease_rec_t rec = {0};
	if (status == 200) {
		json_t *o = json_loadb(body, len, 0, NULL);
		sc_klease_parse(o, &rec);
		json_decref(o);
	}
	bool was = k->lease.leading;
	int action = sc_klease_decide(&k->lease, &rec, sc__k8s_now());
	became(k, was);
	if (action != SC_KLEASE_WAIT) {
		k->el.rec = rec;
		send_lease(k, action, &rec, false);
	}
}

static void tick(uv_timer_t *t)
{
	sc_k8s_t *k = t->data;
	char path[512];
	/* A lease that ran out while we could not renew (the process was
	 * stopped, the API server was away) ends leadership now, before any
	 * answer comes. */
	if (k->lease.leading && !sc_klease_valid(&k->lease, sc__k8s_now())) {
		sc_klease_lost(&k->lease);
		became(k, true);
	}
	if (k->el.busy || k->stopping)
		return;
	lease_path(k, path, sizeof(path), true);
	k->el.busy = true;
	long timeout = (long)(k->o.retry_period * 1000) + 1000;
	if (!sc__k8s_request(k, "GET", path, NULL, NULL, 0, timeout, 0, NULL, read_done, k))
		k->el.busy = false;
}

void sc__kelect_start(sc_k8s_t *k)
{
	k->lease.identity = k->o.identity;
	k->lease.duration = k->o.lease_duration;
	k->lease.renew_deadline = k->o.renew_deadline;
	uv_timer_init(k->loop, &k->lease_timer);
	k->lease_timer.data = k;
	uint64_t every = (uint64_t)(k->o.retry_period * 1000);
	uv_timer_start(&k->lease_timer, tick, 0, every ? every : 1000);
}

bool sc__kelect_release(sc_k8s_t *k, void (*released)(sc_k8s_t *k))
{
	uv_timer_stop(&k->lease_timer);
	if (!k->lease.leading || !k->el.rec.exists)
		return false;
	sc_klease_rec_t rec = k->el.rec;
	/* Renew on the last record we wrote: read it fresh is not worth a
	 * round trip at shutdown; a 409 only means someone took it already. */
	k->el.released = released;
	sc_klease_lost(&k->lease);
	send_lease(k, SC_KLEASE_RENEW, &rec, true);
	return k->el.busy;
}
