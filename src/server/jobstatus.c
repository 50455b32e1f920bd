/* The stored status of a Job or Deployment (jobstatus.h). At the bottom of
 * the server: it calls none of its users. */
#include <string.h>

#include "base/parse.h"
#include "server/jobstatus.h"
#include "starcloud/error.h"

static const char *const phase_names[] = {"",          "Running", "Releasing",
                                          "Succeeded", "Failed",  "Pipelined"};

static const char *str(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v ? v : "";
}

json_t *sc__jobst_pods(json_t *obj)
{
	json_t *pods = json_object_get(json_object_get(obj, "status"), "pods");
	return json_is_array(pods) ? pods : NULL;
}

const char *sc__jobst_phase(json_t *obj)
{
	return str(json_object_get(obj, "status"), "phase");
}

int sc__jobst_phase_parse(const char *text)
{
	for (int i = SC_PP_RUNNING; text && i <= SC_PP_PIPELINED; i++)
		if (strcmp(text, phase_names[i]) == 0)
			return i;
	return SC_PP_OTHER;
}

static const char *phase_name(int phase)
{
	return phase > SC_PP_OTHER && phase <= SC_PP_PIPELINED ? phase_names[phase] : "";
}

int sc__jobst_pod(json_t *e, sc_jobst_pod_t *out)
{
	memset(out, 0, sizeof(*out));
	out->name = out->node = out->started_at = "";
	if (!json_is_object(e))
		return SC_EINVAL;
	out->name = str(e, "name");
	out->phase = sc__jobst_phase_parse(json_string_value(json_object_get(e, "phase")));
	out->node = str(e, "node");
	out->started_at = str(e, "startedAt");
	out->generation = json_object_get(e, "generation");
	out->ready = json_is_true(json_object_get(e, "ready"));
	json_t *port = json_object_get(e, "port");
	out->port = json_is_integer(port) ? json_integer_value(port) : 0;
	return 0;
}

json_t *sc__jobst_find(json_t *pods, const char *name, size_t *at)
{
	size_t i;
	json_t *e;
	json_array_foreach(pods, i, e)
	{
		if (strcmp(str(e, "name"), name) == 0) {
			if (at)
				*at = i;
			return e;
		}
	}
	return NULL;
}

bool sc__jobst_holds(const sc_jobst_pod_t *p)
{
	return p->phase == SC_PP_RUNNING || p->phase == SC_PP_RELEASING ||
	       p->phase == SC_PP_PIPELINED;
}

void sc__jobst_set_phase(json_t *e, int phase, const char *message)
{
	json_object_set_new(e, "phase", json_string(phase_name(phase)));
	if (message)
		json_object_set_new(e, "message", json_string(message));
}

sc_jobst_counts_t sc__jobst_count(json_t *pods)
{
	sc_jobst_counts_t c = {0};
	sc_jobst_pod_t p;
	size_t i;
	json_t *e;
	json_array_foreach(pods, i, e)
	{
		sc__jobst_pod(e, &p);
		c.running += p.phase == SC_PP_RUNNING;
		c.releasing += p.phase == SC_PP_RELEASING;
		c.succeeded += p.phase == SC_PP_SUCCEEDED;
		c.failed += p.phase == SC_PP_FAILED;
		c.pipelined += p.phase == SC_PP_PIPELINED;
	}
	return c;
}

double sc__jobst_gpus(json_t *e)
{
	json_t *mig = json_object_get(e, "mig"), *share = json_object_get(e, "gpuShare");
	size_t n = json_array_size(json_object_get(e, "gpus"));
	if (json_is_object(mig)) {
		const char *prof = json_string_value(json_object_get(mig, "profile"));
		uint64_t g = 0; /* "3g.40gb": the slices before the 'g' */
		if (prof)
			sc_parse_digits(&prof, 7, &g);
		return g > 0 && g <= 7 ? g / 7.0 : 0;
	}
	if (json_is_number(share))
		return json_number_value(share) / 1000.0 * (double)(n ? n : 1);
	return (double)n;
}
