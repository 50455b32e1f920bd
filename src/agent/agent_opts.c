/* `starcloud agent` options and start-up discovery. */
#include "agent/agent_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/quantity.h"
#include "starcloud/error.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: starcloud agent --server URL --token T --name NODE [options]\n"
		"  --gpus NxMODEL[:mig]   declared GPUs when NVML is absent (8xA100-80GB)\n"
		"  --nvml-lib PATH        NVML library (default libnvidia-ml.so.1, or\n"
		"                         $STARCLOUD_NVML_LIB)\n"
		"  --labels k=v,...       node labels\n"
		"  --cpu N --memory Q     capacity (default: this machine's)\n"
		"  --data-dir DIR         pod folders and logs (default ./starcloud-agent)\n"
		"  --listen HOST:PORT     status port (default 127.0.0.1:7071)\n"
		"  --advertise HOST:PORT  address given to the server (default: --listen)\n"
		"  --heartbeat DUR        lease renewal (default 667ms: the 2 s lease expires\n"
		"                         after 3 missed renewals)\n"
		"  --backoff-base DUR     first restart delay (default 10s), doubling to\n"
		"  --backoff-max DUR      (default 5m), reset after\n"
		"  --backoff-reset DUR    of healthy running (default 10m)\n"
		"  --grace DUR            SIGTERM -> SIGKILL grace period (default 30s)\n"
		"  --log-max BYTES        log size before rotation (default 10Mi)\n"
		"  --pod-retention DUR    keep folders of finished pods this long (default 24h)\n"
		"  --keep-pods N          and at most N of them (default 100)\n"
		"  --drain                stop every pod on SIGTERM (default: leave them)\n"
		"  --fence-on-lease-loss  stop every pod when the lease cannot be renewed\n"
		"Durations take ms, s, m, h units (250ms, 2s, 5m).\n");
}

/* "250ms", "2s", "1.5m" -> milliseconds. */
static int duration_ms(const char *s, uint64_t *out)
{
	char *end;
	double v = strtod(s, &end);
	double mul = strcmp(end, "ms") == 0 ? 1	  : strcmp(end, "s") == 0 || !*end ? 1000
		     : strcmp(end, "m") == 0 ? 60000 : strcmp(end, "h") == 0	   ? 3600000
										   : -1;
	if (end == s || mul < 0 || v < 0 || v > 1e7)
		return SC_EINVAL;
	*out = (uint64_t)(v * mul);
	return 0;
}

static int parse_hostport(const char *s, char *host, size_t hostsz, int *port)
{
	const char *colon = strrchr(s, ':');
	char *end;
	if (!colon || colon == s || (size_t)(colon - s) >= hostsz)
		return SC_EINVAL;
	long p = strtol(colon + 1, &end, 10);
	if (*end || colon[1] == '\0' || p < 0 || p > 65535)
		return SC_EINVAL;
	snprintf(host, hostsz, "%.*s", (int)(colon - s), s);
	*port = (int)p;
	return 0;
}

int sc__agent_labels(const char *text, json_t *labels)
{
	char buf[4096];
	if (!text || !*text)
		return 0;
	if (strlen(text) >= sizeof(buf))
		return SC_ETOOBIG;
	snprintf(buf, sizeof(buf), "%s", text);
	for (char *save, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq || eq == kv)
			return SC_EINVAL;
		*eq = '\0';
		json_object_set_new(labels, kv, json_string(eq + 1));
	}
	return 0;
}

static void defaults(sc_agent_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->listen_host, sizeof(o->listen_host), "127.0.0.1");
	o->listen_port = 7071;
	o->data_dir = "starcloud-agent";
	/* The lease is 2 s and expires after 3 missed renewals, so a dead
	 * node is noticed within 2 s and its gangs run elsewhere in well under
	 * 5 s (issue 6's target); renewing every 2 s would take 6 s. */
	o->heartbeat_ms = 667;
	o->backoff_base_ms = 10000;
	o->backoff_max_ms = 300000;
	o->backoff_reset_ms = 600000;
	o->grace_ms = 30000;
	o->log_max = 10u << 20;
	o->pod_retention_ms = 24ull * 3600 * 1000;
	o->keep_pods = 100;
	o->nvml_lib = getenv("STARCLOUD_NVML_LIB");
}

/* One option with a value; returns 1 when it took the value, 0 when the
 * option is not one of these, < 0 on a bad value. */
static int value_opt(sc_agent_opts_t *o, const char *a, const char *v)
{
	uint64_t *durs[] = { &o->heartbeat_ms, &o->backoff_base_ms, &o->backoff_max_ms,
			     &o->backoff_reset_ms, &o->grace_ms, &o->pod_retention_ms };
	static const char *const dnames[] = { "--heartbeat",	 "--backoff-base", "--backoff-max",
					      "--backoff-reset", "--grace",	   "--pod-retention" };
	const char **strs[] = { &o->server, &o->token, &o->name, &o->gpus, &o->labels,
				&o->data_dir, &o->nvml_lib, &o->advertise };
	static const char *const snames[] = { "--server", "--token",    "--name",
					      "--gpus",	  "--labels",   "--data-dir",
					      "--nvml-lib", "--advertise" };
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (strcmp(a, snames[i]) == 0) {
			*strs[i] = v;
			return 1;
		}
	for (size_t i = 0; i < sizeof(durs) / sizeof(durs[0]); i++)
		if (strcmp(a, dnames[i]) == 0)
			return duration_ms(v, durs[i]) < 0 ? SC_EINVAL : 1;
	if (strcmp(a, "--listen") == 0)
		return parse_hostport(v, o->listen_host, sizeof(o->listen_host),
				      &o->listen_port) < 0
			       ? SC_EINVAL
			       : 1;
	if (strcmp(a, "--cpu") == 0)
		return sc_quantity_cpu(v, 0, &o->cpu_milli) < 0 ? SC_EINVAL : 1;
	if (strcmp(a, "--memory") == 0)
		return sc_quantity_memory(v, 0, &o->memory) < 0 ? SC_EINVAL : 1;
	if (strcmp(a, "--keep-pods") == 0) {
		char *end;
		long n = strtol(v, &end, 10);
		if (end == v || *end || n < 0 || n > 100000)
			return SC_EINVAL;
		o->keep_pods = (size_t)n;
		return 1;
	}
	if (strcmp(a, "--log-max") == 0) {
		int64_t b;
		if (sc_quantity_memory(v, 0, &b) < 0 || b < 4096)
			return SC_EINVAL;
		o->log_max = (uint64_t)b;
		return 1;
	}
	return 0;
}

static int check(sc_agent_opts_t *o)
{
	const char *missing = !o->server ? "--server" : !o->token ? "--token" : !o->name ? "--name"
												: NULL;
	if (missing) {
		fprintf(stderr, "agent: %s is required\n", missing);
		return SC_EINVAL;
	}
	json_t *l = json_object();
	int rc = sc__agent_labels(o->labels, l);
	json_decref(l);
	if (rc < 0 || strlen(o->name) > SC_AGENT_NAME_MAX || strlen(o->server) > 512 ||
	    o->heartbeat_ms < 100 || o->backoff_base_ms == 0 ||
	    o->backoff_max_ms < o->backoff_base_ms) {
		fprintf(stderr, "agent: bad --labels, --name, --server, --heartbeat (>= 100ms) or "
				"--backoff-base/--backoff-max\n");
		return SC_EINVAL;
	}
	return 0;
}

int sc__agent_parse(int argc, char **argv, sc_agent_t *a)
{
	sc_agent_opts_t *o = &a->o;
	defaults(o);
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc;
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			usage(stdout);
			return 1;
		} else if (strcmp(arg, "--drain") == 0) {
			o->drain = 1;
		} else if (strcmp(arg, "--fence-on-lease-loss") == 0) {
			o->fence = 1;
		} else if (v && (rc = value_opt(o, arg, v)) != 0) {
			if (rc < 0) {
				fprintf(stderr, "agent: %s: bad value \"%s\"\n", arg, v);
				return SC_EINVAL;
			}
			i++;
		} else {
			fprintf(stderr, "agent: unknown or incomplete option \"%s\"\n", arg);
			usage(stderr);
			return SC_EINVAL;
		}
	}
	size_t n = o->server ? strlen(o->server) : 0;
	if (n && o->server[n - 1] == '/')
		((char *)o->server)[n - 1] = '\0';
	return check(o);
}

int sc__agent_discover(sc_agent_t *a)
{
	sc_agent_opts_t *o = &a->o;
	char err[256] = "";
	int rc = sc_gpu_discover_nvml(o->nvml_lib, &a->gpus);
	if (rc < 0 && rc != SC_ENOTFOUND)
		snprintf(err, sizeof(err), "%s", a->gpus.error);
	if (rc < 0) {
		if (o->gpus && sc_gpu_parse_decl(o->gpus, &a->gpus) < 0) {
			fprintf(stderr, "agent: --gpus: expected NxMODEL[:mig], got \"%s\"\n",
				o->gpus);
			return SC_EINVAL;
		}
		if (!o->gpus)
			memset(&a->gpus, 0, sizeof(a->gpus)), a->gpus.source = "none";
		snprintf(a->gpus.error, sizeof(a->gpus.error), "%s", err);
	}
	if (err[0])
		sc__agent_log(a, "NVML failed (%s); using %s GPUs", err, a->gpus.source);
	if (!o->cpu_milli)
		o->cpu_milli = sysconf(_SC_NPROCESSORS_ONLN) * 1000;
	if (!o->memory)
		o->memory = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	if (o->advertise)
		snprintf(a->advertise, sizeof(a->advertise), "%s", o->advertise);
	return 0;
}
