/* The `schedule -o json` shape (interface.md), shared by the CLI and the
 * server: decisions of the core turned into a JSON object. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "starcloud/manifest.h"

const char *sc_eviction_action_name(int action)
{
	switch (action) {
	case SC_ACT_ALLOCATE:
		return "allocate";
	case SC_ACT_CONSOLIDATE:
		return "consolidate";
	case SC_ACT_RECLAIM:
		return "reclaim";
	case SC_ACT_PREEMPT:
		return "preempt";
	case SC_ACT_STALE_GANG:
		return "stale-gang";
	case SC_ACT_COMPACT:
		return "compaction";
	default:
		return "unknown";
	}
}

/* Whole values print as integers (70, not 70.0), which is what users and
 * the scenario files compare against. */
static json_t *number(double v)
{
	if (v == floor(v) && fabs(v) < 9e15)
		return json_integer((json_int_t)v);
	return json_real(v);
}

/* Sets key to v, which is consumed; any failure marks *ok false. */
static void put(json_t *o, const char *key, json_t *v, bool *ok)
{
	if (!v || json_object_set_new(o, key, v))
		*ok = false;
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static const char *job_name(const sc_snapshot_t *s, size_t job)
{
	return job < s->njobs ? s->jobs[job].name : "?";
}

static json_t *binding_json(const sc_snapshot_t *s, const sc_binding_t *b)
{
	json_t *o = json_object(), *gpus = json_array();
	bool ok = o && gpus;
	for (size_t i = 0; ok && i < b->ngpus; i++)
		ok = json_array_append_new(gpus, json_integer(b->gpus[i])) == 0;
	if (!ok) {
		json_decref(gpus);
		json_decref(o);
		return NULL;
	}
	put(o, "job", json_string(job_name(s, b->job)), &ok);
	put(o, "pod", json_string(b->pod), &ok);
	put(o, "node", json_string(b->node), &ok);
	put(o, "gpus", gpus, &ok);
	put(o, "gpuShare", b->gpu_milli ? json_integer(b->gpu_milli) : json_null(), &ok);
	if (b->gpu_memory)
		put(o, "gpuMemory", json_integer(b->gpu_memory), &ok);
	if (b->mig_profile) {
		json_t *m = json_object();
		bool mok = m != NULL;
		if (m) {
			put(m, "gpu", json_integer(b->mig_gpu), &mok);
			put(m, "profile", json_string(b->mig_profile), &mok);
			put(m, "start", json_integer(b->mig_start), &mok);
		}
		put(o, "mig", m, &ok);
		ok = ok && mok;
	} else {
		put(o, "mig", json_null(), &ok);
	}
	if (b->pipelined)
		put(o, "pipelined", json_true(), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *eviction_json(const sc_snapshot_t *s, const sc_eviction_t *e)
{
	json_t *o = json_object();
	bool ok = o != NULL;
	if (!o)
		return NULL;
	put(o, "job", json_string(job_name(s, e->job)), &ok);
	put(o, "pod", json_string(e->pod), &ok);
	put(o, "node", str_or_null(e->node), &ok);
	put(o, "action", json_string(sc_eviction_action_name(e->action)), &ok);
	put(o, "by", str_or_null(e->by), &ok);
	put(o, "reason", json_string(e->reason ? e->reason : ""), &ok);
	if (e->to)
		put(o, "to", json_string(e->to), &ok);
	if (e->grace_period > 0)
		put(o, "gracePeriod", json_integer((json_int_t)e->grace_period), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* {"nodes": [...], "expectedStart": RFC 3339 or null (no runtimes known)} */
json_t *sc_reservation_json(const sc_pending_t *p)
{
	json_t *o = json_object(), *nodes = json_array();
	bool ok = o && nodes;
	for (size_t k = 0; ok && k < p->nreserved; k++)
		ok = json_array_append_new(nodes, json_string(p->reserved_nodes[k])) == 0;
	if (ok) {
		json_object_set_new(o, "nodes", nodes);
		nodes = NULL;
		char when[32];
		time_t t = (time_t)p->expected_start;
		struct tm tm;
		if (p->expected_start >= 0 && gmtime_r(&t, &tm) &&
		    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
			ok = json_object_set_new(o, "expectedStart", json_string(when)) == 0;
		else
			ok = json_object_set_new(o, "expectedStart", json_null()) == 0;
	}
	json_decref(nodes);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *pending_json(const sc_snapshot_t *s, const sc_pending_t *p)
{
	json_t *o = json_object();
	bool ok = o != NULL;
	if (!o)
		return NULL;
	put(o, "job", json_string(job_name(s, p->job)), &ok);
	put(o, "reason", json_string(p->reason ? p->reason : ""), &ok);
	if (ok && p->nreserved)
		put(o, "reservation", sc_reservation_json(p), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* {gpu, cpu, memory} in user units: devices, cores, bytes. Negative values
 * (unlimited quota or limit) stay -1. */
static json_t *resources_json(const double v[SC_RES_COUNT])
{
	json_t *o = json_object();
	bool ok = o != NULL;
	if (!o)
		return NULL;
	put(o, "gpu", number(v[SC_RES_GPU] < 0 ? -1 : v[SC_RES_GPU]), &ok);
	put(o, "cpu", number(v[SC_RES_CPU] < 0 ? -1 : v[SC_RES_CPU] / 1000.0), &ok);
	put(o, "memory", number(v[SC_RES_MEM] < 0 ? -1 : round(v[SC_RES_MEM])), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *queue_json(const sc_queue_report_t *q)
{
	json_t *o = json_object();
	bool ok = o != NULL;
	if (!o)
		return NULL;
	put(o, "name", json_string(q->name), &ok);
	if (q->parent)
		put(o, "parent", json_string(q->parent), &ok);
	put(o, "leaf", json_boolean(q->leaf), &ok);
	put(o, "fairShare", resources_json(q->fair_share), &ok);
	put(o, "allocated", resources_json(q->allocated), &ok);
	put(o, "requested", resources_json(q->requested), &ok);
	put(o, "quota", resources_json(q->quota), &ok);
	put(o, "limit", resources_json(q->limit), &ok);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *sc_decisions_to_json(const sc_snapshot_t *s, const sc_decisions_t *d)
{
	json_t *out = json_object();
	json_t *b = json_array(), *e = json_array(), *p = json_array(), *q = json_array();
	bool ok = out && b && e && p && q;
	for (size_t i = 0; ok && i < d->nbindings; i++)
		ok = json_array_append_new(b, binding_json(s, &d->bindings[i])) == 0;
	for (size_t i = 0; ok && i < d->nevictions; i++)
		ok = json_array_append_new(e, eviction_json(s, &d->evictions[i])) == 0;
	for (size_t i = 0; ok && i < d->npending; i++)
		ok = json_array_append_new(p, pending_json(s, &d->pending[i])) == 0;
	for (size_t i = 0; ok && i < d->nqueues; i++)
		ok = json_array_append_new(q, queue_json(&d->queues[i])) == 0;
	if (ok) {
		put(out, "bindings", b, &ok);
		put(out, "evictions", e, &ok);
		put(out, "pending", p, &ok);
		put(out, "queues", q, &ok);
		if (ok)
			return out;
		json_decref(out);
		return NULL;
	}
	json_decref(b);
	json_decref(e);
	json_decref(p);
	json_decref(q);
	json_decref(out);
	return NULL;
}
