/* API benchmark of the control plane (`make bench-api`).
 *
 * Starts `starcloud server` on a free loopback port with a fresh data
 * folder, then measures with N concurrent clients (threads, one keep-alive
 * connection each):
 *   1. apply: POST of small single-pod jobs (throughput, p50/p99 latency),
 *      with the scheduling loop running (4 nodes x 8 GPUs, one queue, so
 *      32 jobs run and the rest get a pending reason written back);
 *   2. get: GET of one job;
 *   3. list: GET of the whole job collection (10,000 jobs by default; the
 *      answer is checked to hold every job), then pages of ?limit=500;
 *   4. apply-to-bound on a second, idle server: one client POSTs a
 *      single-pod job and polls it until status.pods[0] is Running, then
 *      deletes it; the event-triggered cycle is what binds it;
 *   5. noisy neighbour (issue 16): on a fresh server, tenant B reads one of
 *      its jobs in a loop, alone, then while tenant A floods the server with
 *      writes from 16 connections (merge patches of its own jobs, sent again
 *      at once whatever the answer); B's p99 under the flood against idle,
 *      with flow control (the default) and, for comparison in the same run,
 *      with --no-flow-control (every request in arrival order, every answer
 *      after the group commit, as before).
 * Prints one line per measurement; docs/BENCHMARKS.md keeps the figures. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct server {
	pid_t pid;
	int port;
	char token[128];
	char dir[64];
} server_t;

static const char *bin = "build/starcloud";

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &len);
	close(fd);
	return ntohs(a.sin_port);
}

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads more bytes into *buf (growing it); -1 on EOF or error. */
static int read_more(int fd, char **buf, size_t *len, size_t *cap)
{
	if (*len == *cap) {
		*cap *= 2;
		*buf = realloc(*buf, *cap + 1);
	}
	ssize_t r = read(fd, *buf + *len, *cap - *len);
	if (r <= 0)
		return -1;
	*len += (size_t)r;
	(*buf)[*len] = '\0';
	return 0;
}

/* Decodes a chunked body that starts at buf + off, reading as needed; the
 * decoded bytes are moved to buf + off. Returns the body length or -1. */
static long dechunk(int fd, char **buf, size_t *len, size_t *cap, size_t off)
{
	size_t in = off, out = off;
	for (;;) {
		char *eol;
		while (!(eol = strstr(*buf + in, "\r\n")))
			if (read_more(fd, buf, len, cap) < 0)
				return -1;
		size_t n = strtoul(*buf + in, NULL, 16);
		size_t data = (size_t)(eol + 2 - *buf);
		while (*len < data + n + 2)
			if (read_more(fd, buf, len, cap) < 0)
				return -1;
		memmove(*buf + out, *buf + data, n);
		out += n;
		in = data + n + 2;
		if (n == 0)
			break;
	}
	(*buf)[out] = '\0';
	return (long)(out - off);
}

/* One request on a keep-alive connection; the body of the answer goes to
 * *body (malloc'd, caller frees) when body is not NULL. Answers with a
 * Content-Length or chunked (large lists). Returns the status or -1. */
static int request(int fd, const char *token, const char *method, const char *path,
                   const char *data, char **body)
{
	char head[1024];
	size_t dlen = data ? strlen(data) : 0;
	int n = snprintf(head, sizeof(head),
	                 "%s %s HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer %s\r\n"
	                 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
	                 method, path, token, dlen);
	if (write(fd, head, (size_t)n) != n || (dlen && write(fd, data, dlen) != (ssize_t)dlen))
		return -1;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap + 1), *end = NULL;
	buf[0] = '\0';
	while (!(end = strstr(buf, "\r\n\r\n")))
		if (read_more(fd, &buf, &len, &cap) < 0)
			goto fail;
	int status = atoi(buf + 9);
	size_t hlen = (size_t)(end + 4 - buf);
	long want;
	end[2] = '\0'; /* header lookups stay in the header */
	if (strcasestr(buf, "Transfer-Encoding: chunked")) {
		end[2] = '\r';
		want = dechunk(fd, &buf, &len, &cap, hlen);
		if (want < 0)
			goto fail;
	} else {
		const char *cl = strcasestr(buf, "Content-Length:");
		end[2] = '\r';
		want = cl ? (long)strtoul(cl + 15, NULL, 10) : 0;
		while (len < hlen + (size_t)want)
			if (read_more(fd, &buf, &len, &cap) < 0)
				goto fail;
		buf[hlen + (size_t)want] = '\0';
	}
	if (body) {
		memmove(buf, buf + hlen, (size_t)want + 1);
		*body = buf;
	} else {
		free(buf);
	}
	return status;
fail:
	free(buf);
	return -1;
}

/* Items in a list answer (each item is one object with an apiVersion). */
static long count_items(const char *body)
{
	long n = -1; /* the list's own apiVersion */
	for (const char *p = body; (p = strstr(p, "\"apiVersion\"")); p++)
		n++;
	return n;
}

/* extra: one more server flag, or NULL. */
static int start_server_with(server_t *s, const char *extra)
{
	int pipefd[2];
	snprintf(s->dir, sizeof(s->dir), "/tmp/sc-bench-XXXXXX");
	if (!mkdtemp(s->dir) || pipe(pipefd) < 0)
		return -1;
	s->port = free_port();
	char listen[64], data[96];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", s->port);
	snprintf(data, sizeof(data), "%s/data", s->dir);
	s->pid = fork();
	if (s->pid == 0) {
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		execl(bin, bin, "server", "--listen", listen, "--data-dir", data, extra,
		      (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	FILE *f = fdopen(pipefd[0], "r");
	char line[512];
	if (!f || !fgets(line, sizeof(line), f))
		return -1;
	const char *t = strstr(line, "sc_");
	if (!t)
		return -1;
	snprintf(s->token, sizeof(s->token), "%.*s", (int)strspn(t, "sc_0123456789abcdef"), t);
	fclose(f);
	for (int i = 0; i < 200; i++) {
		int fd = dial(s->port);
		if (fd >= 0) {
			int st = request(fd, s->token, "GET", "/readyz", NULL, NULL);
			close(fd);
			if (st == 200)
				return 0;
		}
		usleep(20000);
	}
	return -1;
}

static void stop_server(server_t *s)
{
	char cmd[128];
	kill(s->pid, SIGTERM);
	waitpid(s->pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", s->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench: could not remove %s\n", s->dir);
}

static const char *node_json =
    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Node\",\"metadata\":"
    "{\"name\":\"n%d\"},\"spec\":{\"cpu\":64,\"memory\":\"512Gi\","
    "\"gpus\":{\"count\":8,\"model\":\"A100-80GB\",\"memory\":\"80Gi\"}}}";
static const char *queue_json =
    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Queue\",\"metadata\":"
    "{\"name\":\"bench\"},\"spec\":{\"resources\":{\"gpu\":{\"quota\":"
    "32,\"overQuotaWeight\":1,\"limit\":-1}}}}";
static const char *job_json =
    "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Job\",\"metadata\":"
    "{\"name\":\"%s\"},\"spec\":{\"queue\":\"bench\",\"tasks\":[{\"name\":"
    "\"w\",\"replicas\":1,\"resources\":{\"cpu\":1,\"memory\":\"1Gi\","
    "\"gpu\":1}}]}}";

static void cluster(server_t *s, int nodes)
{
	char body[512];
	int fd = dial(s->port);
	for (int i = 0; i < nodes; i++) {
		snprintf(body, sizeof(body), node_json, i);
		request(fd, s->token, "POST", "/api/v1/nodes", body, NULL);
	}
	request(fd, s->token, "POST", "/api/v1/queues", queue_json, NULL);
	close(fd);
}

/* ---- concurrent phases ---------------------------------------------- */

enum { OP_APPLY, OP_GET, OP_LIST, OP_PAGE };

typedef struct worker {
	pthread_t th;
	server_t *s;
	int op, id, n, errors;
	long expect; /* items a list must return */
	double *lat;
} worker_t;

static void *work(void *p)
{
	worker_t *w = p;
	char body[512], name[64];
	int fd = dial(w->s->port);
	for (int i = 0; i < w->n; i++) {
		double t0 = now_s();
		int st;
		if (w->op == OP_APPLY) {
			snprintf(name, sizeof(name), "j-%d-%d", w->id, i);
			snprintf(body, sizeof(body), job_json, name);
			st = request(fd, w->s->token, "POST", "/api/v1/jobs", body, NULL) == 201;
		} else if (w->op == OP_GET) {
			st = request(fd, w->s->token, "GET", "/api/v1/jobs/j-0-0", NULL, NULL) ==
			     200;
		} else if (w->op == OP_LIST) {
			char *resp = NULL;
			st = request(fd, w->s->token, "GET", "/api/v1/jobs?limit=0", NULL, &resp) ==
			         200 &&
			     count_items(resp) == w->expect;
			free(resp);
		} else {
			char *resp = NULL;
			st = request(fd, w->s->token, "GET", "/api/v1/jobs?limit=500", NULL,
			             &resp) == 200 &&
			     count_items(resp) == 500 && strstr(resp, "\"continue\":\"");
			free(resp);
		}
		w->lat[i] = now_s() - t0;
		w->errors += !st;
	}
	close(fd);
	return NULL;
}

/* CPU seconds (user + system, all threads) the server has used: on a
 * shared machine, CPU per request is the figure that load does not skew. */
static double server_cpu(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	unsigned long ut = 0, st = 0;
	/* Fields after the command: state is 3rd, utime 14th, stime 15th. */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *what, double *lat, size_t n, double wall, int errors, double cpu)
{
	qsort(lat, n, sizeof(*lat), cmp_d);
	printf("%-16s %7zu requests %9.0f/s  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  errors %d"
	       "  server cpu %.0f us/request\n",
	       what, n, (double)n / wall, lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3,
	       lat[n - 1] * 1e3, errors, cpu * 1e6 / (double)n);
	fflush(stdout);
}

static void phase(server_t *s, const char *what, int op, int clients, int per_client, long expect)
{
	worker_t *w = calloc((size_t)clients, sizeof(*w));
	double *lat = calloc((size_t)clients * (size_t)per_client, sizeof(*lat));
	int errors = 0;
	double t0 = now_s(), cpu0 = server_cpu(s->pid);
	for (int i = 0; i < clients; i++) {
		w[i] = (worker_t){.s = s,
		                  .op = op,
		                  .id = i,
		                  .n = per_client,
		                  .expect = expect,
		                  .lat = lat + (size_t)i * (size_t)per_client};
		pthread_create(&w[i].th, NULL, work, &w[i]);
	}
	for (int i = 0; i < clients; i++) {
		pthread_join(w[i].th, NULL);
		errors += w[i].errors;
	}
	report(what, lat, (size_t)clients * (size_t)per_client, now_s() - t0, errors,
	       server_cpu(s->pid) - cpu0);
	free(lat);
	free(w);
}

/* ---- apply-to-bound --------------------------------------------------- */

static void apply_to_bound(server_t *s, int rounds)
{
	double *lat = calloc((size_t)rounds, sizeof(*lat));
	char body[512], name[64], path[128];
	int fd = dial(s->port), errors = 0;
	double t0 = now_s(), cpu0 = server_cpu(s->pid);
	for (int i = 0; i < rounds; i++) {
		snprintf(name, sizeof(name), "b-%d", i);
		snprintf(body, sizeof(body), job_json, name);
		snprintf(path, sizeof(path), "/api/v1/jobs/%s", name);
		double start = now_s();
		if (request(fd, s->token, "POST", "/api/v1/jobs", body, NULL) != 201)
			errors++;
		for (;;) {
			char *resp = NULL;
			request(fd, s->token, "GET", path, NULL, &resp);
			int bound = resp && strstr(resp, "\"phase\":\"Running\"") != NULL;
			free(resp);
			if (bound || now_s() - start > 5)
				break;
			usleep(200); /* poll every 0.2 ms */
		}
		lat[i] = now_s() - start;
		request(fd, s->token, "DELETE", path, NULL, NULL);
		usleep(5000); /* idle between rounds: the cluster is empty again */
	}
	close(fd);
	report("apply-to-bound", lat, (size_t)rounds, now_s() - t0, errors,
	       server_cpu(s->pid) - cpu0);
	free(lat);
}

/* ---- noisy neighbour ----------------------------------------------- */

typedef struct flood {
	pthread_t th;
	server_t *s;
	const char *token;
	int id;
	volatile int *stop;
	long sent, refused; /* requests, of them 429 */
} flood_t;

static void *flood_work(void *p)
{
	flood_t *f = p;
	char path[64], body[128];
	int fd = dial(f->s->port);
	snprintf(path, sizeof(path), "/api/v1/jobs/a-%d", f->id);
	for (long i = 0; !*f->stop; i++) {
		snprintf(body, sizeof(body), "{\"metadata\":{\"labels\":{\"n\":\"%ld\"}}}", i);
		int st = request(fd, f->token, "PATCH", path, body, NULL);
		if (st < 0) { /* closed (a 429 may close nothing; be safe) */
			close(fd);
			fd = dial(f->s->port);
		}
		f->sent++;
		f->refused += st == 429;
	}
	close(fd);
	return NULL;
}

/* Creates a tenant token for queue q; the secret into out. */
static int tenant(server_t *s, const char *q, char *out, size_t outsz)
{
	char body[128], *resp = NULL;
	int fd = dial(s->port);
	snprintf(body, sizeof(body), "{\"role\":\"tenant\",\"queues\":[\"%s\"]}", q);
	int st = request(fd, s->token, "POST", "/api/v1/tokens", body, &resp);
	close(fd);
	const char *t = resp ? strstr(resp, "\"token\":\"") : NULL;
	if (st != 201 || !t) {
		free(resp);
		return -1;
	}
	snprintf(out, outsz, "%.*s", (int)strcspn(t + 9, "\""), t + 9);
	free(resp);
	return 0;
}

/* B's reads for secs seconds; latencies into lat (at most max). */
static size_t reads(server_t *s, const char *token, double secs, double *lat, size_t max)
{
	size_t n = 0;
	int fd = dial(s->port);
	double end = now_s() + secs;
	while (now_s() < end && n < max) {
		double t0 = now_s();
		if (request(fd, token, "GET", "/api/v1/jobs/b-0", NULL, NULL) != 200) {
			close(fd);
			fd = dial(s->port);
			continue;
		}
		lat[n++] = now_s() - t0;
	}
	close(fd);
	return n;
}

static double pct(double *lat, size_t n, int p)
{
	qsort(lat, n, sizeof(*lat), cmp_d);
	return n ? lat[n * (size_t)p / 100] * 1e3 : 0;
}

static void noisy_neighbour(const char *flag, const char *label)
{
	enum { FLOODERS = 16, MAXLAT = 200000 };
	server_t s;
	char ta[128], tb[128], body[512], q[512];
	if (start_server_with(&s, flag) < 0) {
		fprintf(stderr, "bench: cannot start the server\n");
		return;
	}
	cluster(&s, 4);
	int fd = dial(s.port);
	for (int i = 0; i < 2; i++) {
		snprintf(q, sizeof(q),
		         "{\"apiVersion\":\"starcloud.dev/v1\",\"kind\":\"Queue\",\"metadata\":{"
		         "\"name\":\"q%c\"},\"spec\":{\"resources\":{\"gpu\":{\"quota\":8}}}}",
		         'a' + i);
		request(fd, s.token, "POST", "/api/v1/queues", q, NULL);
	}
	if (tenant(&s, "qa", ta, sizeof(ta)) < 0 || tenant(&s, "qb", tb, sizeof(tb)) < 0) {
		fprintf(stderr, "bench: cannot mint tenant tokens\n");
		close(fd);
		stop_server(&s);
		return;
	}
	for (int i = 0; i <= FLOODERS; i++) {
		char name[32];
		snprintf(name, sizeof(name), i < FLOODERS ? "a-%d" : "b-0", i);
		snprintf(body, sizeof(body), job_json, name);
		char *at = strstr(body, "\"bench\"");
		memcpy(at, i < FLOODERS ? "\"qa\"   " : "\"qb\"   ", 7); /* same length */
		request(fd, i < FLOODERS ? ta : tb, "POST", "/api/v1/jobs", body, NULL);
	}
	close(fd);
	usleep(500000);
	double *idle = calloc(MAXLAT, sizeof(double)), *busy = calloc(MAXLAT, sizeof(double));
	size_t ni = reads(&s, tb, 3.0, idle, MAXLAT);
	volatile int stop = 0;
	flood_t f[FLOODERS];
	for (int i = 0; i < FLOODERS; i++) {
		f[i] = (flood_t){.s = &s, .token = ta, .id = i, .stop = &stop};
		pthread_create(&f[i].th, NULL, flood_work, &f[i]);
	}
	usleep(300000);
	double t0 = now_s();
	size_t nb = reads(&s, tb, 5.0, busy, MAXLAT);
	double wall = now_s() - t0;
	stop = 1;
	long sent = 0, refused = 0;
	for (int i = 0; i < FLOODERS; i++) {
		pthread_join(f[i].th, NULL);
		sent += f[i].sent;
		refused += f[i].refused;
	}
	double i50 = pct(idle, ni, 50), i99 = pct(idle, ni, 99);
	double b50 = pct(busy, nb, 50), b99 = pct(busy, nb, 99);
	printf("noisy neighbour, %s: tenant B GET p50/p99 idle %.2f/%.2f ms, under tenant A's "
	       "16-connection PATCH flood %.2f/%.2f ms (p99 x%.1f); A: %.0f requests/s, %.0f%% "
	       "answered 429\n",
	       label, i50, i99, b50, b99, i99 > 0 ? b99 / i99 : 0, (double)sent / wall,
	       sent ? 100.0 * (double)refused / (double)sent : 0);
	fflush(stdout);
	free(idle);
	free(busy);
	stop_server(&s);
}

int main(int argc, char **argv)
{
	int clients = 32, jobs = 10000, gets = 20000, lists = 64, rounds = 200, only_noisy = 0;
	const char *flag = NULL; /* one more flag for the servers of phases 1-4 */
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--bin") == 0)
			bin = argv[i + 1];
		else if (strcmp(argv[i], "--clients") == 0)
			clients = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--jobs") == 0)
			jobs = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--rounds") == 0)
			rounds = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--only") == 0 && strcmp(argv[i + 1], "noisy") == 0)
			only_noisy = 1;
		else if (strcmp(argv[i], "--server-flag") == 0)
			flag = argv[i + 1];
		else {
			fprintf(stderr, "usage: api_bench [--bin PATH] [--clients N] [--jobs N] "
			                "[--rounds N] [--only noisy] [--server-flag FLAG]\n");
			return 2;
		}
	}
	if (clients < 1 || jobs < clients || rounds < 1)
		return 2;
	if (only_noisy) {
		noisy_neighbour(NULL, "flow control");
		noisy_neighbour("--no-flow-control", "without flow control");
		return 0;
	}
	server_t s;
	if (start_server_with(&s, flag) < 0) {
		fprintf(stderr, "bench: cannot start %s server\n", bin);
		return 1;
	}
	printf("starcloud api bench: %d clients, %d jobs, server on 127.0.0.1:%d\n", clients, jobs,
	       s.port);
	cluster(&s, 4);
	int per = jobs / clients;
	phase(&s, "apply (POST job)", OP_APPLY, clients, per, 0);
	phase(&s, "get one job", OP_GET, clients, gets / clients, 0);
	phase(&s, "list all jobs", OP_LIST, clients, lists / clients > 0 ? lists / clients : 1,
	      (long)per * clients);
	if (per * clients > 500)
		phase(&s, "list limit=500", OP_PAGE, clients, 200 / clients > 0 ? 200 / clients : 1,
		      500);
	stop_server(&s);

	server_t idle;
	if (start_server_with(&idle, flag) < 0)
		return 1;
	cluster(&idle, 4);
	usleep(100000);
	apply_to_bound(&idle, rounds);
	stop_server(&idle);
	noisy_neighbour(NULL, "flow control");
	noisy_neighbour("--no-flow-control", "without flow control");
	return 0;
}
