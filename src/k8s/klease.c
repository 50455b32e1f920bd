/* Leader election decisions (see klease.h). Pure: no I/O, no clock. */
#include "k8s/klease.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void copy_str(char *dst, size_t size, json_t *v)
{
	snprintf(dst, size, "%s", json_is_string(v) ? json_string_value(v) : "");
}

void sc_klease_parse(json_t *obj, sc_klease_rec_t *rec)
{
	memset(rec, 0, sizeof(*rec));
	json_t *md = json_object_get(obj, "metadata"), *spec = json_object_get(obj, "spec");
	if (!json_is_object(md))
		return;
	rec->exists = true;
	copy_str(rec->rv, sizeof(rec->rv), json_object_get(md, "resourceVersion"));
	copy_str(rec->holder, sizeof(rec->holder), json_object_get(spec, "holderIdentity"));
	copy_str(rec->renew, sizeof(rec->renew), json_object_get(spec, "renewTime"));
	copy_str(rec->acquire, sizeof(rec->acquire), json_object_get(spec, "acquireTime"));
	json_t *d = json_object_get(spec, "leaseDurationSeconds");
	rec->duration = json_is_integer(d) ? json_integer_value(d) : 0;
	json_t *t = json_object_get(spec, "leaseTransitions");
	rec->transitions = json_is_integer(t) ? json_integer_value(t) : 0;
}

static bool same(const sc_klease_rec_t *a, const sc_klease_rec_t *b)
{
	return strcmp(a->holder, b->holder) == 0 && strcmp(a->renew, b->renew) == 0 &&
	       strcmp(a->rv, b->rv) == 0 && a->duration == b->duration;
}

int sc_klease_decide(sc_klease_t *l, const sc_klease_rec_t *rec, double now)
{
	if (!rec->exists)
		return SC_KLEASE_CREATE;
	if (!l->observed || !same(&l->obs, rec)) {
		l->obs = *rec;
		l->observed = true;
		l->observed_at = now;
	}
	if (strcmp(rec->holder, l->identity) == 0)
		return SC_KLEASE_RENEW;
	/* Someone else holds it (or released it): whatever we believed, we
	 * are not the leader now. */
	l->leading = false;
	if (!rec->holder[0])
		return SC_KLEASE_TAKE;
	double d = rec->duration > 0 ? (double)rec->duration : l->duration;
	return now > l->observed_at + d ? SC_KLEASE_TAKE : SC_KLEASE_WAIT;
}

void sc_klease_won(sc_klease_t *l, double sent_at)
{
	l->leading = true;
	l->valid_until = sent_at + l->renew_deadline;
}

void sc_klease_lost(sc_klease_t *l)
{
	l->leading = false;
	l->valid_until = 0;
}

bool sc_klease_valid(const sc_klease_t *l, double now)
{
	return l->leading && now < l->valid_until;
}

json_t *sc_klease_body(const sc_klease_t *l, const sc_klease_rec_t *rec, int action, const char *ns,
                       const char *name, const char *now, bool release)
{
	json_t *md = json_pack("{s:s,s:s}", "name", name, "namespace", ns);
	if (rec && rec->rv[0])
		json_object_set_new(md, "resourceVersion", json_string(rec->rv));
	int64_t transitions = rec ? rec->transitions : 0;
	if (action == SC_KLEASE_TAKE)
		transitions++;
	const char *acquire =
	    action == SC_KLEASE_RENEW && rec && rec->acquire[0] ? rec->acquire : now;
	json_t *spec = json_pack(
	    "{s:s,s:I,s:s,s:s,s:I}", "holderIdentity", release ? "" : l->identity,
	    "leaseDurationSeconds", (json_int_t)(release ? 1 : (int64_t)ceil(l->duration)),
	    "acquireTime", acquire, "renewTime", now, "leaseTransitions", (json_int_t)transitions);
	return json_pack("{s:s,s:s,s:o,s:o}", "apiVersion", "coordination.k8s.io/v1", "kind",
	                 "Lease", "metadata", md, "spec", spec);
}
