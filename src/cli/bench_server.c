/* `starcloud bench server`: the control plane at scale, end to end
 * (docs/BENCHMARKS.md). A real server with the embedded store is started
 * in a scratch folder; a world of N nodes x 8 GPUs, 110 queues (10
 * departments of 10 teams) and M jobs (half single pods of 1-8 GPUs, 30 %
 * gangs of 2-64 pods, 20 % GPU shares, as `bench core`) is written to one
 * JSON file and loaded through the API with `apply -f`'s own code; then:
 *   settle    the time from the last answer of the apply until the loop
 *             has nothing left to do;
 *   rounds    R rounds of churn (K jobs deleted, K created, K = M / 1000,
 *             at least 10), each waited out: the cycles they cause give
 *             cycle p50/p99, and a second thread GETs one job all the
 *             while (GET p50/p99 during cycles);
 *   idle      the server's CPU over --idle seconds with nothing changing
 *             (and the cycles that ran meanwhile);
 *   store     the store's files against the live data (the bytes of
 *             every current value), after a clean stop; the change log's
 *             bytes and what compacting it cost, from /metrics;
 *   restart   a second start on the same store until /readyz says 200.
 * One JSON line goes to stdout. --server-bin runs another build (an older
 * one, for a before/after); the settle rule then needs only /metrics'
 * cycle counter, which every release has. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/cmdline.h"
#include "base/parse.h"
#include "cli/apply.h"
#include "cli/cli.h"
#include "cli/hpipe.h"
#include "net/http.h"
#include "starcloud/buf.h"
#include "starcloud/error.h"

typedef struct bs_opts {
	uint64_t nodes, jobs, seed;
	int rounds;
	double idle;
	const char *server_bin;
	const char *dir;
	int keep;
} bs_opts_t;

static const sc_flag_t bs_flags[] = {
    {.name = "--nodes",
     SC_FLAG_AT(U64, bs_opts_t, nodes),
     .min = 1,
     .max = 1e6,
     .def = "1000",
     .help = "nodes of 8 GPUs"},
    {.name = "--jobs",
     SC_FLAG_AT(U64, bs_opts_t, jobs),
     .min = 0,
     .max = 1e7,
     .help = "jobs (default: 10 per node)"},
    {.name = "--rounds",
     SC_FLAG_AT(INT, bs_opts_t, rounds),
     .min = 1,
     .max = 10000,
     .def = "20",
     .help = "rounds of churn measured"},
    {.name = "--idle",
     SC_FLAG_AT(NUM, bs_opts_t, idle),
     .min = 1,
     .max = 3600,
     .def = "20",
     .help = "seconds of idle CPU measured"},
    {.name = "--seed",
     SC_FLAG_AT(U64, bs_opts_t, seed),
     .min = 1,
     .max = 1e9,
     .def = "42",
     .help = "the world's seed"},
    {.name = "--server-bin",
     SC_FLAG_AT(STR, bs_opts_t, server_bin),
     .meta = "PATH",
     .help = "the starcloud binary to run as the server (default: this one)"},
    {.name = "--dir",
     SC_FLAG_AT(STR, bs_opts_t, dir),
     .meta = "DIR",
     .help = "scratch folder (default: a new one under $TMPDIR or /tmp)"},
    {.name = "--keep",
     SC_FLAG_AT(BOOL, bs_opts_t, keep),
     .help = "keep the scratch folder (store, world, server log)"},
};

static const sc_command_t bs_cmd = {
    .name = "bench server",
    .about = "A real server with the embedded store, a world of N nodes and M jobs loaded\n"
             "through the API; prints one JSON line: apply rate, time to settle, cycle\n"
             "p50/p99, idle CPU share, GET p99 during cycles, peak RSS, the data folder's\n"
             "bytes at a clean stop (store_bytes: the store's files, db_bytes, and the audit\n"
             "log, audit_bytes) and while running (running_bytes, WAL included), restart\n"
             "to ready.",
    .flags = bs_flags,
    .nflags = sizeof(bs_flags) / sizeof(bs_flags[0]),
};

typedef struct bench {
	bs_opts_t o;
	char dir[512];
	char bin[1024];
	char base[64];
	char token[256];
	int port;
	pid_t pid;
	uint64_t rng;
	CURL *h; /* the main thread's keep-alive handle */
	/* the GET thread */
	pthread_t getter;
	volatile int get_stop;
	double *gets;
	size_t ngets, capgets;
	char get_path[128];
} bench_t;

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rnd(bench_t *b)
{
	uint64_t z = (b->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------------
 * The world
 * ------------------------------------------------------------------- */

static void write_job(bench_t *b, FILE *f, const char *name)
{
	uint64_t kind = rnd(b) % 10;
	int replicas = 1;
	char res[96];
	if (kind < 5) {
		snprintf(res, sizeof(res), "\"gpu\":%d", 1 << (rnd(b) % 4));
	} else if (kind < 8) {
		replicas = 2 + (int)(rnd(b) % 63);
		snprintf(res, sizeof(res), "\"gpu\":%d", 8 >> (rnd(b) % 2));
	} else {
		snprintf(res, sizeof(res), "\"gpuFraction\":0.%d", 1 + (int)(rnd(b) % 9));
	}
	fprintf(f,
	        "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
	        "\"%s\"},\"spec\":{\"queue\":\"team-%d-%d\",\"tasks\":[{\"name\":\"w\","
	        "\"replicas\":%d,\"resources\":{\"cpu\":4,\"memory\":\"16Gi\",%s}}]}}\n",
	        name, (int)(rnd(b) % 10), (int)(rnd(b) % 10), replicas, res);
}

static int write_world(bench_t *b, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return SC_EIO;
	double gpus = (double)b->o.nodes * 8;
	for (uint64_t i = 0; i < b->o.nodes; i++)
		fprintf(f,
		        "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Node\",\"metadata\":{"
		        "\"name\":\"node-%05llu\",\"labels\":{\"rack\":\"r%04llu\",\"zone\":\"z%"
		        "llu\"}},"
		        "\"spec\":{\"cpu\":128,\"memory\":\"1Ti\",\"gpus\":{\"count\":8,\"model\":"
		        "\"%s\",\"memory\":\"80Gi\"}}}\n",
		        (unsigned long long)i, (unsigned long long)(i / 32),
		        (unsigned long long)(i % 2), i % 4 == 0 ? "A100-80GB" : "H100-80GB");
	for (int d = 0; d < 10; d++) {
		fprintf(f,
		        "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Queue\",\"metadata\":{"
		        "\"name\":\"dept-%d\"},\"spec\":{\"resources\":{\"gpu\":{\"quota\":%.0f,"
		        "\"overQuotaWeight\":%d}}}}\n",
		        d, gpus * 0.08, 1 + (int)(rnd(b) % 3));
		for (int t = 0; t < 10; t++)
			fprintf(
			    f,
			    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Queue\",\"metadata\":"
			    "{\"name\":\"team-%d-%d\"},\"spec\":{\"parentQueue\":\"dept-%d\","
			    "\"resources\":{\"gpu\":{\"quota\":%.0f,\"overQuotaWeight\":%d}}}}\n",
			    d, t, d, gpus * 0.008, 1 + (int)(rnd(b) % 3));
	}
	for (uint64_t j = 0; j < b->o.jobs; j++) {
		char name[32];
		snprintf(name, sizeof(name), "job-%06llu", (unsigned long long)j);
		write_job(b, f, name);
	}
	return fclose(f) == 0 ? 0 : SC_EIO;
}

/* ---------------------------------------------------------------------
 * The server process
 * ------------------------------------------------------------------- */

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
	return sc_buf_append(ud, p, size * n) < 0 ? 0 : size * n;
}

/* GET path on handle h (kept alive); the body goes to out. Returns the
 * status, or -1. */
static long get(bench_t *b, CURL *h, const char *path, sc_buf_t *out)
{
	char url[512], auth[300];
	snprintf(url, sizeof(url), "%s%s", b->base, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", b->token);
	struct curl_slist *hdrs = b->token[0] ? curl_slist_append(NULL, auth) : NULL;
	sc_buf_reset(out);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
	long status = -1;
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	return status;
}

static int start_server(bench_t *b)
{
	char listen[64], data[600], tok[600], log[600];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", b->port);
	snprintf(data, sizeof(data), "%s/data", b->dir);
	snprintf(tok, sizeof(tok), "%s/token", b->dir);
	snprintf(log, sizeof(log), "%s/server.log", b->dir);
	pid_t pid = fork();
	if (pid < 0)
		return SC_EIO;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(b->bin, b->bin, "server", "--listen", listen, "--data-dir", data,
		      "--admin-token-file", tok, (char *)NULL);
		_exit(127);
	}
	b->pid = pid;
	return 0;
}

/* Waits until path answers 200; the seconds it took, or -1. */
static double wait_for(bench_t *b, const char *path, double limit)
{
	double t0 = mono();
	sc_buf_t out;
	sc_buf_init(&out, 1 << 20);
	while (mono() - t0 < limit) {
		int st;
		if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
			b->pid = 0;
			break;
		}
		if (get(b, b->h, path, &out) == 200) {
			sc_buf_free(&out);
			return mono() - t0;
		}
		sleep_s(0.01);
	}
	sc_buf_free(&out);
	return -1;
}

static void stop_server(bench_t *b)
{
	if (b->pid <= 0)
		return;
	kill(b->pid, SIGTERM);
	for (int i = 0; i < 600; i++) {
		int st;
		if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
			b->pid = 0;
			return;
		}
		sleep_s(0.05);
	}
	kill(b->pid, SIGKILL);
	waitpid(b->pid, NULL, 0);
	b->pid = 0;
}

static int read_token(bench_t *b)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/token", b->dir);
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(path, "r");
		if (f) {
			int ok = fgets(b->token, sizeof(b->token), f) != NULL;
			fclose(f);
			b->token[strcspn(b->token, "\r\n")] = '\0';
			if (ok && b->token[0])
				return 0;
		}
		sleep_s(0.05);
	}
	return SC_EIO;
}

/* /proc figures of the server: CPU seconds (user + system, all threads)
 * and peak RSS in MiB. */
static double proc_cpu(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	/* Fields after the command: state is 3rd; utime 14th, stime 15th. */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double proc_hwm_mib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	double v = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %lf", &v) == 1)
			v /= 1024.0;
	if (f)
		fclose(f);
	return v;
}

/* ---------------------------------------------------------------------
 * What the server says
 * ------------------------------------------------------------------- */

/* The value of an unlabelled series in /metrics text, or -1. */
static double metric(const char *text, const char *name)
{
	size_t n = strlen(name);
	double v;
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, name, n) == 0 && (p[n] == ' ' || strncmp(p + n, "{} ", 3) == 0) &&
		    sscanf(p + n + (p[n] == ' ' ? 1 : 3), "%lf", &v) == 1)
			return v;
	return -1;
}

typedef struct loopstate {
	double cycles, sum; /* the cycle histogram's count and sum */
	double busy;        /* starcloud_schedule_busy, or -1 (older servers) */
	long long rev;      /* the store's revision */
} loopstate_t;

static int loop_state(bench_t *b, loopstate_t *s)
{
	sc_buf_t out;
	sc_buf_init(&out, 64 << 20);
	int rc = SC_EIO;
	if (get(b, b->h, "/metrics", &out) == 200) {
		s->cycles = metric(out.data, "starcloud_schedule_cycle_duration_seconds_count");
		s->sum = metric(out.data, "starcloud_schedule_cycle_duration_seconds_sum");
		s->busy = metric(out.data, "starcloud_schedule_busy");
		/* Every list carries the revision it was read at. */
		if (get(b, b->h, "/api/v1/priorityclasses", &out) == 200) {
			json_t *doc = json_loadb(out.data, out.len, 0, NULL);
			const char *rv = json_string_value(
			    json_object_get(json_object_get(doc, "metadata"), "resourceVersion"));
			int64_t v = -1;
			if (rv)
				sc_parse_i64(rv, 0, INT64_MAX, &v);
			s->rev = v;
			json_decref(doc);
			rc = 0;
		}
	}
	sc_buf_free(&out);
	return rc;
}

typedef struct samples {
	double *v;
	size_t n, cap;
} samples_t;

static void add_sample(samples_t *s, double v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		s->v = sc_xreallocarray(s->v, s->cap, sizeof(*s->v));
	}
	s->v[s->n++] = v;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(samples_t *s, double p)
{
	if (!s->n)
		return -1;
	qsort(s->v, s->n, sizeof(double), cmp_d);
	size_t i = (size_t)(p * (double)(s->n - 1) + 0.5);
	return s->v[i];
}

/* Waits until the loop has nothing left to do: no change waits for a
 * cycle and none runs (starcloud_schedule_busy 0), a cycle has run since
 * the writes (the cycle count was c_start before them) and the revision
 * held between two polls; an older server without the gauge: two cycles
 * since the revision last moved. Cycles seen on the way go into cycles
 * (each poll's new cycles at their mean duration). Returns the seconds
 * it took, or -1 after limit. */
static double settle(bench_t *b, samples_t *cycles, double limit, double c_start)
{
	double t0 = mono();
	loopstate_t s, last = {0};
	double cycles_at_change = -1;
	int have = 0;
	while (mono() - t0 < limit) {
		if (loop_state(b, &s) < 0)
			return -1;
		if (have && s.cycles > last.cycles && cycles)
			for (double k = 0; k < s.cycles - last.cycles; k++)
				add_sample(cycles, (s.sum - last.sum) / (s.cycles - last.cycles));
		if (!have || s.rev != last.rev)
			cycles_at_change = s.cycles;
		int quiet = s.busy >= 0 ? s.busy == 0 && s.cycles > c_start
		                        : s.cycles >= cycles_at_change + 2;
		if (have && quiet && s.rev == last.rev)
			return mono() - t0;
		last = s;
		have = 1;
		sleep_s(0.02);
	}
	return -1;
}

/* ---------------------------------------------------------------------
 * GETs during cycles
 * ------------------------------------------------------------------- */

static void *getter(void *ud)
{
	bench_t *b = ud;
	CURL *h = curl_easy_init();
	sc_buf_t out;
	sc_buf_init(&out, 1 << 20);
	while (!b->get_stop) {
		double t0 = mono();
		long st = get(b, h, b->get_path, &out);
		double dt = mono() - t0;
		if (st == 200) {
			if (b->ngets == b->capgets) {
				b->capgets = b->capgets ? b->capgets * 2 : 4096;
				b->gets = sc_xreallocarray(b->gets, b->capgets, sizeof(double));
			}
			b->gets[b->ngets++] = dt;
		}
		sleep_s(0.002);
	}
	sc_buf_free(&out);
	curl_easy_cleanup(h);
	return NULL;
}

/* ---------------------------------------------------------------------
 * Churn
 * ------------------------------------------------------------------- */

typedef struct churn {
	size_t ok, failed;
} churn_t;

static void on_churn(void *ud, uint64_t tag, const sc_hpipe_reply_t *r)
{
	churn_t *c = ud;
	if (r->status >= 200 && r->status < 300)
		c->ok++;
	else
		c->failed++;
}

/* One round: k random jobs of the first `jobs` deleted (some are gone
 * already: a 404 is counted, not fatal) and k new ones created. */
static int churn_round(bench_t *b, int round, size_t k, churn_t *c)
{
	char err[600];
	sc_hpipe_t *p =
	    sc__hpipe_open(b->base, strlen(b->base), b->token, NULL, on_churn, c, err, sizeof(err));
	if (!p) {
		fprintf(stderr, "starcloud bench: %s\n", err);
		return SC_EIO;
	}
	char path[128], *jobs = NULL;
	size_t jlen = 0;
	for (size_t i = 0; i < k; i++) {
		snprintf(path, sizeof(path), "/api/v1/jobs/job-%06llu",
		         (unsigned long long)(rnd(b) % b->o.jobs));
		sc__hpipe_send(p, "DELETE", path, NULL, 0, 0);
	}
	FILE *f = open_memstream(&jobs, &jlen);
	if (!f) {
		sc__hpipe_close(p);
		return SC_ENOMEM;
	}
	for (size_t i = 0; i < k; i++) {
		char name[48];
		snprintf(name, sizeof(name), "job-r%04d-%05zu", round, i);
		write_job(b, f, name);
	}
	fclose(f);
	for (char *line = jobs, *nl; line && *line; line = nl + 1) {
		if (!(nl = strchr(line, '\n')))
			break;
		sc__hpipe_send(p, "POST", "/api/v1/jobs", line, (size_t)(nl - line), 0);
	}
	free(jobs);
	int rc = sc__hpipe_drain(p, 0);
	sc__hpipe_close(p);
	return rc;
}

/* ---------------------------------------------------------------------
 * The store's size
 * ------------------------------------------------------------------- */

/* The bytes under path: with prefix NULL every file (dot files left out)
 * in every folder below; else the regular files of path itself whose name
 * starts with prefix (the store's: store.db, its WAL and shared memory; the
 * audit log's). */
static long long bytes_in(const char *path, const char *prefix)
{
	DIR *d = opendir(path);
	long long total = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		char p[1200];
		struct stat st;
		if (prefix ? strncmp(e->d_name, prefix, strlen(prefix)) != 0 : e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (stat(p, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			total += prefix ? 0 : bytes_in(p, NULL);
		else if (!prefix || S_ISREG(st.st_mode))
			total += (long long)st.st_size;
	}
	if (d)
		closedir(d);
	return total;
}

/* The live data: the bytes of every current value, as a full list of
 * each kind answers them (less the resourceVersion the answer adds). */
static long long live_bytes(bench_t *b)
{
	static const char *const kinds[] = {"nodes", "queues",      "priorityclasses",
	                                    "jobs",  "deployments", "events"};
	long long total = 0;
	sc_buf_t out;
	sc_buf_init(&out, 4u << 30);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		char path[64];
		snprintf(path, sizeof(path), "/api/v1/%s?limit=0", kinds[k]); /* no paging */
		if (get(b, b->h, path, &out) != 200)
			return -1;
		json_t *doc = json_loadb(out.data, out.len, 0, NULL), *it;
		size_t i;
		json_array_foreach(json_object_get(doc, "items"), i, it)
		{
			json_t *md = json_object_get(it, "metadata");
			json_object_del(md, "resourceVersion");
			char *t = json_dumps(it, JSON_COMPACT);
			total += t ? (long long)strlen(t) : 0;
			free(t);
		}
		json_decref(doc);
	}
	sc_buf_free(&out);
	return total;
}

/* ---------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------- */

static void loadavg(double v[3])
{
	FILE *f = fopen("/proc/loadavg", "r");
	v[0] = v[1] = v[2] = -1;
	if (f) {
		if (fscanf(f, "%lf %lf %lf", &v[0], &v[1], &v[2]) != 3)
			v[0] = -1;
		fclose(f);
	}
}

static int setup(bench_t *b)
{
	if (b->o.dir) {
		snprintf(b->dir, sizeof(b->dir), "%s", b->o.dir);
		if (mkdir(b->dir, 0700) < 0 && errno != EEXIST)
			return SC_EIO;
	} else {
		const char *t = getenv("TMPDIR");
		snprintf(b->dir, sizeof(b->dir), "%s/sc-bench-XXXXXX", t && t[0] ? t : "/tmp");
		if (!mkdtemp(b->dir))
			return SC_EIO;
	}
	if (b->o.server_bin)
		snprintf(b->bin, sizeof(b->bin), "%s", b->o.server_bin);
	else if (readlink("/proc/self/exe", b->bin, sizeof(b->bin) - 1) < 0)
		return SC_EIO;
	b->port = sc_http_free_loopback_port();
	snprintf(b->base, sizeof(b->base), "http://127.0.0.1:%d", b->port);
	b->h = curl_easy_init();
	b->rng = b->o.seed;
	return b->port > 0 && b->h ? 0 : SC_EIO;
}

static void cleanup(bench_t *b)
{
	stop_server(b);
	if (b->h)
		curl_easy_cleanup(b->h);
	if (!b->o.keep && !b->o.dir) {
		char cmd[700];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "starcloud bench: could not remove %s\n", b->dir);
	}
	free(b->gets);
}

typedef struct result {
	double load0[3], load1[3];
	double apply_s, settle_s, idle_cpu, rss, restart_s;
	double idle_cycles;                       /* cycles during the idle phase */
	double log_bytes, compactions, compact_s; /* the store's change log (-1: not shown) */
	size_t objects, applied_failed;
	samples_t cycles, gets;
	long long store, live;
	long long db, audit; /* of store: the store's files, the audit log's */
	long long running;   /* the data folder at the end of the idle window (WAL and all) */
} result_t;

static int phase_load(bench_t *b, result_t *r)
{
	char world[600];
	snprintf(world, sizeof(world), "%s/world.json", b->dir);
	if (write_world(b, world) < 0)
		return SC_EIO;
	sc_apply_t a = {.servers = b->base, .token = b->token, .tty = true, .quiet = true};
	loopstate_t before;
	if (loop_state(b, &before) < 0)
		return SC_EIO;
	double t0 = mono();
	sc__apply_file(&a, world);
	r->apply_s = mono() - t0;
	r->objects = a.created + a.configured + a.failed;
	r->applied_failed = a.failed;
	if (a.failed)
		fprintf(stderr, "starcloud bench: %zu objects were refused\n", a.failed);
	r->settle_s = settle(b, NULL, 3600, before.cycles);
	return r->settle_s < 0 ? SC_EIO : 0;
}

static int phase_rounds(bench_t *b, result_t *r)
{
	size_t k = b->o.jobs / 1000 < 10 ? 10 : b->o.jobs / 1000;
	churn_t c = {0};
	snprintf(b->get_path, sizeof(b->get_path), "/api/v1/jobs/job-%06llu",
	         (unsigned long long)(b->o.jobs - 1));
	b->get_stop = 0;
	if (pthread_create(&b->getter, NULL, getter, b) != 0)
		return SC_EIO;
	int rc = 0;
	for (int i = 0; i < b->o.rounds && rc == 0; i++) {
		loopstate_t before;
		if ((rc = loop_state(b, &before)) < 0)
			break;
		rc = churn_round(b, i, k, &c);
		if (rc == 0 && settle(b, &r->cycles, 600, before.cycles) < 0)
			rc = SC_EIO;
	}
	b->get_stop = 1;
	pthread_join(b->getter, NULL);
	r->gets.v = b->gets;
	r->gets.n = r->gets.cap = b->ngets;
	b->gets = NULL;
	return rc;
}

static int phase_idle(bench_t *b, result_t *r)
{
	loopstate_t s0, s1;
	if (loop_state(b, &s0) < 0)
		return SC_EIO;
	double c0 = proc_cpu(b->pid), t0 = mono();
	sleep_s(b->o.idle);
	r->idle_cpu = (proc_cpu(b->pid) - c0) / (mono() - t0);
	r->rss = proc_hwm_mib(b->pid);
	char data[600];
	snprintf(data, sizeof(data), "%s/data", b->dir);
	r->running = bytes_in(data, NULL);
	if (loop_state(b, &s1) < 0)
		return SC_EIO;
	r->idle_cycles = s1.cycles - s0.cycles;
	return 0;
}

/* The change log's figures (servers before issue 24 show none: -1). */
static void store_metrics(bench_t *b, result_t *r)
{
	sc_buf_t out;
	sc_buf_init(&out, 64 << 20);
	r->log_bytes = r->compactions = r->compact_s = -1;
	if (get(b, b->h, "/metrics", &out) == 200) {
		r->log_bytes = metric(out.data, "starcloud_store_log_bytes");
		r->compactions = metric(out.data, "starcloud_store_compactions_total");
		r->compact_s = metric(out.data, "starcloud_store_compaction_seconds_total");
	}
	sc_buf_free(&out);
}

static int phase_restart(bench_t *b, result_t *r)
{
	char data[600];
	r->live = live_bytes(b);
	store_metrics(b, r);
	stop_server(b);
	snprintf(data, sizeof(data), "%s/data", b->dir);
	r->store = bytes_in(data, NULL);
	r->db = bytes_in(data, "store.db");
	r->audit = bytes_in(data, "audit.log");
	if (start_server(b) < 0)
		return SC_EIO;
	r->restart_s = wait_for(b, "/readyz", 600);
	return r->restart_s < 0 ? SC_EIO : 0;
}

static void print_result(const bench_t *b, result_t *r)
{
	double c50 = pct(&r->cycles, 0.5), c99 = pct(&r->cycles, 0.99);
	double cmax = r->cycles.n ? r->cycles.v[r->cycles.n - 1] : -1;
	double g50 = pct(&r->gets, 0.5), g99 = pct(&r->gets, 0.99);
	double gmax = r->gets.n ? r->gets.v[r->gets.n - 1] : -1;
	printf("{\"nodes\":%llu,\"jobs\":%llu,\"objects\":%zu,\"apply_s\":%.2f,"
	       "\"apply_per_s\":%.0f,\"settle_s\":%.2f,\"cycles\":%zu,\"cycle_p50_s\":%.3f,"
	       "\"cycle_p99_s\":%.3f,\"cycle_max_s\":%.3f,\"idle_cpu_share\":%.4f,"
	       "\"gets\":%zu,\"get_p50_ms\":%.2f,\"get_p99_ms\":%.2f,\"get_max_ms\":%.1f,"
	       "\"peak_rss_mib\":%.0f,\"store_bytes\":%lld,\"live_bytes\":%lld,"
	       "\"store_ratio\":%.2f,\"db_bytes\":%lld,\"audit_bytes\":%lld,"
	       "\"running_bytes\":%lld,\"log_bytes\":%.0f,\"compactions\":%.0f,"
	       "\"compaction_s\":%.3f,\"idle_cycles\":%.0f,\"restart_to_ready_s\":%.2f,"
	       "\"load_before\":%.2f,\"load_after\":%.2f}\n",
	       (unsigned long long)b->o.nodes, (unsigned long long)b->o.jobs, r->objects,
	       r->apply_s, (double)r->objects / r->apply_s, r->settle_s, r->cycles.n, c50, c99,
	       cmax, r->idle_cpu, r->gets.n, g50 * 1e3, g99 * 1e3, gmax * 1e3, r->rss, r->store,
	       r->live, r->live > 0 ? (double)r->store / (double)r->live : -1, r->db, r->audit,
	       r->running, r->log_bytes, r->compactions, r->compact_s, r->idle_cycles, r->restart_s,
	       r->load0[0], r->load1[0]);
	fflush(stdout);
}

int sc__bench_server(int argc, char **argv)
{
	bench_t b = {0};
	result_t r = {0};
	int prc = sc_flags_parse(&bs_cmd, &b.o, argc, argv, NULL);
	if (prc != 0)
		return prc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (!b.o.jobs)
		b.o.jobs = 10 * b.o.nodes;
	signal(SIGPIPE, SIG_IGN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	loadavg(r.load0);
	const char *step = "setup";
	int rc = setup(&b);
	if (rc == 0 && (rc = start_server(&b)) == 0 && (rc = read_token(&b)) == 0 &&
	    wait_for(&b, "/healthz", 120) < 0)
		rc = SC_EIO;
	if (rc == 0 && (step = "load", rc = phase_load(&b, &r)) == 0 &&
	    (step = "rounds", rc = phase_rounds(&b, &r)) == 0 &&
	    (step = "idle", rc = phase_idle(&b, &r)) == 0)
		step = "restart", rc = phase_restart(&b, &r);
	loadavg(r.load1);
	if (rc < 0)
		fprintf(stderr, "starcloud bench server: %s failed (log: %s/server.log)\n", step,
		        b.dir);
	else
		print_result(&b, &r);
	if (rc < 0)
		b.o.keep = 1;
	cleanup(&b);
	free(r.cycles.v);
	free(r.gets.v);
	return rc < 0 ? SC_EXIT_FAIL : SC_EXIT_OK;
}
