/* `starcloud agent` options and start-up discovery. */
#include "agent/agent_opts.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/flagfile.h"
#include "base/cmdline.h"
#include "base/secret.h"
#include "base/quantity.h"
#include "starcloud/error.h"

static int cpu_flag(void *opts, const char *v, char *err, size_t errsz)
{
	snprintf(err, errsz, "expected cores such as 8 or 500m, got \"%s\"", v);
	return sc_quantity_cpu(v, 0, &((sc_agent_opts_t *)opts)->cpu_milli);
}

static int memory_flag(void *opts, const char *v, char *err, size_t errsz)
{
	snprintf(err, errsz, "expected bytes such as 64Gi, got \"%s\"", v);
	return sc_quantity_memory(v, 0, &((sc_agent_opts_t *)opts)->memory);
}

static const sc_flag_t agent_flags[] = {
    {.name = "--server",
     SC_FLAG_AT(STR, sc_agent_opts_t, server),
     .meta = "URL[,URL...]",
     .help = "the control plane (the next one when a server is down)"},
    {.name = "--token-file",
     SC_FLAG_AT(STR, sc_agent_opts_t, token_file),
     .meta = "FILE",
     .help = "an agent (or admin) token, from a file of mode 0600"},
    {.name = "--token",
     SC_FLAG_AT(STR, sc_agent_opts_t, token),
     .meta = "T",
     .env = "STARCLOUD_TOKEN",
     .help = "the token itself (warns: every local user can read argv;\nprefer --token-file "
             "or $STARCLOUD_TOKEN)"},
    {.name = "--ca",
     SC_FLAG_AT(STR, sc_agent_opts_t, ca),
     .meta = "FILE",
     .env = "STARCLOUD_CA",
     .help = "CA certificate of an https:// server (it and the client\n"
             "certificate reload on SIGHUP and when the files change)"},
    {.name = "--tls-client-cert",
     SC_FLAG_AT(STR, sc_agent_opts_t, client_cert),
     .meta = "FILE",
     .help = "client certificate for the server (mTLS; CN node:NAME)"},
    {.name = "--tls-client-key",
     SC_FLAG_AT(STR, sc_agent_opts_t, client_key),
     .meta = "FILE",
     .help = "its private key"},
    SC_TLS_SERVE_FLAGS(sc_agent_opts_t, tls),
    {.name = "--metrics-token-file",
     SC_FLAG_AT(STR, sc_agent_opts_t, metrics_token_file),
     .meta = "FILE",
     .help = "/metrics answers a bearer of this secret (mode 0600; the\n"
             "scraper's, not a Starcloud token) or the server"},
    {.name = "--metrics-public",
     SC_FLAG_AT(BOOL, sc_agent_opts_t, metrics_public),
     .help = "/metrics without a credential (it names queues and pods)"},
    {.name = "--pod-pids-max",
     SC_FLAG_AT(INT, sc_agent_opts_t, pod_pids_max),
     .min = 0,
     .max = 4194304,
     .def = "4096",
     .help = "processes and threads per pod (pids.max, cgroup v1 or v2;\n0: no limit)"},
    {.name = "--pod-uid-base",
     SC_FLAG_AT(INT, sc_agent_opts_t, pod_uid_base),
     .min = 1000,
     .max = 2000000000,
     .def = "200000",
     .help = "pods run as uid BASE + n, n numbering the queues seen\non this node "
             "(docs/SECURITY.md)"},
    {.name = "--name",
     SC_FLAG_AT(STR, sc_agent_opts_t, name),
     .meta = "NODE",
     .help = "this node's name"},
    {.name = "--gpus",
     SC_FLAG_AT(STR, sc_agent_opts_t, gpus),
     .meta = "NxMODEL[:mig]",
     .help = "declared GPUs when NVML is absent (8xA100-80GB)"},
    {.name = "--nvml-lib",
     SC_FLAG_AT(STR, sc_agent_opts_t, nvml_lib),
     .meta = "PATH",
     .env = "STARCLOUD_NVML_LIB",
     .help = "NVML library (default libnvidia-ml.so.1)"},
    {.name = "--dev-dir",
     SC_FLAG_AT(STR, sc_agent_opts_t, dev_dir),
     .meta = "DIR",
     .def = "/dev",
     .help = "where the GPUs' device nodes are (nvidiaN, nvidiactl...):\npods are "
             "kept from the others' (docs/SECURITY.md)"},
    {.name = "--labels",
     SC_FLAG_AT(STR, sc_agent_opts_t, labels),
     .meta = "k=v,...",
     .help = "node labels"},
    {.name = "--cpu",
     .kind = SC_FLAG_FUNC,
     .fn = cpu_flag,
     .meta = "N",
     .help = "CPU capacity (default: this machine's)"},
    {.name = "--memory",
     .kind = SC_FLAG_FUNC,
     .fn = memory_flag,
     .meta = "Q",
     .help = "memory capacity (default: this machine's)"},
    {.name = "--data-dir",
     SC_FLAG_AT(STR, sc_agent_opts_t, data_dir),
     .meta = "DIR",
     .def = "starcloud-agent",
     .help = "pod folders and logs"},
    {.name = "--listen",
     SC_FLAG_AT(ADDR, sc_agent_opts_t, listen),
     .def = "127.0.0.1:7071",
     .help = "status port"},
    {.name = "--advertise",
     SC_FLAG_AT(STR, sc_agent_opts_t, advertise),
     .meta = "HOST:PORT",
     .help = "address given to the server (default: --listen)"},
    /* The lease is 2 s and expires after 3 missed renewals, so a dead node
     * is noticed within 2 s; its gangs run elsewhere after the fence time
     * more (--fence-time), within 10 s in all (docs/AGENT.md). */
    {.name = "--heartbeat",
     SC_FLAG_AT(DURATION, sc_agent_opts_t, heartbeat_ms),
     .min = 100,
     .max = 3650 * 86400e3,
     .def = "667ms",
     .help = "lease renewal (the 2 s lease expires after 3 missed\nrenewals)"},
    {.name = "--backoff-base",
     SC_FLAG_AT(DURATION, sc_agent_opts_t, backoff_base_ms),
     .min = 1,
     .max = 3650 * 86400e3,
     .def = "10s",
     .help = "first restart delay, doubling to"},
    {.name = "--backoff-max",
     SC_FLAG_AT(DURATION, sc_agent_opts_t, backoff_max_ms),
     .max = 3650 * 86400e3,
     .def = "5m",
     .help = "at most this, reset after"},
    {.name = "--backoff-reset",
     SC_FLAG_AT(DURATION, sc_agent_opts_t, backoff_reset_ms),
     .max = 3650 * 86400e3,
     .def = "10m",
     .help = "of healthy running"},
    {.name = "--grace",
     SC_FLAG_AT(DURATION, sc_agent_opts_t, grace_ms),
     .max = 3650 * 86400e3,
     .def = "30s",
     .help = "SIGTERM -> SIGKILL grace period"},
    {.name = "--log-max",
     SC_FLAG_AT(SIZE, sc_agent_opts_t, log_max),
     .min = 4096,
     .def = "10Mi",
     .help = "log size before rotation"},
    {.name = "--pod-retention",
     SC_FLAG_AT(DURATION, sc_agent_opts_t, pod_retention_ms),
     .max = 3650 * 86400e3,
     .def = "24h",
     .help = "keep folders of finished pods this long"},
    {.name = "--keep-pods",
     SC_FLAG_AT(INT, sc_agent_opts_t, keep_pods),
     .min = 0,
     .max = 100000,
     .def = "100",
     .help = "and at most N of them"},
    {.name = "--drain",
     SC_FLAG_AT(BOOL, sc_agent_opts_t, drain),
     .help = "stop every pod on SIGTERM (default: leave them)"},
    {.name = "--fence-time",
     SC_FLAG_AT(DURATION, sc_agent_opts_t, fence_ms),
     .min = 1000,
     .max = 600e3,
     .def = "5s",
     .help = "the server gives a lost node's pods away after its lease plus\n"
             "this; the node stops them (agent, or its pod guard when the\n"
             "agent is down) half of it earlier (docs/AGENT.md)"},
    {.name = "--fence-on-lease-loss",
     SC_FLAG_AT(BOOL, sc_agent_opts_t, fence),
     .help = "accepted for old command lines: fencing is always on now"},
    SC_FLAGS_CONFIG(sc_agent_opts_t),
};

static const sc_command_t agent_cmd = {
    .name = "agent",
    .args = "--server URL --token-file FILE --name NODE [options]",
    .about = "The node agent: registers the node, runs the pods bound to it (docs/AGENT.md).",
    .footer = "Durations take ms, s, m, h units (250ms, 2s, 5m).",
    .flags = agent_flags,
    .nflags = sizeof(agent_flags) / sizeof(agent_flags[0]),
};

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

static int check(sc_agent_opts_t *o)
{
	/* An empty value (a configuration file's `token: ""` left unfilled)
	 * is as missing as none. */
	const char *missing = !o->server || !*o->server                      ? "--server"
	                      : (!o->token || !*o->token) && !o->client_cert ? "--token"
	                      : !o->name || !*o->name                        ? "--name"
	                      : !o->client_cert != !o->client_key
	                          ? "--tls-client-cert with --tls-client-key"
	                          : NULL;
	if (missing) {
		fprintf(stderr, "starcloud agent: %s is required%s\n", missing,
		        strcmp(missing, "--token") == 0
		            ? " (as --token-file FILE, $STARCLOUD_TOKEN, or a client certificate "
		              "with --tls-client-cert)"
		            : "");
		return SC_EINVAL;
	}
	json_t *l = json_object();
	int rc = sc__agent_labels(o->labels, l);
	json_decref(l);
	const char *bad = rc < 0                                ? "--labels: expected k=v,..."
	                  : strlen(o->name) > SC_AGENT_NAME_MAX ? "--name: too long"
	                  : strlen(o->server) > 512             ? "--server: too long"
	                  : o->backoff_max_ms < o->backoff_base_ms
	                      ? "--backoff-max: shorter than --backoff-base"
	                      : NULL;
	if (bad) {
		fprintf(stderr, "starcloud agent: %s\n", bad);
		return SC_EINVAL;
	}
	return 0;
}

int sc__agent_parse(int argc, char **argv, sc_agent_t *a)
{
	sc_agent_opts_t *o = &a->o;
	memset(o, 0, sizeof(*o));
	int rc = sc_flags_parse(&agent_cmd, o, argc, argv, NULL);
	if (rc != 0)
		return rc;
	if (sc_secret_token("agent", o->token, o->token_file, "STARCLOUD_TOKEN", argc, argv,
	                    a->token, sizeof(a->token)) < 0)
		return SC_EINVAL;
	o->token = a->token;
	if (o->metrics_token_file && *o->metrics_token_file &&
	    sc_secret_file("agent", "--metrics-token-file", o->metrics_token_file, a->metrics_token,
	                   sizeof(a->metrics_token)) < 0)
		return SC_EINVAL;
	size_t n = o->server ? strlen(o->server) : 0;
	if (n && o->server[n - 1] == '/')
		((char *)o->server)[n - 1] = '\0';
	if ((rc = check(o)) < 0 || !o->check_config)
		return rc;
	sc_flags_config_ok(&agent_cmd, o->config);
	return 1; /* checked: exit 0 without starting, as after --help */
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
			fprintf(stderr,
			        "starcloud agent: --gpus: expected NxMODEL[:mig], got \"%s\"\n",
			        o->gpus);
			return SC_EINVAL;
		}
		if (!o->gpus)
			memset(&a->gpus, 0, sizeof(a->gpus)), a->gpus.source = "none";
		snprintf(a->gpus.error, sizeof(a->gpus.error), "%s", err);
	}
	if (err[0])
		sc_log_warn("NVML failed (%s); using %s GPUs", err, a->gpus.source);
	if (rc == 0)
		a->sampler = sc_gpu_sampler_open(o->nvml_lib);
	if (!o->cpu_milli)
		o->cpu_milli = sysconf(_SC_NPROCESSORS_ONLN) * 1000;
	if (!o->memory)
		o->memory = (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
	if (o->advertise)
		snprintf(a->advertise, sizeof(a->advertise), "%s", o->advertise);
	return 0;
}
