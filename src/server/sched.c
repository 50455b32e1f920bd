/* The scheduling loop: a cycle soon after any change, and otherwise only
 * when a time rule may decide differently (sched_int.h draws the data flow).
 *
 * When cycles run:
 *   - after a change: the feed (sched_feed.c) notes every object the cache
 *     takes in and arms a short timer, so a burst of writes (an apply of
 *     1,000 objects) costs one cycle. The delay grows with the last
 *     cycle's duration (KICK_MS + 2 x cycle time, at most the period), so
 *     on a busy machine the cycles leave the cores to the API.
 *   - for time rules of the core (a stale gang's grace running out, a job
 *     waiting long enough for a reservation, a pod's minimum runtime
 *     ending, compaction's minRuntime, cooldown and hourly budget): each
 *     cycle says when the next such moment may come (next_due); the
 *     periodic tick runs a cycle then, but not sooner than IDLE_FACTOR x
 *     the last core run's time after it, so an idle server spends at most
 *     about 1/IDLE_FACTOR of a core on them.
 *   - for pending reasons left to rewrite (sched_plan.c writes at most so
 *     many per cycle, and a job's at most every 10 s): such a cycle, like
 *     one for changes that leave the snapshot as it was, runs no core: the
 *     last decisions still hold (decide()) and only the plan runs.
 *   - and at least every max(SAFETY_S, IDLE_FACTOR x core time), for rules
 *     of the core the loop cannot predict (which moves compaction finds
 *     worth their cost changes with the pods' run time). 60 s: every rule
 *     that can turn "nothing to do" into a decision is in next_due, so
 *     this is a guard, and at 10,000 nodes (a 0.5-0.8 s core run) it costs
 *     an idle server about 1 % of a core.
 *   Any other periodic tick is skipped (starcloud_schedule_cycles_skipped_total).
 *
 * A cycle never blocks the event loop: the loop thread hands the feed's
 * changes to a libuv worker thread, which updates the world, runs
 * sc_scheduler_run() and plans the writes; the loop thread then commits
 * them in parts of at most COMMIT_MS each, one part per loop iteration
 * (sched_write.c), and frees nothing large (the worker frees the old
 * snapshot's parts as it replaces them). One cycle runs at a time; a change
 * during one asks for another after it. The server reports ready (/readyz)
 * after its first complete cycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/log.h"
#include "server/cache.h"
#include "server/deploy.h"
#include "server/ha.h"
#include "server/metrics.h"
#include "server/pool.h"
#include "server/sched_int.h"
#include "server/schedstat.h"
#include "starcloud/error.h"

#define PERIOD_MS 1000
#define KICK_MS 2
#define IDLE_FACTOR 30
#define SAFETY_S 60
#define COMMIT_MS 4.0
#define MAX_EXCLUDE 64 /* objects the core may refuse in one cycle */

typedef struct cycle_job cycle_job_t;

struct sc_sched {
	sc_server_t *s;
	uv_timer_t period;
	uv_timer_t kick;
	uv_timer_t commit; /* the next part of a plan, in the next iteration */
	int kicked;
	int closed;
	int stopping;              /* sc__sched_stop ran: free once the worker is done */
	int again;                 /* a change came while a cycle ran */
	cycle_job_t *job;          /* the cycle in progress (worker or commit), or NULL */
	double last_cycle;         /* seconds */
	uint64_t last_end;         /* uv_now when the last cycle ended */
	double core_cost;          /* the worker's seconds of the last cycle that ran the core */
	uint64_t core_end;         /* uv_now when it ended */
	int64_t next_due;          /* seconds since the epoch; 0 = no time rule known */
	int64_t flush_due;         /* when deferred pending reasons are due; 0 = none */
	long events;               /* events in the store, as far as we know; -1 = unknown */
	sc_queue_report_t *queues; /* last cycle's; names owned */
	size_t nqueues;
	sc_scheduler_t *core; /* keeps the core's scratch memory between cycles */
	sc_world_t *world;    /* worker's: the kept snapshot */
	/* Worker's: the last decisions, when they bound and evicted nothing,
	 * and the world's generation they were taken at (see work()). */
	sc_decisions_t *kept;
	uint64_t kept_gen;
	sc_feed_t *feed;
};

/* One cycle; the fields after `changes` are written by the worker. */
struct cycle_job {
	uv_work_t req;
	sc_sched_t *sc;
	uint64_t t0;
	int64_t now;
	sc_changes_t changes;
	bool need_core;            /* a time rule is due: run the core whatever changed */
	bool core_skipped;         /* worker: the kept decisions were used */
	sc_pool_cycle_t *pools;    /* node pools' input and plans, or NULL */
	json_t *agent_pods;        /* a copy of the server's (server.h), or NULL */
	sc_schedstat_cycle_t stat; /* the scheduler's figures (schedstat.h) */
	size_t decoded;
	sc_cycle_plan_t plan;
	sc_cycle_out_t out;
	sc_cycle_gauges_t gauges;
	sc_queue_report_t *queues; /* for explain; names owned */
	size_t nqueues;
	sc_queue_metrics_t *qm; /* for /metrics */
	size_t nqm;
	double world_bytes;
	int rc;
	char msg[512];
	size_t parts;
	int inflight; /* a part is with the store */
	int done;     /* every part answered (or the commit failed) */
	size_t nchanges;
	double t_apply, t_core, t_plan, t_work; /* seconds on the worker */
	double cpu_work;                        /* the worker's CPU seconds */
};

static void free_queues(sc_queue_report_t *q, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free((char *)q[i].name);
		free((char *)q[i].parent);
	}
	free(q);
}

const sc_queue_report_t *sc__sched_queue(sc_server_t *s, const char *name)
{
	sc_sched_t *sc = s->sched;
	for (size_t i = 0; sc && name && i < sc->nqueues; i++)
		if (strcmp(sc->queues[i].name, name) == 0)
			return &sc->queues[i];
	return NULL;
}

static void job_free(cycle_job_t *j)
{
	sc__changes_free(&j->changes);
	sc__pool_cycle_free(j->pools);
	json_decref(j->agent_pods);
	sc__schedstat_cycle_free(&j->stat);
	sc__cycle_plan_free(&j->plan);
	free(j->out.waits);
	free(j->gauges.state);
	free(j->gauges.queues);
	free_queues(j->queues, j->nqueues);
	free(j->qm);
	free(j);
}

static void sched_free(sc_sched_t *sc)
{
	free_queues(sc->queues, sc->nqueues);
	sc_decisions_free(sc->kept);
	sc_scheduler_free(sc->core);
	sc__world_free(sc->world);
	sc__feed_free(sc->feed);
	free(sc);
}

static void report_busy(sc_sched_t *sc)
{
	size_t changes = sc__feed_pending(sc->feed);
	sc__metrics_loop(sc->s->metrics, sc->job != NULL || changes > 0, changes);
}

/* ---------------------------------------------------------------------
 * The worker's part
 * ------------------------------------------------------------------- */

/* The earliest moment after now at which a time rule of the core may
 * decide otherwise for an unchanged snapshot: a stale gang's grace ends,
 * a pending job has waited reservations.after, a running pod's minimum
 * runtime (preempt or reclaim, of its queue or one above) ends while jobs
 * wait, compaction's minRuntime, cooldown or hourly budget lets a pod move.
 * Reservations themselves move with time: while one is held the answer is
 * "now". 0 when none is known. */
static int64_t next_due(const sc_snapshot_t *s, const sc_decisions_t *d)
{
	int64_t due = 0, now = s->now;
#define CONSIDER(t)                                                                                \
	do {                                                                                       \
		int64_t t_ = (t);                                                                  \
		if (t_ > now && (!due || t_ < due))                                                \
			due = t_;                                                                  \
	} while (0)
	for (size_t i = 0; i < d->npending; i++) {
		const sc_job_spec_t *j =
		    d->pending[i].job < s->njobs ? &s->jobs[d->pending[i].job] : NULL;
		if (d->pending[i].nreserved)
			return now + 1;
		if (j && j->created > 0)
			CONSIDER(j->created + s->config.reservation_after);
	}
	/* The queues' preempt and reclaim minimum runtimes, each value once
	 * (every queue's apply to every running pod: conservative, and a
	 * walk of the queues per job cost 11 million steps at 10,000 nodes). */
	int64_t *rt = sc_xcalloc(2 * s->nqueues + 1, sizeof(*rt));
	size_t nrt = 0;
	for (size_t q = 0; q < s->nqueues; q++) {
		int64_t v[2] = {s->queues[q].preempt_min_runtime, s->queues[q].reclaim_min_runtime};
		if (!v[0] && !v[1])
			continue;
		for (int i = 0; i < 2; i++) {
			size_t k = 0;
			while (k < nrt && rt[k] != v[i])
				k++;
			if (k == nrt)
				rt[nrt++] = v[i];
		}
	}
	const sc_compaction_t *cp = &s->config.compaction;
	bool compacting = d->npending && cp->enabled && s->config.pack_threshold > 0;
	for (size_t i = 0; i < s->njobs; i++) {
		const sc_job_spec_t *j = &s->jobs[i];
		if (j->stale_since > 0)
			CONSIDER(j->stale_since +
			         (j->staleness_grace < 0 ? 60 : j->staleness_grace));
		if (!d->npending)
			continue;
		/* Compaction (for jobs left waiting): a pod may move once it
		 * ran minRuntime and its last move is a cooldown old; a move
		 * leaves the hourly budget an hour after it was made. */
		for (size_t p = 0; compacting && p < j->npods; p++) {
			const sc_pod_status_t *ps = &j->pods[p];
			if (ps->phase != SC_POD_RUNNING)
				continue;
			if (ps->started_at)
				CONSIDER(ps->started_at + cp->min_runtime);
			if (ps->moved_at > 0) {
				CONSIDER(ps->moved_at + cp->cooldown);
				CONSIDER(ps->moved_at + 3600);
			}
		}
		for (size_t p = 0; nrt && p < j->npods; p++) {
			if (j->pods[p].phase != SC_POD_RUNNING || !j->pods[p].started_at)
				continue;
			for (size_t k = 0; k < nrt; k++)
				CONSIDER(j->pods[p].started_at + rt[k]);
		}
	}
#undef CONSIDER
	free(rt);
	return due;
}

/* The queue figures, copied (explain and /metrics outlive the decisions). */
static void keep_queues(cycle_job_t *j, const sc_decisions_t *d)
{
	j->queues = sc_xcalloc(d->nqueues + 1, sizeof(*j->queues));
	j->qm = sc_xcalloc(d->nqueues + 1, sizeof(*j->qm));
	for (size_t i = 0; i < d->nqueues; i++) {
		const sc_queue_report_t *r = &d->queues[i];
		j->queues[i] = *r;
		j->queues[i].name = sc_xstrdup(r->name);
		j->queues[i].parent = r->parent ? sc_xstrdup(r->parent) : NULL;
		snprintf(j->qm[i].name, sizeof(j->qm[i].name), "%s", r->name);
		j->qm[i].quota = r->quota[SC_RES_GPU];
		j->qm[i].fair_share = r->fair_share[SC_RES_GPU];
		j->qm[i].allocated = r->allocated[SC_RES_GPU];
		j->qm[i].requested = r->requested[SC_RES_GPU];
	}
	j->nqueues = j->nqm = d->nqueues;
}

/* Runs the core; an object it refuses is left out and the cycle tried
 * again (the world's checks make this rare: it would take a rule of the
 * core the loop does not know). */
static int run_core(cycle_job_t *j, sc_decisions_t **d)
{
	sc_sched_t *sc = j->sc;
	for (int tries = 0;; tries++) {
		const sc_snapshot_t *snap = sc__world_snapshot(sc->world, j->now);
		int rc = sc_scheduler_run(sc->core, snap, d, j->msg, sizeof(j->msg));
		if (rc != SC_EINVAL || tries == MAX_EXCLUDE ||
		    !sc__world_exclude(sc->world, j->msg))
			return rc;
		sc_log_warn("the scheduler refused an object: %s", j->msg);
	}
}

/* Worker thread: touches only j and the world (one cycle at a time). */
static double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The core is pure: on the same snapshot it decides the same, but for the
 * time rules (which the loop tracks: next_due, and the safety cycle). So
 * when the last decisions bound and evicted nothing, the world's snapshot
 * has not changed since (its generation), and no time rule is due, they
 * are taken again instead of running the core: a cycle for the changes
 * that concern no decision (the loop's own writes, an agent's report of
 * no change) or for the pending reasons left to rewrite (the plan) costs
 * the plan only. Returns 1 when it ran the core. */
static int decide(cycle_job_t *j, sc_decisions_t **d)
{
	sc_sched_t *sc = j->sc;
	uint64_t gen = sc__world_gen(sc->world);
	if (!j->need_core && sc->kept && sc->kept_gen == gen) {
		*d = sc->kept;
		j->core_skipped = true;
		j->rc = 0;
		return 0;
	}
	sc_decisions_free(sc->kept);
	sc->kept = NULL;
	j->rc = run_core(j, d);
	return 1;
}

/* After the plan: keeps d for decide() when it may be taken again. */
static void keep_or_free(cycle_job_t *j, sc_decisions_t *d)
{
	sc_sched_t *sc = j->sc;
	if (j->core_skipped)
		return; /* it is sc->kept */
	if (j->rc == 0 && d && d->nbindings == 0 && d->nevictions == 0 && !j->pools) {
		sc->kept = d;
		/* A refused object was left out meanwhile: the generation moved. */
		sc->kept_gen = sc__world_gen(sc->world);
		return;
	}
	sc_decisions_free(d);
}

static void work(uv_work_t *req)
{
	cycle_job_t *j = req->data;
	double c0 = thread_cpu();
	sc_sched_t *sc = j->sc;
	sc_decisions_t *d = NULL;
	uint64_t t0 = uv_hrtime();
	j->nchanges = j->changes.n;
	sc__world_apply(sc->world, &j->changes, &j->decoded);
	sc__changes_free(&j->changes); /* the old revisions' text, freed here */
	uint64_t t1 = uv_hrtime();
	decide(j, &d);
	uint64_t t2 = uv_hrtime();
	j->t_apply = (double)(t1 - t0) / 1e9;
	j->t_core = (double)(t2 - t1) / 1e9;
	if (j->rc < 0) {
		j->msg[sizeof(j->msg) - 1] = '\0';
		return;
	}
	j->msg[0] = '\0';
	const sc_snapshot_t *snap = sc__world_snapshot(sc->world, j->now);
	/* Node pools plan on the same snapshot and decisions (their reasons
	 * replace those of the jobs that wait for pool nodes); a failure there
	 * leaves the cycle's own decisions standing. */
	json_t *pool_waits = NULL;
	if (j->pools && sc__pool_plan(j->pools, snap, sc->world, d) == 0)
		pool_waits = j->pools->waits;
	j->rc = sc__cycle_plan(sc->world, snap, d, pool_waits, j->agent_pods, &j->plan, &j->out);
	sc__cycle_gauges(sc->world, snap, d, &j->gauges);
	sc__schedstat_prepare(&j->stat, snap, d);
	keep_queues(j, d);
	int64_t due = next_due(snap, d); /* the plan may have found one sooner */
	if (due && (!j->out.next_due || due < j->out.next_due))
		j->out.next_due = due;
	j->world_bytes = (double)sc__world_bytes(sc->world);
	keep_or_free(j, d);
	j->t_plan = (double)(uv_hrtime() - t2) / 1e9;
	j->t_work = (double)(uv_hrtime() - t0) / 1e9;
	j->cpu_work = thread_cpu() - c0;
}

/* ---------------------------------------------------------------------
 * The loop thread's part
 * ------------------------------------------------------------------- */

static void arm_kick(sc_sched_t *sc);
static void kick(sc_server_t *s);
static void writing(sc_server_t *s, const char *key, int on);

static void trim_events(sc_sched_t *sc, size_t created)
{
	if (sc->events >= 0)
		sc->events += (long)created;
	/* Counting events costs; do it when the estimate is 10 % over. */
	if (sc->events < 0 || sc->events > SC_EVENT_LIMIT + SC_EVENT_LIMIT / 10)
		sc->events = sc__events_trim(sc->s);
}

static void cycle_failed(sc_sched_t *sc, cycle_job_t *j)
{
	if (j->msg[0])
		sc_log_error("scheduling cycle failed: schedule: %s", j->msg);
	else
		sc_log_error("scheduling cycle failed: %s", sc_strerror(j->rc));
}

static size_t evictions(const sc_cycle_out_t *o)
{
	size_t n = o->drained;
	for (int a = 0; a < SC_ACT_COUNT; a++)
		n += o->evictions[a];
	return n;
}

/* The end of a cycle, committed or not. */
static void cycle_end(sc_sched_t *sc, cycle_job_t *j)
{
	sc->job = NULL;
	sc->last_end = uv_now(sc->s->loop);
	/* Pacing (the kick's delay, the idle gap) follows the worker's time:
	 * the commit's parts wait for the loop between them and cost it
	 * little; the histogram gets the whole time from start to committed. */
	sc->last_cycle = j->t_work;
	if (!j->core_skipped) {
		sc->core_cost = j->t_work;
		sc->core_end = sc->last_end;
	}
	double took = (double)(uv_hrtime() - j->t0) / 1e9;
	if (j->rc < 0) {
		cycle_failed(sc, j);
		sc->again = 1; /* the changes were taken: try again soon */
	} else {
		free_queues(sc->queues, sc->nqueues);
		sc->queues = j->queues;
		sc->nqueues = j->nqueues;
		j->queues = NULL;
		j->nqueues = 0;
		sc__metrics_cycle(sc->s->metrics, took, j->out.placements, j->out.evictions,
		                  SC_ACT_COUNT, j->out.drained, j->out.pending, j->qm, j->nqm);
		sc__metrics_compaction(sc->s->metrics, j->out.compaction_gpus,
		                       j->out.compaction_lost_gpu_s);
		for (size_t i = 0; i < j->out.nwaits; i++)
			sc__metrics_wait(sc->s->metrics, j->out.waits[i]);
		if (sc->s->stat)
			sc__schedstat_record(sc->s->stat, (int64_t)time(NULL), took, &j->stat);
		sc__metrics_decodes(sc->s->metrics, j->decoded + j->out.decoded);
		sc__metrics_state(sc->s->metrics, j->gauges.state, j->gauges.queues,
		                  j->gauges.nqueues);
		j->gauges.state = NULL;
		j->gauges.queues = NULL;
		sc__metrics_loop_counts(sc->s->metrics, 0, j->parts, j->out.deferred,
		                        j->world_bytes);
		sc_log_debug("cycle: %.3f s (worker %.3f, cpu %.3f: world %.3f, core %.3f, plan "
		             "%.3f; commit "
		             "%zu parts): %zu changes, %zu decoded, %zu writes, %zu events, %zu "
		             "placements, %zu evictions, %zu pending, %zu reasons deferred%s%s%s%s",
		             took, j->t_work, j->cpu_work, j->t_apply, j->t_core, j->t_plan,
		             j->parts, j->nchanges, j->decoded + j->out.decoded, j->out.writes,
		             j->out.events, j->out.placements, evictions(&j->out), j->out.pending,
		             j->out.deferred, j->core_skipped ? ", core skipped" : "",
		             j->out.releasing ? ", releasing" : "",
		             j->out.released ? ", released" : "",
		             j->plan.dropped_evict ? ", dropped an eviction" : "");
		sc->next_due = j->out.next_due;
		/* Deferred reasons need no new decision: the plan writes them
		 * from the kept ones (decide()). */
		sc->flush_due = j->out.deferred ? j->now + 10 : 0;
		trim_events(sc, j->out.events);
		sc->s->ready = 1;
		sc__pool_act(sc->s, j->pools); /* takes them */
		j->pools = NULL;
		sc__deploy_tick(sc->s);
		/* Releasing pods are removed by the next cycle; run it soon so
		 * an eviction completes (and its preemptor starts) without
		 * waiting a period. A dropped write is decided again too. */
		if (j->out.releasing || j->out.released || j->plan.dropped)
			sc->again = 1;
	}
	job_free(j);
	if (sc->again || sc__feed_pending(sc->feed)) {
		sc->again = 0;
		arm_kick(sc);
	}
	report_busy(sc);
}

static void on_commit(uv_timer_t *t);

/* The store answered a part (at once with SQLite, later with etcd): the
 * next part goes in the next loop iteration, so requests are served in
 * between; the last one ends the cycle. */
static void part_done(const sc_store_res_t *res, void *ud)
{
	cycle_job_t *j = ud;
	sc_sched_t *sc = j->sc;
	j->inflight = 0;
	int rc = sc__cycle_part_done(sc->feed, &j->plan, res);
	if (sc->stopping) {
		/* sc__sched_stop ran while etcd had the part. */
		sc->job = NULL;
		job_free(j);
		if (sc->closed == 3)
			sched_free(sc);
		return;
	}
	if (rc < 0) {
		j->rc = rc;
		snprintf(j->msg, sizeof(j->msg), "commit: %s", sc_strerror(rc));
	}
	j->done = rc <= 0;
	uv_timer_start(&sc->commit, on_commit, 0, 0);
}

/* Starts the next part of the plan, or ends the cycle when none is left. */
static void commit_part(sc_sched_t *sc)
{
	cycle_job_t *j = sc->job;
	/* Only the leader writes; deposed meanwhile: the new leader decides.
	 * The fence is taken with each part, when it is submitted. */
	if (!j->done && !sc__ha_leader_begin(sc->s)) {
		j->rc = 0;
		cycle_end(sc, j);
		return;
	}
	int rc = 0;
	if (!j->done) {
		j->inflight = 1;
		rc = sc__cycle_commit(sc->s, sc->feed, &j->plan, COMMIT_MS, part_done, j);
		if (rc != 1)
			j->inflight = 0;
		else
			j->parts++;
		sc__ha_leader_end(sc->s);
	}
	if (rc == 1)
		return; /* part_done follows (it may have run already) */
	if (rc == 2) {
		uv_timer_start(&sc->commit, on_commit, 0, 0);
		return;
	}
	if (sc__ha_leader_begin(sc->s)) {
		cycle_end(sc, j); /* trims events: fenced */
		sc__ha_leader_end(sc->s);
	} else {
		j->rc = 0;
		cycle_end(sc, j);
	}
}

static void on_commit(uv_timer_t *t)
{
	sc_sched_t *sc = t->data;
	if (sc->job && !sc->stopping && !sc->job->inflight)
		commit_part(sc);
}

static void after_work(uv_work_t *req, int status)
{
	cycle_job_t *j = req->data;
	sc_sched_t *sc = j->sc;
	if (sc->stopping || status == UV_ECANCELED) {
		sc->job = NULL;
		job_free(j);
		if (sc->stopping && sc->closed == 3)
			sched_free(sc);
		return;
	}
	if (j->rc < 0) {
		cycle_end(sc, j);
		return;
	}
	commit_part(sc);
}

/* Whether the safety cycle is due: the core has not run for SAFETY_S, nor
 * for IDLE_FACTOR times what it cost last. */
static bool safety_due(const sc_sched_t *sc)
{
	double since = (double)(uv_now(sc->s->loop) - sc->core_end);
	double gap = IDLE_FACTOR * sc->core_cost * 1000;
	return since >= (gap > SAFETY_S * 1000 ? gap : SAFETY_S * 1000);
}

static void start_cycle(sc_sched_t *sc)
{
	cycle_job_t *j = sc_xcalloc(1, sizeof(*j));
	j->sc = sc;
	j->t0 = uv_hrtime();
	j->now = (int64_t)time(NULL);
	j->req.data = j;
	sc__feed_take(sc->feed, &j->changes);
	j->pools = sc__pool_input(sc->s, j->now);
	j->need_core =
	    !sc->s->ready || (sc->next_due && j->now >= sc->next_due) || j->pools || safety_due(sc);
	/* What the agents run, for moves and Pipelined pods (sched_move.c). */
	j->agent_pods = sc->s->agent_pods ? json_deep_copy(sc->s->agent_pods) : NULL;
	sc->job = j;
	int rc = uv_queue_work(sc->s->loop, &j->req, work, after_work);
	if (rc < 0) {
		sc_log_error("cannot queue a cycle: %s", uv_strerror(rc));
		sc->job = NULL;
		job_free(j);
	}
	report_busy(sc);
}

/* Only the leader schedules (ha.c); its writes are fenced at commit. */
static void cycle(sc_sched_t *sc)
{
	if (!sc__ha_is_leader(sc->s))
		return;
	if (sc->job) {
		sc->again = 1;
		return;
	}
	start_cycle(sc);
}

/* 1 when NodePools exist: their controller acts after each cycle on
 * timers of its own (join timeouts, scaleDownAfter, back-off), so they
 * count as a time rule that is always due (still paced by the idle gap). */
static int have_pools(sc_sched_t *sc)
{
	size_t n = 0;
	if (sc->s->cache)
		sc__cache_items(sc->s->cache, sc__kind_by_name("NodePool"), &n);
	return n > 0;
}

/* The periodic tick: a cycle when changes wait (a kick normally came
 * first), when a time rule is due, or when the safety interval passed;
 * else nothing. */
static void on_period(uv_timer_t *t)
{
	sc_sched_t *sc = t->data;
	if (sc->job || !sc__ha_is_leader(sc->s))
		return;
	uint64_t now_ms = uv_now(sc->s->loop);
	double since = (double)(now_ms - sc->last_end),
	       since_core = (double)(now_ms - sc->core_end);
	int64_t now = (int64_t)time(NULL);
	bool due = (sc->next_due && now >= sc->next_due) || have_pools(sc);
	bool flush = sc->flush_due && now >= sc->flush_due;
	/* A time rule runs the core, paced by what the core costs; deferred
	 * reasons only the plan (decide()), paced by what that cost. */
	if (sc__feed_pending(sc->feed) || !sc->s->ready ||
	    (due && since_core >= IDLE_FACTOR * sc->core_cost * 1000) ||
	    (flush && since >= IDLE_FACTOR * sc->last_cycle * 1000) || safety_due(sc)) {
		cycle(sc);
		return;
	}
	sc__metrics_loop_counts(sc->s->metrics, 1, 0, 0, -1);
	/* Nothing changed: the last cycle's figures still hold, and the
	 * history (schedstat.h) gets its sample for this interval. */
	if (sc->s->stat)
		sc__schedstat_idle(sc->s->stat, now);
}

static void on_kick(uv_timer_t *t)
{
	sc_sched_t *sc = t->data;
	sc->kicked = 0;
	cycle(sc);
}

static void arm_kick(sc_sched_t *sc)
{
	if (sc->kicked)
		return;
	uint64_t delay = KICK_MS + (uint64_t)(2000.0 * sc->last_cycle);
	if (delay > PERIOD_MS)
		delay = PERIOD_MS;
	sc->kicked = 1;
	uv_timer_start(&sc->kick, on_kick, delay, 0);
}

int sc__sched_start(sc_server_t *s)
{
	sc_sched_t *sc = sc_calloc(1, sizeof(*sc));
	if (!sc)
		return SC_ENOMEM;
	sc->core = sc_scheduler_new();
	if (!sc->core) {
		free(sc);
		return SC_ENOMEM;
	}
	sc->world = sc__world_new();
	sc->s = s;
	sc->events = -1;
	sc->feed = sc__feed_new(s);
	uv_timer_init(s->loop, &sc->period);
	uv_timer_init(s->loop, &sc->kick);
	uv_timer_init(s->loop, &sc->commit);
	sc->period.data = sc->kick.data = sc->commit.data = sc;
	uv_timer_start(&sc->period, on_period, 0, PERIOD_MS);
	s->sched = sc;
	s->kick = kick;
	s->writing = writing;
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	sc_sched_t *sc = h->data;
	/* The three timers point here; free after the last, whatever the
	 * order, and after the cycle on the worker (its after_work frees). */
	if (++sc->closed == 3 && !sc->job)
		sched_free(sc);
}

void sc__sched_stop(sc_server_t *s)
{
	sc_sched_t *sc = s->sched;
	if (!sc)
		return;
	s->sched = NULL;
	s->kick = NULL;
	s->writing = NULL;
	sc->stopping = 1;
	/* A plan being committed is dropped: the next leader (or start)
	 * decides again from the store. A cycle on the worker is cancelled,
	 * or freed by after_work once it finishes. */
	if (sc->job && sc->job->inflight) {
		/* A part is with the store: its answer frees the cycle. */
	} else if (sc->job && uv_is_active((uv_handle_t *)&sc->commit)) {
		job_free(sc->job);
		sc->job = NULL;
	} else if (sc->job) {
		uv_cancel((uv_req_t *)&sc->job->req);
	}
	uv_close((uv_handle_t *)&sc->period, on_timer_closed);
	uv_close((uv_handle_t *)&sc->kick, on_timer_closed);
	uv_close((uv_handle_t *)&sc->commit, on_timer_closed);
}

/* What sc__sched_writing (kick.c) runs while the loop is up. */
static void writing(sc_server_t *s, const char *key, int on)
{
	sc_sched_t *sc = s->sched;
	if (!sc)
		return;
	if (on)
		sc__feed_own(sc->feed, key);
	else
		sc__feed_writer_done(sc->feed, key);
}

/* What sc__sched_kick (kick.c) runs while the loop is up. */
static void kick(sc_server_t *s)
{
	sc_sched_t *sc = s->sched;
	if (!sc)
		return;
	if (sc->job)
		sc->again = 1;
	else
		arm_kick(sc);
	report_busy(sc);
}
