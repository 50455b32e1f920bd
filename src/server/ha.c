/* Leader election, fencing, /readyz and HA metrics (see ha.h). */
#include "server/ha.h"
#include "base/alloc.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/buf.h"
#include "starcloud/error.h"
#include "store/store_etcd.h"
#include "store/store_sqlite.h"

struct sc_ha {
	sc_server_t *s;
	uv_timer_t tick;
	uv_poll_t poll;
	sc_store_watch_t *kick_watch;
	int etcd;
	int ticking, polling;
	int64_t ttl;
	int64_t lease;
	uint64_t renewed_ms; /* uv_now of the last keepalive */
	int leader;
	int64_t leader_rev; /* mod_revision of our leader key: the fence */
	uint64_t fenced_seen;
	uint64_t leader_changes; /* this server gained or lost leadership */
	int store_ok;
	char id[200];
	char holder[256];     /* the leader key's value when another leads */
	uint64_t renew_ok_ms; /* uv_now of the last lease renewal etcd answered */
	/* While etcd does not answer, a probe on a worker thread asks it until
	 * it does; the loop thread never waits for it (docs/HA.md). */
	sc_etcd_probe_t *probe;
	uv_work_t probe_req;
	int probing, probe_rc, freed;
	/* The tick's lease renewal and campaign wait for etcd on the store's
	 * calls thread (sc_store_run_async), one at a time. */
	int campaigning;
};

int sc__ha_open_store(const char *url, const char *data_dir, const char *etcd_prefix,
                      sc_store_t **out)
{
	return sc__ha_open_store_mode(url, data_dir, etcd_prefix, 0, out);
}

int sc__ha_open_store_mode(const char *url, const char *data_dir, const char *etcd_prefix,
                           int readonly, sc_store_t **out)
{
	if (!url)
		return data_dir ? sc_store_sqlite_open_mode(data_dir, readonly, out) : SC_EINVAL;
	if (strncmp(url, "sqlite:", 7) == 0 && url[7])
		return sc_store_sqlite_open_mode(url + 7, readonly, out);
	if (strncmp(url, "etcd://", 7) == 0)
		return sc_store_etcd_open_mode(
		    url + 7, etcd_prefix ? etcd_prefix : SC_ETCD_DEFAULT_PREFIX, readonly, out);
	return SC_EINVAL;
}

static void step_down(sc_ha_t *ha, const char *why)
{
	if (!ha->leader)
		return;
	ha->leader = 0;
	ha->leader_rev = 0;
	ha->leader_changes++;
	sc_log_warn("%s: no longer the leader (%s)", ha->id, why);
}

static void become_leader(sc_ha_t *ha, int64_t rev)
{
	ha->leader_rev = rev;
	if (ha->leader)
		return;
	ha->leader = 1;
	ha->leader_changes++;
	ha->holder[0] = '\0';
	sc_log_info("%s: elected leader (leader key revision %lld)", ha->id, (long long)rev);
	sc__sched_kick(ha->s);
}

/* A leader whose lease may have run out without a renewal etcd answered
 * gives leadership up: another server may hold the key once etcd is back,
 * and until then nothing it writes goes through anyway. */
static void lease_check(sc_ha_t *ha, uint64_t now)
{
	if (ha->leader && now - ha->renew_ok_ms >= (uint64_t)ha->ttl * 1000)
		step_down(ha, "the lease could not be renewed (etcd does not answer)");
}

/* One round of the election, run where etcd may be waited for (the
 * store's calls thread): it touches only this, never the sc_ha_t. */
typedef struct campaign {
	sc_ha_t *ha;
	int64_t ttl;
	int64_t lease; /* in: the lease held (0: none); out: the lease now */
	char id[200];
	uint64_t started_ms; /* uv_now when the round began */
	int lease_rc;        /* the renewal's (or grant's) outcome */
	int expired;         /* the lease held had gone */
	int camp_rc;         /* sc_etcd_campaign's */
	int64_t rev;
	char *holder; /* malloc'd */
} campaign_t;

static void ha_maybe_free(sc_ha_t *ha)
{
	if (!ha->freed || ha->probing || ha->campaigning)
		return;
	sc_etcd_probe_free(ha->probe);
	free(ha);
}

/* Renews the lease (or gets one), then claims or re-checks the key. */
static void campaign_run(sc_store_t *st, void *ud)
{
	campaign_t *c = ud;
	int64_t left = 0;
	int rc = c->lease ? sc_etcd_lease_keepalive(st, c->lease, &left)
	                  : sc_etcd_lease_grant(st, c->ttl, &c->lease);
	if (rc == SC_ENOTFOUND) {
		c->expired = 1;
		c->lease = 0;
		rc = sc_etcd_lease_grant(st, c->ttl, &c->lease);
	}
	c->lease_rc = rc;
	c->camp_rc = SC_EUNAVAIL;
	if (rc < 0)
		return;
	char value[400];
	snprintf(value, sizeof(value), "{\"id\":\"%s\",\"lease\":\"%lld\"}", c->id,
	         (long long)c->lease);
	c->camp_rc = sc_etcd_campaign(st, c->lease, value, &c->rev, &c->holder);
}

/* Back on the loop thread: what the round found. */
static void campaign_done(const sc_store_res_t *res, void *ud)
{
	campaign_t *c = ud;
	sc_ha_t *ha = c->ha;
	ha->campaigning = 0;
	if (ha->freed || !ha->ticking) {
		/* Stopping: the lease is revoked by sc__ha_stop (or lapses). */
		if (!ha->freed && res->rc == 0 && c->lease_rc == 0)
			ha->lease = c->lease;
		free(c->holder);
		free(c);
		ha_maybe_free(ha);
		return;
	}
	if (res->rc < 0)
		c->lease_rc = res->rc; /* the store closed before it ran */
	if (c->expired)
		step_down(ha, "lease expired");
	ha->lease = c->lease_rc == 0 ? c->lease : c->expired ? 0 : ha->lease;
	ha->store_ok = c->lease_rc == 0;
	if (c->lease_rc < 0) {
		lease_check(ha, uv_now(ha->s->loop));
	} else {
		ha->renew_ok_ms = c->started_ms;
		if (c->camp_rc == 1) {
			become_leader(ha, c->rev);
		} else if (c->camp_rc == 0) {
			step_down(ha, "another server holds the leader key");
			snprintf(ha->holder, sizeof(ha->holder), "%s", c->holder ? c->holder : "");
		}
	}
	free(c->holder);
	free(c);
}

static void campaign(sc_ha_t *ha)
{
	if (ha->campaigning)
		return;
	campaign_t *c = sc_xcalloc(1, sizeof(*c));
	c->ha = ha;
	c->ttl = ha->ttl;
	c->lease = ha->lease;
	c->started_ms = uv_now(ha->s->loop);
	snprintf(c->id, sizeof(c->id), "%s", ha->id);
	ha->campaigning = 1;
	sc_store_run_async(ha->s->store, campaign_run, campaign_done, c);
}

/* The lease is renewed three times per TTL, so one lost or slow call does
 * not cost it; a follower also tries for the key every TICK_MS, so it
 * takes over within TICK_MS of the old leader's key expiring. */
#define TICK_MS 250

static void probe_work(uv_work_t *w)
{
	sc_ha_t *ha = w->data;
	ha->probe_rc = sc_etcd_probe_run(ha->probe);
}

static void probe_done(uv_work_t *w, int status)
{
	sc_ha_t *ha = w->data;
	ha->probing = 0;
	if (ha->freed) {
		ha_maybe_free(ha);
		return;
	}
	if (status == 0 && ha->probe_rc == 0 && sc_store_etcd_down(ha->s->store)) {
		sc_log_info("%s: etcd answers again: serving", ha->id);
		sc_store_etcd_up(ha->s->store);
		ha->renewed_ms = 0; /* renew (or campaign) at the next tick */
	}
}

/* etcd stopped answering: ask it from a worker thread until it does. */
static void probe_start(sc_ha_t *ha)
{
	if (ha->probing)
		return;
	if (!ha->probe && !(ha->probe = sc_store_etcd_probe_new(ha->s->store)))
		return;
	ha->probe_req.data = ha;
	if (uv_queue_work(ha->s->loop, &ha->probe_req, probe_work, probe_done) == 0)
		ha->probing = 1;
}

static void on_tick(uv_timer_t *t)
{
	sc_ha_t *ha = t->data;
	uint64_t now = uv_now(ha->s->loop);
	/* Answers waiting for the watch are delivered by the clock too. */
	sc_store_dispatch(ha->s->store);
	if (sc_store_etcd_down(ha->s->store)) {
		ha->store_ok = 0;
		lease_check(ha, now);
		probe_start(ha);
		return;
	}
	if (ha->campaigning) {
		/* A renewal stuck behind a slow call: give leadership up once
		 * the lease may have lapsed, as if etcd did not answer. */
		lease_check(ha, now);
		return;
	}
	if (!ha->leader || !ha->lease || now - ha->renewed_ms >= (uint64_t)ha->ttl * 1000 / 3) {
		ha->renewed_ms = now;
		campaign(ha);
	}
}

/* Changes from the watch and answers from the calls thread. */
static void on_poll(uv_poll_t *p, int status, int events)
{
	sc_ha_t *ha = p->data;
	sc_store_dispatch(ha->s->store);
}

/* Another server's write to an object the scheduler reads: run a cycle. */
static void on_change(const sc_store_event_t *ev, void *ud)
{
	sc_ha_t *ha = ud;
	static const char *const kinds[] = {"jobs/", "nodes/", "queues/", "priorityclasses/",
	                                    "deployments/"};
	const char *k = ev->key + strlen(SC_KEY_PREFIX);
	for (size_t i = 0; ha->leader && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strncmp(k, kinds[i], strlen(kinds[i])) == 0)
			sc__sched_kick(ha->s);
}

int sc__ha_start(sc_server_t *s, const char *id, int ttl_s)
{
	sc_ha_t *ha = sc_calloc(1, sizeof(*ha));
	if (!ha)
		return SC_ENOMEM;
	ha->s = s;
	s->ha = ha;
	ha->etcd = sc_store_is_etcd(s->store);
	ha->ttl = ttl_s;
	ha->store_ok = 1;
	snprintf(ha->id, sizeof(ha->id), "%s", id);
	if (!ha->etcd) {
		ha->leader = 1;
		return 0;
	}
	int rc = sc_store_watch(s->store, SC_KEY_PREFIX, sc_store_revision(s->store), on_change, ha,
	                        &ha->kick_watch);
	if (rc < 0)
		return rc;
	uv_poll_init(s->loop, &ha->poll, sc_store_poll_fd(s->store));
	ha->poll.data = ha;
	uv_poll_start(&ha->poll, UV_READABLE, on_poll);
	ha->polling = 1;
	uv_timer_init(s->loop, &ha->tick);
	ha->tick.data = ha;
	uv_timer_start(&ha->tick, on_tick, 0, TICK_MS);
	ha->ticking = 1;
	return 0;
}

void sc__ha_stop(sc_server_t *s)
{
	sc_ha_t *ha = s->ha;
	if (!ha)
		return;
	if (ha->ticking)
		uv_close((uv_handle_t *)&ha->tick, NULL);
	if (ha->polling)
		uv_close((uv_handle_t *)&ha->poll, NULL);
	ha->ticking = ha->polling = 0;
	/* Every call made so far is answered first (a round in flight may
	 * have got a new lease, which is revoked below). */
	if (ha->etcd)
		sc_store_drain(s->store);
	/* Resigning hands over at once instead of after the TTL. */
	if (ha->etcd && ha->leader)
		sc_etcd_resign(s->store, ha->leader_rev);
	if (ha->etcd && ha->lease)
		sc_etcd_lease_revoke(s->store, ha->lease);
	ha->leader = 0;
	ha->lease = 0;
}

void sc__ha_free(sc_server_t *s)
{
	sc_ha_t *ha = s->ha;
	s->ha = NULL;
	if (!ha)
		return;
	/* A probe or a round still out frees it when it ends (if the loop
	 * runs again, or the store closes). */
	ha->freed = 1;
	ha_maybe_free(ha);
}

/* A refused write means someone else leads: stop at once rather than at
 * the next tick. */
static void check_fenced(sc_ha_t *ha)
{
	sc_etcd_stats_t st;
	sc_store_etcd_stats(ha->s->store, &st);
	if (st.fenced > ha->fenced_seen) {
		ha->fenced_seen = st.fenced;
		step_down(ha, "a write was fenced by etcd");
	}
}

int sc__ha_leader_begin(sc_server_t *s)
{
	sc_ha_t *ha = s->ha;
	if (!ha || !ha->etcd)
		return 1;
	check_fenced(ha);
	if (!ha->leader)
		return 0;
	sc_store_etcd_fence(s->store, ha->leader_rev);
	return 1;
}

void sc__ha_leader_end(sc_server_t *s)
{
	sc_ha_t *ha = s->ha;
	if (!ha || !ha->etcd)
		return;
	sc_store_etcd_fence(s->store, 0);
	check_fenced(ha);
}

int sc__ha_is_leader(sc_server_t *s)
{
	return !s->ha || s->ha->leader;
}

/* A /readyz waiting for etcd to answer a quorum read. */
typedef struct readyz {
	sc_server_t *s;
	sc_http_req_t *r; /* NULL once the client left */
} readyz_t;

static void readyz_answer(sc_server_t *s, sc_http_req_t *r, int reachable)
{
	sc_ha_t *ha = s->ha;
	int etcd = ha && ha->etcd;
	/* A follower serves the API as soon as the store answers; with
	 * SQLite the server waits for its first cycle. */
	int ready = etcd ? reachable : s->ready;
	json_t *doc =
	    json_pack("{s:b,s:b,s:s,s:b,s:s,s:s}", "ready", ready, "leader", sc__ha_is_leader(s),
	              "store", etcd ? "etcd" : "sqlite", "storeReachable", reachable, "id",
	              ha ? ha->id : "", "leaderHolder", ha && !ha->leader ? ha->holder : "");
	sc__api_json(r, ready ? 200 : 503, doc);
}

static void readyz_gone(sc_http_req_t *r, void *ud)
{
	((readyz_t *)ud)->r = NULL;
}

static void readyz_pinged(const sc_store_res_t *res, void *ud)
{
	readyz_t *q = ud;
	if (q->r)
		readyz_answer(q->s, q->r, res->rc == 0 && !sc_store_etcd_down(q->s->store));
	free(q);
}

void sc__ha_readyz(sc_server_t *s, sc_http_req_t *r)
{
	sc_ha_t *ha = s->ha;
	if (!ha || !ha->etcd || sc_store_etcd_down(s->store)) {
		readyz_answer(s, r, !ha || !ha->etcd);
		return;
	}
	/* Asked of etcd on the store's calls thread: the loop goes on. */
	readyz_t *q = sc_xcalloc(1, sizeof(*q));
	q->s = s;
	q->r = r;
	sc_http_on_close(r, readyz_gone, q);
	sc_store_ping_async(s->store, readyz_pinged, q);
}

int sc__ha_store_down(sc_server_t *s)
{
	return s->ha && s->ha->etcd && sc_store_etcd_down(s->store);
}

void sc__ha_metrics(sc_server_t *s, sc_buf_t *b)
{
	sc_ha_t *ha = s->ha;
	sc_buf_printf(b,
	              "# HELP starcloud_ha_leader 1 when this server is the leader.\n"
	              "# TYPE starcloud_ha_leader gauge\nstarcloud_ha_leader %d\n"
	              "# HELP starcloud_ha_leader_changes_total Leadership gained or lost here.\n"
	              "# TYPE starcloud_ha_leader_changes_total counter\n"
	              "starcloud_ha_leader_changes_total %llu\n",
	              sc__ha_is_leader(s), ha ? (unsigned long long)ha->leader_changes : 0ULL);
	if (!ha || !ha->etcd)
		return;
	sc_etcd_stats_t stats, *st = &stats;
	sc_store_etcd_stats(s->store, st);
	sc_buf_printf(b,
	              "# HELP starcloud_ha_fenced_writes_total Writes etcd refused: not leader.\n"
	              "# TYPE starcloud_ha_fenced_writes_total counter\n"
	              "starcloud_ha_fenced_writes_total %llu\n"
	              "# HELP starcloud_store_errors_total Store calls that failed.\n"
	              "# TYPE starcloud_store_errors_total counter\n"
	              "starcloud_store_errors_total{store=\"etcd\"} %llu\n"
	              "# HELP starcloud_store_failovers_total Switches to another etcd endpoint.\n"
	              "# TYPE starcloud_store_failovers_total counter\n"
	              "starcloud_store_failovers_total %llu\n"
	              "# HELP starcloud_store_calls_pending Store calls the loop made and "
	              "waits for (on the store's calls thread).\n"
	              "# TYPE starcloud_store_calls_pending gauge\n"
	              "starcloud_store_calls_pending{store=\"etcd\"} %llu\n"
	              "# HELP starcloud_store_blocking_calls_total Store calls a thread waited "
	              "for while the calls thread ran (the loop's are bugs).\n"
	              "# TYPE starcloud_store_blocking_calls_total counter\n"
	              "starcloud_store_blocking_calls_total{store=\"etcd\"} %llu\n"
	              "# HELP starcloud_store_request_duration_seconds Store call latency.\n"
	              "# TYPE starcloud_store_request_duration_seconds histogram\n",
	              (unsigned long long)st->fenced, (unsigned long long)st->errors,
	              (unsigned long long)st->failovers, (unsigned long long)st->pending,
	              (unsigned long long)st->blocking);
	unsigned long long cum = 0;
	for (size_t i = 0; i < SC_ETCD_LAT_BUCKETS; i++) {
		cum += st->lat[i];
		sc_buf_printf(b,
		              "starcloud_store_request_duration_seconds_bucket{store=\"etcd\","
		              "le=\"%g\"} %llu\n",
		              sc_etcd_lat_bounds[i], cum);
	}
	cum += st->lat[SC_ETCD_LAT_BUCKETS];
	sc_buf_printf(b,
	              "starcloud_store_request_duration_seconds_bucket{store=\"etcd\",le=\"+Inf\"} "
	              "%llu\nstarcloud_store_request_duration_seconds_sum{store=\"etcd\"} %g\n"
	              "starcloud_store_request_duration_seconds_count{store=\"etcd\"} %llu\n",
	              cum, st->lat_sum, cum);
}
