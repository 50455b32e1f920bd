/* Job trace readers for the time mode. See jobs.h. */
#include "sim/jobs.h"
#include "base/parse.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"

#define MAX_FIELDS 16
#define MAX_FILE ((long)256 << 20) /* bounded input */
#define MIB ((int64_t)1 << 20)
#define MAX_GANG 4096

/* ---- list ------------------------------------------------------------- */

static int push(sc_tjobs_t *out, const sc_tjob_t *j)
{
	if ((out->n & (out->n - 1)) == 0) { /* grow at powers of two */
		size_t cap = out->n ? out->n * 2 : 16;
		sc_tjob_t *v = realloc(out->v, cap * sizeof(*v));
		if (!v)
			return SC_ENOMEM;
		out->v = v;
	}
	out->v[out->n++] = *j;
	return 0;
}

void sc_tjobs_free(sc_tjobs_t *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++) {
		free(j->v[i].name);
		free(j->v[i].queue);
		free(j->v[i].models);
	}
	free(j->v);
	j->v = NULL;
	j->n = 0;
}

void sc_tjobs_one_node(sc_tjobs_t *j, int max_gpus)
{
	for (size_t i = 0; i < j->n; i++) {
		sc_tjob_t *t = &j->v[i];
		if (t->gpus != 1 || t->pods < 2 || t->pods > max_gpus)
			continue;
		t->gpus = t->pods;
		t->cpu_milli *= t->pods;
		t->memory *= t->pods;
		t->pods = 1;
	}
}

void sc_tjobs_scale_arrivals(sc_tjobs_t *j, double load)
{
	if (!j->n || load == 1.0)
		return;
	int64_t first = j->v[0].arrival;
	for (size_t i = 1; i < j->n; i++)
		if (j->v[i].arrival < first)
			first = j->v[i].arrival;
	for (size_t i = 0; i < j->n; i++)
		j->v[i].arrival = first + llround((double)(j->v[i].arrival - first) / load);
}

int sc_tjob_format_parse(const char *name)
{
	static const char *const names[] = {"openb", "gavel", "tiresias"};
	for (int i = 0; i < 3; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

static int add_job(sc_tjobs_t *out, const char *name, const char *queue, sc_tjob_t *j)
{
	j->name = strdup(name);
	j->queue = strdup(queue);
	if (!j->name || !j->queue || push(out, j) < 0) {
		free(j->name);
		free(j->queue);
		free(j->models);
		return SC_ENOMEM;
	}
	return 0;
}

/* "A|B|C" as j->models (empty names skipped; "" leaves any model). */
static int split_models(const char *spec, sc_tjob_t *j)
{
	size_t len = strlen(spec), n = 1;
	for (size_t i = 0; i < len; i++)
		n += spec[i] == '|';
	if (len == 0)
		return 0;
	char **v = malloc(n * sizeof(char *) + len + 1);
	if (!v)
		return SC_ENOMEM;
	char *text = (char *)(v + n);
	memcpy(text, spec, len + 1);
	size_t k = 0;
	for (char *tok = text, *bar; tok; tok = bar) {
		bar = strchr(tok, '|');
		if (bar)
			*bar++ = 0;
		if (*tok)
			v[k++] = tok;
	}
	if (k == 0) {
		free(v);
		return 0;
	}
	j->models = v;
	j->nmodels = k;
	return 0;
}

/* ---- OpenB ------------------------------------------------------------- */

int sc_tjobs_from_openb(const sc_trace_pods_t *pods, const char *fname, bool by_qos,
                        sc_tjobs_t *out, char *msg, size_t msgsize)
{
	for (size_t i = 0; i < pods->n; i++) {
		const sc_trace_pod_t *p = &pods->v[i];
		/* Line i + 2: the header is line 1. Rows without both times
		 * cannot be replayed in time. */
		const char *col = p->creation_time == SC_TRACE_NOTIME   ? "creation_time"
		                  : p->deletion_time == SC_TRACE_NOTIME ? "deletion_time"
		                                                        : NULL;
		if (col) {
			snprintf(msg, msgsize,
			         "%s:%zu: column %s: empty or absent (time mode needs it)", fname,
			         i + 2, col);
			sc_tjobs_free(out);
			return SC_EPARSE;
		}
		int64_t start =
		    p->scheduled_time != SC_TRACE_NOTIME ? p->scheduled_time : p->creation_time;
		sc_tjob_t j = {.arrival = p->creation_time,
		               .pods = 1,
		               .cpu_milli = p->cpu_milli,
		               .memory = p->memory_mib * MIB};
		j.duration = p->deletion_time - start > 0 ? p->deletion_time - start : 1;
		if (p->num_gpu == 1 && p->gpu_milli < 1000)
			j.gpu_milli = p->gpu_milli;
		else
			j.gpus = p->num_gpu;
		j.preemptible = strcmp(p->qos, "BE") == 0;
		const char *q = by_qos && p->qos[0] ? p->qos : "default";
		if ((p->gpu_milli > 0 || p->num_gpu > 0) && split_models(p->gpu_spec, &j) < 0) {
			sc_tjobs_free(out);
			return SC_ENOMEM;
		}
		if (add_job(out, p->name, q, &j) < 0) {
			sc_tjobs_free(out);
			return SC_ENOMEM;
		}
	}
	return 0;
}

/* ---- text helpers -------------------------------------------------------- */

static char *slurp(const char *path, char *msg, size_t msgsize)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(msg, msgsize, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char *buf = NULL;
	long n = -1;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n <= MAX_FILE &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
		if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else {
			buf[n] = 0;
		}
	}
	fclose(f);
	if (!buf)
		snprintf(msg, msgsize, "%s: cannot read (larger than %ld bytes or I/O error)", path,
		         MAX_FILE);
	return buf;
}

/* One line split at `sep` in place; fields keep their 1-based columns. */
typedef struct fields {
	char *v[MAX_FIELDS];
	size_t col[MAX_FIELDS];
	int n;
} fields_t;

static void split(char *line, char sep, fields_t *f)
{
	f->n = 0;
	char *p = line;
	for (;;) {
		if (f->n < MAX_FIELDS) {
			f->v[f->n] = p;
			f->col[f->n] = (size_t)(p - line) + 1;
			f->n++;
		}
		char *e = strchr(p, sep);
		if (!e)
			break;
		*e = 0;
		p = e + 1;
	}
}

/* Next line of text (NUL-terminated in place, CR stripped), or NULL. */
static char *next_line(char **cursor)
{
	char *s = *cursor;
	if (!s || !*s)
		return NULL;
	char *e = strchr(s, '\n');
	if (e) {
		*e = 0;
		*cursor = e + 1;
	} else {
		*cursor = s + strlen(s);
	}
	size_t len = strlen(s);
	if (len > 0 && s[len - 1] == '\r')
		s[len - 1] = 0;
	return s;
}

static bool parse_num(const char *s, double *out)
{
	return sc_parse_num(s, 0, 1e308, out) == 0;
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
	int64_t v;
	if (sc_parse_i64(s, lo, hi, &v) < 0)
		return false;
	*out = (long)v;
	return true;
}

static int field_error(char *msg, size_t msgsize, const char *fname, size_t line, const fields_t *f,
                       int k, const char *what)
{
	size_t col = k < f->n ? f->col[k] : (f->n ? f->col[f->n - 1] : 1);
	snprintf(msg, msgsize, "%s:%zu:%zu: %s", fname, line, col, what);
	return SC_EPARSE;
}

/* ---- gavel ------------------------------------------------------------- */

/* Isolated throughput (steps/s) of a job type at a scale on one GPU type. */
static double gavel_throughput(json_t *root, const char *gpu_type, const char *job_type, long scale)
{
	char key[512];
	snprintf(key, sizeof(key), "('%s', %ld)", job_type, scale);
	json_t *v = json_object_get(json_object_get(json_object_get(root, gpu_type), key), "null");
	return json_is_number(v) ? json_number_value(v) : 0;
}

static int gavel_row(fields_t *f, const char *fname, size_t line, const char *queue, json_t *root,
                     const char *gpu_type, sc_tjobs_t *out, char *msg, size_t msgsize)
{
	if (f->n != 7)
		return field_error(msg, msgsize, fname, line, f, f->n,
		                   "expected 7 tab-separated fields (job_type, command, "
		                   "num_steps_arg, needs_data_dir, total_steps, arrival_time, "
		                   "scale_factor)");
	double steps, arrival;
	long scale;
	if (!parse_num(f->v[4], &steps) || steps <= 0)
		return field_error(msg, msgsize, fname, line, f, 4,
		                   "total_steps: expected a positive number");
	if (!parse_num(f->v[5], &arrival))
		return field_error(msg, msgsize, fname, line, f, 5,
		                   "arrival_time: expected seconds >= 0");
	if (!parse_int(f->v[6], 1, MAX_GANG, &scale))
		return field_error(msg, msgsize, fname, line, f, 6,
		                   "scale_factor: expected GPUs 1..4096");
	double tput = gavel_throughput(root, gpu_type, f->v[0], scale);
	/* Some types are measured on one GPU only (Recommendation, A3C):
	 * assume linear scaling from one GPU, as data-parallel training
	 * approximates. */
	if (tput <= 0 && scale > 1)
		tput = gavel_throughput(root, gpu_type, f->v[0], 1) * (double)scale;
	if (tput <= 0)
		return field_error(msg, msgsize, fname, line, f, 0,
		                   "job_type: no throughput for this type and scale factor "
		                   "on the chosen GPU type");
	char name[64];
	snprintf(name, sizeof(name), "%s-%zu", queue, line);
	/* A Gavel job is a gang of one-GPU workers. */
	sc_tjob_t j = {.arrival = (int64_t)arrival,
	               .pods = (int)scale,
	               .gpus = 1,
	               .cpu_milli = 4000,
	               .memory = 16 * (int64_t)1024 * MIB};
	double d = ceil(steps / tput);
	j.duration = d < 1 ? 1 : (d > 1e9 ? 1000000000 : (int64_t)d);
	return add_job(out, name, queue, &j);
}

int sc_tjobs_parse_gavel(const char *text, const char *fname, const char *queue,
                         const char *json_text, const char *gpu_type, sc_tjobs_t *out, char *msg,
                         size_t msgsize)
{
	json_error_t jerr;
	json_t *root = json_loads(json_text, 0, &jerr);
	if (!root) {
		snprintf(msg, msgsize, "throughputs:%d:%d: %s", jerr.line, jerr.column, jerr.text);
		return SC_EPARSE;
	}
	int rc = 0;
	if (!json_object_get(root, gpu_type)) {
		snprintf(msg, msgsize, "throughputs: no GPU type \"%s\" (k80, p100, v100)",
		         gpu_type);
		rc = SC_EINVAL;
	}
	char *copy = rc == 0 ? strdup(text) : NULL;
	if (rc == 0 && !copy)
		rc = SC_ENOMEM;
	char *cur = copy, *l;
	fields_t f;
	for (size_t line = 1; rc == 0 && (l = next_line(&cur)) != NULL; line++) {
		if (!*l)
			continue;
		split(l, '\t', &f);
		rc = gavel_row(&f, fname, line, queue, root, gpu_type, out, msg, msgsize);
	}
	free(copy);
	json_decref(root);
	if (rc < 0)
		sc_tjobs_free(out);
	return rc;
}

/* The queue is the file's base name without ".trace" (a virtual cluster). */
static void base_name(const char *path, char *out, size_t n)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	snprintf(out, n, "%s", b);
	char *dot = strrchr(out, '.');
	if (dot && dot != out)
		*dot = 0;
}

int sc_tjobs_read_gavel(const char *path, const char *throughputs, const char *gpu_type,
                        sc_tjobs_t *out, char *msg, size_t msgsize)
{
	char *text = slurp(path, msg, msgsize);
	if (!text)
		return SC_EIO;
	char *json = slurp(throughputs, msg, msgsize);
	if (!json) {
		free(text);
		return SC_EIO;
	}
	char queue[128];
	base_name(path, queue, sizeof(queue));
	int rc = sc_tjobs_parse_gavel(text, path, queue, json, gpu_type, out, msg, msgsize);
	free(text);
	free(json);
	return rc;
}

/* ---- tiresias -------------------------------------------------------------- */

/* Columns found by name in the header line. */
typedef struct tcols {
	int id, gpus, submit, duration;
} tcols_t;

static int tiresias_header(fields_t *f, const char *fname, tcols_t *c, char *msg, size_t msgsize)
{
	*c = (tcols_t){-1, -1, -1, -1};
	for (int k = 0; k < f->n; k++) {
		if (strcmp(f->v[k], "job_id") == 0)
			c->id = k;
		else if (strcmp(f->v[k], "num_gpu") == 0)
			c->gpus = k;
		else if (strcmp(f->v[k], "submit_time") == 0)
			c->submit = k;
		else if (strcmp(f->v[k], "duration") == 0)
			c->duration = k;
	}
	if (c->id < 0 || c->gpus < 0 || c->submit < 0 || c->duration < 0) {
		snprintf(msg, msgsize,
		         "%s:1:1: header must name job_id, num_gpu, submit_time and duration",
		         fname);
		return SC_EPARSE;
	}
	return 0;
}

static int tiresias_row(fields_t *f, const tcols_t *c, const char *fname, size_t line,
                        sc_tjobs_t *out, char *msg, size_t msgsize)
{
	double submit, dur;
	long gpus;
	int need = c->duration;
	if (c->id > need)
		need = c->id;
	if (c->gpus > need)
		need = c->gpus;
	if (c->submit > need)
		need = c->submit;
	if (f->n <= need)
		return field_error(msg, msgsize, fname, line, f, f->n, "too few fields");
	if (!parse_int(f->v[c->gpus], 1, MAX_GANG, &gpus))
		return field_error(msg, msgsize, fname, line, f, c->gpus,
		                   "num_gpu: expected 1..4096");
	if (!parse_num(f->v[c->submit], &submit))
		return field_error(msg, msgsize, fname, line, f, c->submit,
		                   "submit_time: expected seconds >= 0");
	if (!parse_num(f->v[c->duration], &dur) || dur <= 0)
		return field_error(msg, msgsize, fname, line, f, c->duration,
		                   "duration: expected seconds > 0");
	char name[64];
	snprintf(name, sizeof(name), "job-%.40s", f->v[c->id]);
	sc_tjob_t j = {.arrival = (int64_t)submit,
	               .duration = (int64_t)ceil(dur),
	               .pods = (int)gpus,
	               .gpus = 1,
	               .cpu_milli = 4000,
	               .memory = 16 * (int64_t)1024 * MIB};
	return add_job(out, name, "default", &j);
}

int sc_tjobs_parse_tiresias(const char *text, const char *fname, sc_tjobs_t *out, char *msg,
                            size_t msgsize)
{
	char *copy = strdup(text);
	if (!copy)
		return SC_ENOMEM;
	char *cur = copy, *l;
	fields_t f;
	tcols_t c;
	int rc = 0;
	size_t line = 1;
	l = next_line(&cur);
	if (!l) {
		snprintf(msg, msgsize, "%s:1:1: empty file (expected a header)", fname);
		rc = SC_EPARSE;
	} else {
		split(l, ',', &f);
		rc = tiresias_header(&f, fname, &c, msg, msgsize);
	}
	while (rc == 0 && (l = next_line(&cur)) != NULL) {
		line++;
		if (!*l)
			continue;
		split(l, ',', &f);
		rc = tiresias_row(&f, &c, fname, line, out, msg, msgsize);
	}
	free(copy);
	if (rc < 0)
		sc_tjobs_free(out);
	return rc;
}

int sc_tjobs_read_tiresias(const char *path, sc_tjobs_t *out, char *msg, size_t msgsize)
{
	char *text = slurp(path, msg, msgsize);
	if (!text)
		return SC_EIO;
	int rc = sc_tjobs_parse_tiresias(text, path, out, msg, msgsize);
	free(text);
	return rc;
}
