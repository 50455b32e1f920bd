/* `starcloud schedule`: offline scheduling of manifests.
 *
 * One cycle by default. With --cycles N, the world moves between cycles the
 * way a cluster would: evictions complete (the pods are gone, and pods that
 * were Releasing finish too), bindings become Running pods, the clock moves
 * by --interval, and a gang that fell below minMember gets staleSince. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cmdline.h"
#include "base/alloc.h"
#include "base/quantity.h"
#include "cli/cli.h"
#include "cli/schedule_out.h"
#include "cli/schedule_pools.h"
#include "starcloud/arena.h"
#include "starcloud/error.h"

#define MAX_CYCLES 10000
#define MAX_FILES 1024

typedef struct opts {
	const char *files[MAX_FILES];
	int nfiles;
	int output; /* table, json */
	bool json;
	int64_t now;
	int64_t interval;
	int cycles;
	const char *actions;
} opts_t;

static int bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "starcloud schedule: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	return SC_EXIT_USAGE;
}

static int add_file(void *opts, const char *v, char *err, size_t errsz)
{
	opts_t *o = opts;
	if (o->nfiles == MAX_FILES) {
		snprintf(err, errsz, "more than %d files", MAX_FILES);
		return SC_ELIMIT;
	}
	o->files[o->nfiles++] = v;
	return 0;
}

static int now_flag(void *opts, const char *v, char *err, size_t errsz)
{
	snprintf(err, errsz, "\"%s\" is not an RFC 3339 time such as 2026-11-29T10:00:00Z", v);
	return sc_quantity_time(v, &((opts_t *)opts)->now);
}

static int interval_flag(void *opts, const char *v, char *err, size_t errsz)
{
	snprintf(err, errsz, "\"%s\" is not a duration such as 10s", v);
	return sc_quantity_duration(v, &((opts_t *)opts)->interval);
}

static const sc_flag_t schedule_flags[] = {
    {.name = "--file",
     .alias = "-f",
     .kind = SC_FLAG_FUNC,
     .fn = add_file,
     .meta = "PATH",
     .flags = SC_FLAG_REPEAT,
     .help = "a manifest file or folder (also as an argument)"},
    {.name = "--output",
     .alias = "-o",
     SC_FLAG_AT(CHOICE, opts_t, output),
     .choices = "table|json",
     .def = "table",
     .help = "output format"},
    {.name = "--now",
     .kind = SC_FLAG_FUNC,
     .fn = now_flag,
     .meta = "TIME",
     .help = "the cycle's time (default: the current time)"},
    {.name = "--actions",
     SC_FLAG_AT(STR, opts_t, actions),
     .meta = "LIST",
     .help = "run only these actions, in this order (allocate,\nconsolidation, reclaim, "
             "preempt, stalegangeviction)"},
    {.name = "--cycles",
     SC_FLAG_AT(INT, opts_t, cycles),
     .min = 1,
     .max = MAX_CYCLES,
     .def = "1",
     .help = "run N cycles; between cycles evictions complete and\nbindings start "
             "running"},
    {.name = "--interval",
     .kind = SC_FLAG_FUNC,
     .fn = interval_flag,
     .meta = "DUR",
     .help = "time between cycles (default 0s)"},
};

static const sc_command_t schedule_cmd = {
    .name = "schedule",
    .args = "-f FILE... [options]",
    .about = "Schedules the nodes, queues, priority classes, jobs and deployments in the\n"
             "manifest files (or folders of *.yaml, *.yml, *.json) offline and prints the\n"
             "decisions: bindings, evictions, pending jobs with reasons, and queues.",
    .footer = "Exit status: 0 success, 1 failure, 2 bad usage or bad manifests.",
    .flags = schedule_flags,
    .nflags = sizeof(schedule_flags) / sizeof(schedule_flags[0]),
    .max_args = MAX_FILES,
};

/* 0 to run, -1 after --help, else an exit status. */
static int parse_opts(int argc, char **argv, opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->now = (int64_t)time(NULL);
	int nargs = 0;
	int rc = sc_flags_parse(&schedule_cmd, o, argc, argv, &nargs);
	if (rc != 0)
		return rc > 0 ? -1 : SC_EXIT_USAGE;
	o->json = o->output == 1;
	for (int i = 1; i <= nargs; i++) {
		if (o->nfiles == MAX_FILES) {
			fprintf(stderr, "starcloud schedule: more than %d files\n", MAX_FILES);
			return SC_EXIT_USAGE;
		}
		o->files[o->nfiles++] = argv[i];
	}
	if (o->nfiles == 0) {
		fprintf(stderr, "starcloud schedule: no manifests given (use -f FILE)\n");
		return SC_EXIT_USAGE;
	}
	return 0;
}

/* --actions a,b,c replaces the configured list. */
static int apply_actions(const char *list, sc_config_t *c)
{
	char buf[256];
	size_t n = 0;
	if (strlen(list) >= sizeof(buf))
		return bad("--actions: list too long: %s", list);
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int a = sc_action_parse(tok);
		if (a < 0)
			return bad(
			    "--actions: unknown action \"%s\" (expected allocate, "
			    "consolidation, reclaim, preempt, stalegangeviction, compaction)",
			    tok);
		for (size_t i = 0; i < n; i++)
			if (c->actions[i] == a)
				return bad("--actions: \"%s\" is listed twice", tok);
		if (n == SC_ACT_COUNT)
			return bad("--actions: too many actions in \"%s\"", list);
		c->actions[n++] = a;
	}
	if (n == 0)
		return bad("--actions: %s", "expected at least one action");
	c->nactions = n;
	return 0;
}

/* ---- the world between cycles ------------------------------------------ */

/* Mutable copies of the jobs' pod lists; strings that must outlive one
 * cycle's decisions are copied into the arena. */
typedef struct world {
	sc_snapshot_t snap;
	sc_job_spec_t *jobs;
	sc_pod_status_t **pods; /* per job, malloc'd */
	size_t *cap;
	sc_arena_t *arena;
} world_t;

static void world_free(world_t *w)
{
	for (size_t j = 0; w->pods && j < w->snap.njobs; j++)
		free(w->pods[j]);
	free(w->pods);
	free(w->cap);
	free(w->jobs);
	sc_arena_free(w->arena);
}

static int world_init(world_t *w, const sc_snapshot_t *s)
{
	memset(w, 0, sizeof(*w));
	w->snap = *s;
	w->jobs = sc_calloc(s->njobs + 1, sizeof(*w->jobs));
	w->pods = sc_calloc(s->njobs + 1, sizeof(*w->pods));
	w->cap = sc_calloc(s->njobs + 1, sizeof(*w->cap));
	w->arena = sc_arena_new(0);
	if (!w->jobs || !w->pods || !w->cap || !w->arena)
		return SC_ENOMEM;
	for (size_t j = 0; j < s->njobs; j++) {
		w->jobs[j] = s->jobs[j];
		w->cap[j] = s->jobs[j].npods + 4;
		if (!(w->pods[j] = sc_calloc(w->cap[j], sizeof(sc_pod_status_t))))
			return SC_ENOMEM;
		if (s->jobs[j].npods)
			memcpy(w->pods[j], s->jobs[j].pods,
			       s->jobs[j].npods * sizeof(sc_pod_status_t));
		w->jobs[j].pods = w->pods[j];
	}
	w->snap.jobs = w->jobs;
	return 0;
}

static long find_pod(const world_t *w, size_t j, const char *pod)
{
	for (size_t i = 0; i < w->jobs[j].npods; i++)
		if (strcmp(w->pods[j][i].name, pod) == 0)
			return (long)i;
	return -1;
}

static void remove_pod(world_t *w, size_t j, size_t i)
{
	sc_pod_status_t *p = w->pods[j];
	memmove(p + i, p + i + 1, (w->jobs[j].npods - i - 1) * sizeof(*p));
	w->jobs[j].npods--;
}

static int bind_pod(world_t *w, const sc_binding_t *b, int64_t now)
{
	size_t j = b->job;
	long i = find_pod(w, j, b->pod);
	if (i < 0) {
		if (w->jobs[j].npods == w->cap[j]) {
			sc_pod_status_t *np = sc_realloc(w->pods[j], w->cap[j] * 2 * sizeof(*np));
			if (!np)
				return SC_ENOMEM;
			w->pods[j] = np;
			w->jobs[j].pods = np;
			w->cap[j] *= 2;
		}
		i = (long)w->jobs[j].npods++;
	}
	int *gpus = sc_arena_calloc(w->arena, b->ngpus + 1, sizeof(int));
	sc_pod_status_t p = {
	    .name = sc_arena_strdup(w->arena, b->pod),
	    .phase = SC_POD_RUNNING,
	    .node = sc_arena_strdup(w->arena, b->node),
	    .gpus = gpus,
	    .ngpus = b->ngpus,
	    .gpu_milli = b->gpu_milli,
	    .gpu_memory = b->gpu_memory,
	    .mig_gpu = b->mig_gpu,
	    .mig_start = b->mig_start,
	    .mig_profile = b->mig_profile ? sc_arena_strdup(w->arena, b->mig_profile) : NULL,
	    .started_at = now,
	};
	if (!p.name || !p.node || !gpus || (b->mig_profile && !p.mig_profile))
		return SC_ENOMEM;
	if (b->ngpus)
		memcpy(gpus, b->gpus, b->ngpus * sizeof(int));
	w->pods[j][i] = p;
	return 0;
}

/* Releasing pods finish, evicted pods go, bound pods run. */
static int world_advance(world_t *w, const sc_decisions_t *d, int64_t interval)
{
	for (size_t j = 0; j < w->snap.njobs; j++)
		for (size_t i = w->jobs[j].npods; i > 0; i--)
			if (w->pods[j][i - 1].phase == SC_POD_RELEASING)
				remove_pod(w, j, i - 1);
	for (size_t e = 0; e < d->nevictions; e++) {
		long i = find_pod(w, d->evictions[e].job, d->evictions[e].pod);
		if (i >= 0)
			remove_pod(w, d->evictions[e].job, (size_t)i);
	}
	int64_t decided = w->snap.now;
	w->snap.now += interval;
	for (size_t b = 0; b < d->nbindings; b++)
		if (bind_pod(w, &d->bindings[b], w->snap.now) < 0)
			return SC_ENOMEM;
	/* A compaction move's pod carries movedAt (when it was decided), as
	 * the server writes it: the action's cooldown and hourly bound read it
	 * in later cycles. */
	for (size_t e = 0; e < d->nevictions; e++) {
		const sc_eviction_t *ev = &d->evictions[e];
		long i =
		    ev->action == SC_ACT_COMPACT && ev->to ? find_pod(w, ev->job, ev->pod) : -1;
		if (i >= 0)
			w->pods[ev->job][i].moved_at = decided;
	}
	for (size_t j = 0; j < w->snap.njobs; j++) {
		sc_job_spec_t *job = &w->jobs[j];
		int running = 0, total = 0;
		for (size_t i = 0; i < job->npods; i++)
			running += job->pods[i].phase == SC_POD_RUNNING;
		for (size_t t = 0; t < job->ntasks; t++)
			total += job->tasks[t].replicas;
		int min = job->min_member ? job->min_member : total;
		if (running > 0 && running < min && !job->stale_since)
			job->stale_since = w->snap.now;
		else if (running >= min)
			job->stale_since = 0;
	}
	return 0;
}

/* The pools' plans after cycle c: into its JSON (and the run's final
 * state, after the last cycle) or printed. */
static int pools_cycle(sc__pools_t *pools, sc__out_t *out, const sc_snapshot_t *s,
                       const sc_decisions_t *d, bool json, bool last)
{
	if (!pools->n)
		return 0;
	json_t *cj = sc__out_last(out);
	int rc = sc__pools_cycle(pools, s, d, cj, !json);
	if (rc == 0 && last && cj && out->final && out->final != cj) {
		json_object_set(out->final, "scaleUp", json_object_get(cj, "scaleUp"));
		json_object_set(out->final, "scaleDown", json_object_get(cj, "scaleDown"));
	}
	return rc;
}

static int run(const opts_t *o, const sc_snapshot_t *snap, sc__pools_t *pools)
{
	world_t w;
	sc__out_t out;
	char msg[512];
	int rc = world_init(&w, snap), status = SC_EXIT_OK;
	if (rc == 0)
		rc = sc__out_init(&out, o->json, o->cycles);
	for (int c = 0; rc == 0 && c < o->cycles; c++) {
		sc_decisions_t *d = NULL;
		rc = sc_schedule(&w.snap, &d, msg, sizeof(msg));
		if (rc < 0) {
			fprintf(stderr, "starcloud schedule: %s\n", msg[0] ? msg : sc_strerror(rc));
			status = rc == SC_EINVAL ? SC_EXIT_USAGE : SC_EXIT_FAIL;
			break;
		}
		rc = sc__out_cycle(&out, &w.snap, d, c, c == o->cycles - 1);
		if (rc == 0 &&
		    (rc = pools_cycle(pools, &out, &w.snap, d, o->json, c == o->cycles - 1)) < 0) {
			status = rc == SC_EINVAL ? SC_EXIT_USAGE : SC_EXIT_FAIL;
			sc_decisions_free(d);
			break;
		}
		if (rc == 0 && c + 1 < o->cycles)
			rc = world_advance(&w, d, o->interval);
		if (rc == 0 && c + 1 < o->cycles)
			rc = sc__pools_join(pools, &w.snap);
		sc_decisions_free(d);
	}
	if (rc == 0)
		rc = sc__out_finish(&out);
	if (rc == SC_ENOMEM) {
		fprintf(stderr, "starcloud schedule: out of memory\n");
		status = SC_EXIT_FAIL;
	}
	sc__out_free(&out);
	world_free(&w);
	return status;
}

int sc_cli_schedule(int argc, char **argv)
{
	opts_t o;
	sc_snapshot_t snap;
	sc_manifest_error_t err;
	char msg[1400];
	int rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? SC_EXIT_OK : rc;
	sc_manifest_set_t *set = sc_manifest_set_new();
	if (!set) {
		fprintf(stderr, "starcloud schedule: out of memory\n");
		return SC_EXIT_FAIL;
	}
	for (int i = 0; i < o.nfiles && rc == 0; i++)
		rc = sc__cli_load_path(set, "schedule", o.files[i]);
	if (rc == 0 && (rc = sc_manifest_snapshot(set, o.now, &snap, &err)) < 0) {
		fprintf(stderr, "starcloud schedule: %s\n",
		        sc_manifest_error_format(&err, msg, sizeof(msg)));
		rc = rc == SC_ENOMEM ? SC_EXIT_FAIL : SC_EXIT_USAGE;
	}
	if (rc == 0 && o.actions)
		rc = apply_actions(o.actions, &snap.config);
	sc__pools_t pools = {0};
	if (rc == 0 && sc__pools_init(&pools, set) < 0) {
		fprintf(stderr, "starcloud schedule: out of memory\n");
		rc = SC_EXIT_FAIL;
	}
	if (rc == 0)
		rc = run(&o, &snap, &pools);
	sc__pools_free(&pools);
	sc_manifest_set_free(set);
	return rc;
}
