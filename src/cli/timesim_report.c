/* Time-mode output. See timesim_report.h. */
#include "cli/timesim_report.h"
#include "cli/table.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_JSON_POINTS 2000 /* the series is thinned to at most this */

/* Durations for people (h/m/s); the JSON keeps seconds. */
static const char *hms(char *buf, size_t n, double seconds)
{
	sc_fmt_hms(buf, n, seconds);
	return buf;
}

static void table(const sc_tsim_result_t *r)
{
	sc_table_t *t =
	    sc_table_new(8, (const char *const[]){"QUEUE", "JOBS", "DONE", "WAIT MEAN", "WAIT P50",
	                                          "WAIT P99", "JCT MEAN", "GPU/FAIR"});
	char a[32], b[32], c[32], d[32], m[32];
	for (size_t q = 0; q < r->nqueues; q++) {
		const sc_tsim_queue_t *x = &r->queues[q];
		char fair[32] = "-"; /* FCFS: no fair share */
		if (x->fair_seconds > 0)
			snprintf(fair, sizeof(fair), "%.3f", x->gpu_seconds / x->fair_seconds);
		sc_table_addf(t, 0, "%s\t%zu\t%zu\t%s\t%s\t%s\t%s\t%s", x->name, x->jobs,
		              x->finished, hms(a, sizeof(a), x->wait.mean),
		              hms(b, sizeof(b), x->wait.p50), hms(c, sizeof(c), x->wait.p99),
		              hms(d, sizeof(d), x->jct.mean), fair);
	}
	sc_table_addf(t, 0, "%s\t%zu\t%zu\t%s\t%s\t%s\t%s\t", "all", r->jobs, r->finished,
	              hms(a, sizeof(a), r->wait.mean), hms(b, sizeof(b), r->wait.p50),
	              hms(c, sizeof(c), r->wait.p99), hms(d, sizeof(d), r->jct.mean));
	sc_table_print(t, stdout, 0);
	sc_table_free(t);
	printf("makespan %s (%lld s), GPU utilisation %.2f %% (time-weighted, %d GPUs; held by "
	       "running jobs %.2f %%), ",
	       hms(m, sizeof(m), (double)r->makespan), (long long)r->makespan, r->util_mean,
	       r->total_gpus, r->busy_mean);
	if (r->jain >= 0)
		printf("Jain %.4f, ", r->jain);
	printf("preemptions %zu, never fit %zu, left waiting %zu, cycles %zu, %s of wall time\n",
	       r->preemptions, r->never_fit, r->stuck, r->cycles,
	       hms(a, sizeof(a), r->wall_seconds));
	printf("wait p95 %s; cluster: %.1f GPU-hours, %d GPUs at most, %.1f on average",
	       hms(a, sizeof(a), r->wait.p95), r->gpu_hours, r->gpus_max, r->gpus_mean);
	if (r->nodes_requested || r->nodes_removed)
		printf(", %zu nodes requested (%lld s to join), %zu removed", r->nodes_requested,
		       (long long)r->provision_delay, r->nodes_removed);
	printf("\n");
	printf("large jobs: %zu done, wait mean %s p50 %s p95 %s p99 %s; compaction: %zu moves, "
	       "%.1f GPU-hours lost\n",
	       r->large_finished, hms(a, sizeof(a), r->wait_large.mean),
	       hms(b, sizeof(b), r->wait_large.p50), hms(c, sizeof(c), r->wait_large.p95),
	       hms(d, sizeof(d), r->wait_large.p99), r->moves, r->lost_gpu_seconds / 3600.0);
}

static void json_stats(const char *key, const sc_tsim_stats_t *s)
{
	printf("\"%s\":{\"mean\":%.3f,\"p50\":%.3f,\"p95\":%.3f,\"p99\":%.3f}", key, s->mean,
	       s->p50, s->p95, s->p99);
}

static void json(const sc_tsim_result_t *r, int policy)
{
	printf("{\"mode\":\"time\",\"policy\":\"%s\",\"jobs\":%zu,\"finished\":%zu,"
	       "\"never_fit\":%zu,\"left_waiting\":%zu,\"preemptions\":%zu,\"cycles\":%zu,"
	       "\"total_gpus\":%d,",
	       policy == SC_TSIM_FCFS ? "fcfs" : "starcloud", r->jobs, r->finished, r->never_fit,
	       r->stuck, r->preemptions, r->cycles, r->total_gpus);
	json_stats("wait_s", &r->wait);
	putchar(',');
	json_stats("jct_s", &r->jct);
	printf(",\"large_finished\":%zu,", r->large_finished);
	json_stats("large_wait_s", &r->wait_large);
	printf(",\"moves\":%zu,\"lost_gpu_h\":%.3f", r->moves, r->lost_gpu_seconds / 3600.0);
	printf(",\"makespan_s\":%lld,\"gpu_util_pct\":%.3f,\"gpu_busy_pct\":%.3f,",
	       (long long)r->makespan, r->util_mean, r->busy_mean);
	if (r->jain >= 0)
		printf("\"jain\":%.5f,", r->jain);
	else
		printf("\"jain\":null,");
	printf("\"wall_s\":%.3f,\"gpu_hours\":%.3f,\"gpus_max\":%d,\"gpus_mean\":%.3f,"
	       "\"provision_delay_s\":%lld,\"nodes_requested\":%zu,\"nodes_removed\":%zu,"
	       "\"queues\":[",
	       r->wall_seconds, r->gpu_hours, r->gpus_max, r->gpus_mean,
	       (long long)r->provision_delay, r->nodes_requested, r->nodes_removed);
	for (size_t q = 0; q < r->nqueues; q++) {
		const sc_tsim_queue_t *x = &r->queues[q];
		printf("%s{\"name\":\"%s\",\"jobs\":%zu,\"finished\":%zu,", q ? "," : "", x->name,
		       x->jobs, x->finished);
		json_stats("wait_s", &x->wait);
		putchar(',');
		json_stats("jct_s", &x->jct);
		printf(",\"gpu_s\":%.1f,\"fair_gpu_s\":%.1f}", x->gpu_seconds, x->fair_seconds);
	}
	printf("],\"series\":[");
	size_t step = r->nseries / MAX_JSON_POINTS + 1;
	for (size_t i = 0; i < r->nseries; i += step) {
		const sc_tsim_point_t *p = &r->series[i];
		printf("%s{\"t\":%lld,\"gpu_util_pct\":%.3f,\"gpu_busy_pct\":%.3f,\"pending\":%zu,"
		       "\"running\":%zu,\"gpus\":%d}",
		       i ? "," : "", (long long)p->t, p->util, p->busy, p->pending, p->running,
		       p->gpus);
	}
	printf("]}\n");
}

static int write_csv(const sc_tsim_result_t *r, const sc_tjobs_t *jobs, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "starcloud simulate: %s: %s\n", path, strerror(errno));
		return 1;
	}
	fprintf(f, "job,queue,pods,gpus_per_pod,gpu_milli,arrival,start,finish,wait_s,jct_s,"
	           "preemptions\n");
	for (size_t i = 0; i < jobs->n; i++) {
		const sc_tjob_t *j = &jobs->v[i];
		const sc_tsim_job_t *o = &r->job[i];
		fprintf(f, "%s,%s,%d,%d,%d,%lld,%lld,%lld,", j->name, j->queue, j->pods, j->gpus,
		        j->gpu_milli, (long long)o->arrival, (long long)o->start,
		        (long long)o->finish);
		if (o->finish >= 0)
			fprintf(f, "%lld,%lld,%d\n", (long long)(o->start - o->arrival),
			        (long long)(o->finish - o->arrival), o->preemptions);
		else
			fprintf(f, ",,%d\n", o->preemptions);
	}
	return fclose(f) == 0 ? 0 : 1;
}

/* Utilisation and pending jobs over time; wait of each job by its start. */
static int write_plots(const sc_tsim_result_t *r, const char *dir)
{
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "starcloud simulate: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	char util[4096], wait[4096];
	snprintf(util, sizeof(util), "%s/utilisation.dat", dir);
	snprintf(wait, sizeof(wait), "%s/wait.dat", dir);
	FILE *u = fopen(util, "w"), *w = fopen(wait, "w");
	if (u)
		for (size_t i = 0; i < r->nseries; i++)
			fprintf(u, "%.4f %.3f %zu\n", (double)r->series[i].t / 3600.0,
			        r->series[i].util, r->series[i].pending);
	int64_t t0 = r->nseries ? r->series[0].t : 0;
	if (w && r->job) {
		int64_t first = INT64_MAX;
		for (size_t i = 0; i < r->jobs; i++)
			if (r->job[i].arrival < first)
				first = r->job[i].arrival;
		for (size_t i = 0; i < r->jobs; i++)
			if (r->job[i].start >= 0)
				fprintf(w, "%.4f %lld\n",
				        (double)(r->job[i].start - first + t0) / 3600.0,
				        (long long)(r->job[i].start - r->job[i].arrival));
	}
	int bad = !u || !w;
	if (u)
		fclose(u);
	if (w)
		fclose(w);
	FILE *gp = bad ? NULL : popen("gnuplot", "w");
	if (!gp) {
		fprintf(stderr, "starcloud simulate: cannot write plots into %s\n", dir);
		return 1;
	}
	fprintf(gp, "set terminal png size 900,600\nset grid\nset xlabel 'time (hours)'\n");
	fprintf(gp,
	        "set output '%s/utilisation.png'\nset title 'GPU allocation and pending jobs'\n"
	        "set ylabel 'GPUs allocated (%%)'\nset y2label 'pending jobs'\nset ytics nomirror\n"
	        "set y2tics\nset yrange [0:100]\n"
	        "plot '%s' using 1:2 with lines lw 2 title 'GPU %%', "
	        "'%s' using 1:3 axes x1y2 with lines title 'pending'\n",
	        dir, util, util);
	fprintf(gp,
	        "unset y2label\nunset y2tics\nset autoscale y\nset ytics mirror\n"
	        "set output '%s/wait.png'\nset title 'Queue wait by start time'\n"
	        "set ylabel 'wait (s)'\nplot '%s' using 1:2 with points pt 7 ps 0.4 title 'job'\n",
	        dir, wait);
	return pclose(gp) == 0 ? 0 : 1;
}

int sc_treport_output(const sc_tsim_result_t *r, const sc_tjobs_t *jobs, int policy, bool as_json,
                      const char *csv, const char *plot_dir)
{
	if (as_json)
		json(r, policy);
	else
		table(r);
	int rc = 0;
	if (csv)
		rc |= write_csv(r, jobs, csv);
	if (plot_dir)
		rc |= write_plots(r, plot_dir);
	return rc;
}
