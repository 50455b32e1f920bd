/* Node pool providers: the commands that create and delete one node (exec)
 * and the local agents of the dev provider (pool.h).
 *
 * exec: the pool's create or delete command runs with the node in its
 * environment (a cloud CLI, a Slurm power-save script, anything that makes
 * a machine run `starcloud agent --name $STARCLOUD_NODE_NAME --labels
 * $STARCLOUD_NODE_LABELS ...`). Exit status 0 is success; a command that
 * outlives its limit (joinTimeout for a create, 10 minutes for a delete) is
 * killed and counts as failed; the last 2 KiB of its output go into the
 * failure's event.
 *
 * dev: `starcloud agent` started by the server as a child, as `starcloud
 * dev` starts its agents: the template's GPUs declared (--gpus), cpu and
 * memory, the template's labels, a token of its own (an agent token bound
 * to that node, revoked when the node goes), a data folder under the
 * server's, output in that folder's agent.log (the token in agent.yaml there,
 * mode 0600, read with --config: not on a command line anyone can see). The create is done once the
 * process runs (joining is the Node registering); a delete stops it
 * (SIGTERM, then SIGKILL after 10 s). The server stops its dev agents when
 * it stops: they are for `starcloud dev` and tests. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "net/http.h"
#include "server/pool.h"
#include "starcloud/error.h"

extern char **environ;

#define OUTPUT_KEEP 2048
#define DELETE_LIMIT_MS (10 * 60 * 1000)
#define DEV_STOP_GRACE_MS 10000
#define MAX_ENV 512

typedef struct action action_t;
struct action {
	sc_pool_exec_t *e;
	action_t *next;
	char pool[SC_MAX_NAME + 1], node[SC_MAX_NAME + 1];
	bool create, dev, exited, ok;
	int handles; /* open libuv handles; freed when the last closes */
	uv_process_t proc;
	uv_pipe_t out;
	uv_timer_t limit;
	char output[OUTPUT_KEEP + 1];
	size_t outlen;
	char token_id[32]; /* dev: the agent's token */
};

struct sc_pool_exec {
	sc_server_t *s;
	sc_pool_done_fn done;
	action_t *running; /* exec commands and dev agents alive */
	int minting;       /* dev agents whose token is on its way to the store */
	bool closing;
};

sc_pool_exec_t *sc__pool_exec_new(sc_server_t *s, sc_pool_done_fn done)
{
	sc_pool_exec_t *e = sc_xcalloc(1, sizeof(*e));
	e->s = s;
	e->done = done;
	return e;
}

static void unlink_action(sc_pool_exec_t *e, action_t *a)
{
	for (action_t **p = &e->running; *p; p = &(*p)->next)
		if (*p == a) {
			*p = a->next;
			return;
		}
}

static void on_closed(uv_handle_t *h)
{
	action_t *a = h->data;
	if (--a->handles == 0) {
		sc_pool_exec_t *e = a->e;
		unlink_action(e, a);
		free(a);
		if (e->closing && !e->running && !e->minting)
			free(e);
	}
}

static void close_all(action_t *a)
{
	uv_handle_t *hs[] = {(uv_handle_t *)&a->proc, (uv_handle_t *)&a->out,
	                     (uv_handle_t *)&a->limit};
	for (size_t i = 0; i < 3; i++)
		if (hs[i]->data == a && !uv_is_closing(hs[i]))
			uv_close(hs[i], on_closed);
}

/* Keeps the last OUTPUT_KEEP bytes of what the command wrote. */
static void keep_output(action_t *a, const char *p, size_t n)
{
	if (n >= OUTPUT_KEEP) {
		memcpy(a->output, p + n - OUTPUT_KEEP, OUTPUT_KEEP);
		a->outlen = OUTPUT_KEEP;
	} else {
		if (a->outlen + n > OUTPUT_KEEP) {
			size_t drop = a->outlen + n - OUTPUT_KEEP;
			memmove(a->output, a->output + drop, a->outlen - drop);
			a->outlen -= drop;
		}
		memcpy(a->output + a->outlen, p, n);
		a->outlen += n;
	}
	a->output[a->outlen] = '\0';
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	static char chunk[4096]; /* one loop thread; copied out at once */
	(void)h;
	(void)hint;
	*buf = uv_buf_init(chunk, sizeof(chunk));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	action_t *a = st->data;
	if (n > 0)
		keep_output(a, buf->base, (size_t)n);
	else if (n < 0)
		uv_read_stop(st);
}

static void finish(action_t *a)
{
	sc_pool_exec_t *e = a->e;
	if (!e->closing)
		e->done(e->s, a->pool, a->node, a->create, a->ok, a->output);
	close_all(a);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
	action_t *a = p->data;
	a->exited = true;
	a->ok = status == 0 && sig == 0;
	if (!a->ok && a->outlen < OUTPUT_KEEP - 64) {
		char m[64];
		snprintf(m, sizeof(m), sig ? "\n(killed by signal %d)" : "\n(exit status %d)",
		         sig ? sig : (int)status);
		keep_output(a, m, strlen(m));
	}
	/* A dev agent that stops on its own: its node will be noticed as
	 * lost; the pool's own delete is what reports here. */
	if (a->dev && a->create) {
		if (!a->e->closing)
			sc_log_warn("pool %s: dev agent %s exited (%s)", a->pool, a->node,
			            sig ? "signal" : "status");
		close_all(a);
		return;
	}
	finish(a);
}

static void on_limit(uv_timer_t *t)
{
	action_t *a = t->data;
	if (a->exited)
		return;
	uv_process_kill(&a->proc, SIGKILL);
	keep_output(a, "\n(killed: took too long)", 24);
}

/* "k=v,k=v" of the template's labels. */
static void labels_text(const sc_node_spec_t *n, char *out, size_t outsz)
{
	size_t l = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n->nlabels && l < outsz; i++)
		l += (size_t)snprintf(out + l, outsz - l, "%s%s=%s", i ? "," : "", n->labels[i].key,
		                      n->labels[i].value);
}

static void gpus_text(const sc_node_spec_t *n, char *out, size_t outsz)
{
	if (n->gpu_count <= 0)
		snprintf(out, outsz, "0");
	else
		snprintf(out, outsz, "%dx%s%s", n->gpu_count, n->gpu_model ? n->gpu_model : "GPU",
		         n->mig_mode != SC_MIG_NONE ? ":mig" : "");
}

/* The environment of an exec command: the server's, plus the node. */
static char **build_env(sc_pool_exec_t *e, const sc_nodepool_t *np, const char *node, bool create,
                        char store[][1100], size_t nstore)
{
	char labels[900], gpus[128];
	const sc_node_spec_t *t = &np->pool.tmpl;
	labels_text(t, labels, sizeof(labels));
	gpus_text(t, gpus, sizeof(gpus));
	snprintf(store[0], 1100, "STARCLOUD_POOL=%s", np->pool.name);
	snprintf(store[1], 1100, "STARCLOUD_NODE_NAME=%s", node);
	snprintf(store[2], 1100, "STARCLOUD_NODE_LABELS=%s", labels);
	snprintf(store[3], 1100, "STARCLOUD_NODE_GPUS=%s", gpus);
	snprintf(store[4], 1100, "STARCLOUD_NODE_CPU=%lldm", (long long)t->cpu_milli);
	snprintf(store[5], 1100, "STARCLOUD_NODE_MEMORY=%lld", (long long)t->memory);
	snprintf(store[6], 1100, "STARCLOUD_SERVER=%s", e->s->self_url);
	snprintf(store[7], 1100, "STARCLOUD_ACTION=%s", create ? "create" : "delete");
	size_t n = 0, own = 8 < nstore ? 8 : nstore;
	char **env = sc_xcalloc(MAX_ENV + own + 1, sizeof(char *));
	for (char **v = environ; v && *v && n < MAX_ENV; v++)
		if (strncmp(*v, "STARCLOUD_", 10) != 0) /* ours win, and no token leaks */
			env[n++] = *v;
	for (size_t i = 0; i < own; i++)
		env[n++] = store[i];
	return env;
}

static action_t *action_new(sc_pool_exec_t *e, const char *pool, const char *node, bool create)
{
	action_t *a = sc_xcalloc(1, sizeof(*a));
	a->e = e;
	a->create = create;
	snprintf(a->pool, sizeof(a->pool), "%s", pool);
	snprintf(a->node, sizeof(a->node), "%s", node);
	a->proc.data = a;
	return a;
}

static int start_exec(sc_pool_exec_t *e, const sc_nodepool_t *np, const char *node, bool create)
{
	char envstore[8][1100];
	action_t *a = action_new(e, np->pool.name, node, create);
	const char *const *cmd = create ? np->create : np->remove;
	size_t ncmd = create ? np->ncreate : np->nremove;
	char *argv[SC_POOL_MAX_ARGS + 1];
	for (size_t i = 0; i < ncmd && i < SC_POOL_MAX_ARGS; i++)
		argv[i] = (char *)cmd[i];
	argv[ncmd < SC_POOL_MAX_ARGS ? ncmd : SC_POOL_MAX_ARGS] = NULL;
	char **env = build_env(e, np, node, create, envstore, 8);
	/* stdout and stderr share one pipe, so the output keeps its order. */
	int fds[2] = {-1, -1};
	if (pipe2(fds, O_CLOEXEC) < 0) {
		free(env);
		free(a);
		e->done(e->s, np->pool.name, node, create, false, "cannot make a pipe");
		return 0; /* reported through done() */
	}
	uv_pipe_init(e->s->loop, &a->out, 0);
	a->out.data = a;
	a->handles++;
	uv_pipe_open(&a->out, fds[0]);
	uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE},
	                                 {.flags = UV_INHERIT_FD, .data.fd = fds[1]},
	                                 {.flags = UV_INHERIT_FD, .data.fd = fds[1]}};
	uv_process_options_t po = {.file = argv[0],
	                           .args = argv,
	                           .env = env,
	                           .stdio = stdio,
	                           .stdio_count = 3,
	                           .exit_cb = on_exit_cb};
	int rc = uv_spawn(e->s->loop, &a->proc, &po);
	close(fds[1]); /* the child's now: end of output is its exit */
	free(env);
	a->handles++; /* the process handle, even when spawning failed */
	if (rc < 0) {
		snprintf(a->output, sizeof(a->output), "cannot run %s: %s", argv[0],
		         uv_strerror(rc));
		a->outlen = strlen(a->output);
		a->next = e->running;
		e->running = a;
		a->exited = true;
		finish(a);
		return 0; /* reported through done() */
	}
	uv_read_start((uv_stream_t *)&a->out, on_alloc, on_read);
	uv_timer_init(e->s->loop, &a->limit);
	a->limit.data = a;
	a->handles++;
	uint64_t ms = create ? (uint64_t)np->join_timeout * 1000 : DELETE_LIMIT_MS;
	uv_timer_start(&a->limit, on_limit, ms, 0);
	a->next = e->running;
	e->running = a;
	return 0;
}

/* ---- dev agents ---------------------------------------------------------- */

static action_t *find_agent(sc_pool_exec_t *e, const char *node)
{
	for (action_t *a = e->running; a; a = a->next)
		if (a->dev && a->create && !a->exited && strcmp(a->node, node) == 0)
			return a;
	return NULL;
}

/* "token: SECRET" into a new file only its owner reads. 0 or SC_EIO. */
static int write_secret(const char *path, const char *secret)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return SC_EIO;
	char line[320];
	int n = snprintf(line, sizeof(line), "token: \"%s\"\n", secret);
	int ok = n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) == n;
	ok &= fchmod(fd, 0600) == 0;
	return close(fd) == 0 && ok ? 0 : SC_EIO;
}

/* A dev agent waiting for its token to be stored (the store's
 * asynchronous calls: the loop does not wait for etcd): what its command
 * line needs, worked out from the pool's template at the start. */
typedef struct dev_start {
	action_t *a;
	char dir[1200], logp[1300], gpus[128], labels[900], cpu[32], mem[32], listen[32];
} dev_start_t;

static void dev_token(int rc, const char *secret, const char *id, void *ud);

static int start_dev(sc_pool_exec_t *e, const sc_nodepool_t *np, const char *node)
{
	dev_start_t *d = sc_xcalloc(1, sizeof(*d));
	d->a = action_new(e, np->pool.name, node, true);
	d->a->dev = true;
	const sc_node_spec_t *t = &np->pool.tmpl;
	snprintf(d->dir, sizeof(d->dir), "%s/pools", e->s->data_dir ? e->s->data_dir : "/tmp");
	mkdir(d->dir, 0700);
	snprintf(d->dir + strlen(d->dir), sizeof(d->dir) - strlen(d->dir), "/%s", node);
	mkdir(d->dir, 0700);
	snprintf(d->logp, sizeof(d->logp), "%s/agent.log", d->dir);
	gpus_text(t, d->gpus, sizeof(d->gpus));
	labels_text(t, d->labels, sizeof(d->labels));
	snprintf(d->cpu, sizeof(d->cpu), "%lldm", (long long)t->cpu_milli);
	snprintf(d->mem, sizeof(d->mem), "%lld", (long long)t->memory);
	snprintf(d->listen, sizeof(d->listen), "127.0.0.1:%d", sc_http_free_loopback_port());
	e->minting++;
	sc__auth_agent_token(e->s, node, dev_token, d); /* may answer before it returns */
	return 0;
}

/* The token is stored (or not): write it where the agent reads it, then
 * start the agent. */
static void dev_token(int rc, const char *secret, const char *id, void *ud)
{
	dev_start_t *d = ud;
	action_t *a = d->a;
	sc_pool_exec_t *e = a->e;
	char cfg[1300];
	e->minting--;
	if (e->closing) { /* the server stops: no agent to start */
		free(a);
		free(d);
		if (!e->running && !e->minting)
			free(e);
		return;
	}
	if (rc < 0) {
		char why[160];
		snprintf(why, sizeof(why), "cannot store the agent's token: %s", sc_strerror(rc));
		e->done(e->s, a->pool, a->node, true, false, why);
		free(a);
		free(d);
		return;
	}
	snprintf(a->token_id, sizeof(a->token_id), "%s", id);
	/* The token goes in a 0600 configuration file, not on the command
	 * line, where every user of the machine could read it (ps). */
	snprintf(cfg, sizeof(cfg), "%s/agent.yaml", d->dir);
	rc = write_secret(cfg, secret);
	if (rc < 0) {
		sc__auth_token_delete(e->s, a->token_id);
		e->done(e->s, a->pool, a->node, true, false, "cannot write the agent's token file");
		free(a);
		free(d);
		return;
	}
	int logfd = open(d->logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	char *argv[] = {"starcloud",  "agent", "--server", e->s->self_url, "--config", cfg,
	                "--name",     a->node, "--gpus",   d->gpus,        "--labels", d->labels,
	                "--cpu",      d->cpu,  "--memory", d->mem,         "--listen", d->listen,
	                "--data-dir", d->dir,  "--drain",  NULL,           NULL,       NULL};
	/* Behind a TLS server, the agent trusts it through --agent-ca
	 * (starcloud dev makes one CA for both). */
	if (e->s->self_ca) {
		argv[21] = "--ca";
		argv[22] = (char *)e->s->self_ca;
	}
	uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE},
	                                 {.flags = UV_INHERIT_FD, .data.fd = logfd},
	                                 {.flags = UV_INHERIT_FD, .data.fd = logfd}};
	if (logfd < 0)
		stdio[1].flags = stdio[2].flags = UV_IGNORE;
	uv_process_options_t po = {.file = "/proc/self/exe",
	                           .args = argv,
	                           .stdio = stdio,
	                           .stdio_count = 3,
	                           .exit_cb = on_exit_cb};
	rc = uv_spawn(e->s->loop, &a->proc, &po);
	if (logfd >= 0)
		close(logfd);
	a->handles++;
	a->next = e->running;
	e->running = a;
	if (rc < 0) {
		snprintf(a->output, sizeof(a->output), "cannot start the agent: %s",
		         uv_strerror(rc));
		a->outlen = strlen(a->output);
		a->exited = true;
		sc__auth_token_delete(e->s, a->token_id);
		finish(a);
		free(d);
		return;
	}
	/* Started: the create is done; joining is the node registering. */
	e->done(e->s, a->pool, a->node, true, true, "");
	free(d);
}

static void on_dev_grace(uv_timer_t *t)
{
	action_t *a = t->data;
	if (!a->exited)
		uv_process_kill(&a->proc, SIGKILL);
}

/* Stops the node's agent; done() is told once it has exited. */
static void dev_exited(uv_process_t *p, int64_t status, int sig)
{
	action_t *a = p->data;
	a->exited = true;
	a->ok = true;
	sc__auth_token_delete(a->e->s, a->token_id);
	a->create = false;
	finish(a);
}

static int stop_dev(sc_pool_exec_t *e, const char *pool, const char *node)
{
	action_t *a = find_agent(e, node);
	if (!a) {
		/* Not ours (a server restart lost the process): nothing to stop. */
		e->done(e->s, pool, node, false, true, "");
		return 0;
	}
	a->proc.exit_cb = dev_exited;
	uv_process_kill(&a->proc, SIGTERM);
	uv_timer_init(e->s->loop, &a->limit);
	a->limit.data = a;
	a->handles++;
	uv_timer_start(&a->limit, on_dev_grace, DEV_STOP_GRACE_MS, 0);
	return 0;
}

/* ---- entry points --------------------------------------------------------- */

int sc__pool_exec_start(sc_pool_exec_t *e, const sc_nodepool_t *np, const char *node, bool create)
{
	if (np->provider == SC_PROVIDER_DEV)
		return create ? start_dev(e, np, node) : stop_dev(e, np->pool.name, node);
	return start_exec(e, np, node, create);
}

void sc__pool_exec_free(sc_pool_exec_t *e)
{
	if (!e)
		return;
	e->closing = true;
	if (!e->running && !e->minting) {
		free(e);
		return;
	}
	/* Commands are left to finish on their own (a half-made machine is
	 * the provider's to clean up); dev agents stop with their server. */
	for (action_t *a = e->running; a; a = a->next) {
		if (a->dev && !a->exited)
			uv_process_kill(&a->proc, SIGTERM);
		close_all(a);
	}
}
