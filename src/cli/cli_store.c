/* `starcloud store copy --from sqlite:DIR --to etcd://H:P[,...]`: copies
 * every key of one store into another, which must hold no data yet, in
 * transactions of BATCH creates. Values are copied unchanged; the copies
 * get the destination's revisions (so resourceVersions change, as after
 * an etcd restore, and watchers list again). The source is read in one
 * consistent read (one SQLite statement, one etcd range at one revision)
 * and never changed, so it may be the live store of running servers: an
 * online backup (docs/DEPLOY.md). */
#include "cli/cli_store.h"

#include <stdio.h>
#include <string.h>

#include "base/cmdline.h"
#include "cli/cli.h"
#include "server/ha.h"
#include "starcloud/error.h"

/* etcd refuses more than --max-txn-ops (default 128) operations per txn. */
#define BATCH 100

typedef struct store_opts {
	const char *from, *to, *prefix;
} store_opts_t;

static const sc_flag_t store_flags[] = {
    {.name = "--from",
     SC_FLAG_AT(STR, store_opts_t, from),
     .meta = "URL",
     .help = "sqlite:DATA_DIR or etcd://HOST:PORT[,HOST:PORT...]"},
    {.name = "--to",
     SC_FLAG_AT(STR, store_opts_t, to),
     .meta = "URL",
     .help = "an empty store, in the same form"},
    {.name = "--etcd-prefix",
     SC_FLAG_AT(STR, store_opts_t, prefix),
     .meta = "PREFIX",
     .help = "etcd key prefix (default /starcloud/)"},
};

static const sc_command_t store_cmd = {
    .name = "store",
    .args = "copy --from URL --to URL [--etcd-prefix /starcloud/]",
    .about = "Copies every object and token from one store to an empty one.",
    .flags = store_flags,
    .nflags = sizeof(store_flags) / sizeof(store_flags[0]),
    .max_args = 1,
};

static int copy_all(sc_store_t *from, sc_store_t *to, size_t *copied)
{
	sc_kv_list_t src, dst;
	int rc = sc_store_list(to, "/", &dst);
	if (rc < 0)
		return rc;
	size_t existing = dst.n;
	sc_kv_list_free(&dst);
	if (existing > 0) {
		fprintf(stderr,
		        "starcloud store copy: --to already holds %zu keys; refusing to "
		        "mix stores\n",
		        existing);
		return SC_EEXISTS;
	}
	if ((rc = sc_store_list(from, "/", &src)) < 0)
		return rc;
	sc_store_op_t ops[BATCH];
	for (size_t i = 0; i < src.n && rc == 0; i += BATCH) {
		size_t n = src.n - i < BATCH ? src.n - i : BATCH;
		for (size_t k = 0; k < n; k++)
			ops[k] = (sc_store_op_t){SC_STORE_PUT, src.items[i + k].key,
			                         src.items[i + k].value, SC_REV_ABSENT};
		if ((rc = sc_store_txn(to, ops, n, NULL, NULL)) == 0)
			*copied += n;
	}
	sc_kv_list_free(&src);
	return rc;
}

/* The source is opened read-only: it may be the live store of running
 * servers (an online backup), which a copy must never migrate. */
static int open_store(const char *what, const char *url, const char *prefix, sc_store_t **out)
{
	int rc = sc__ha_open_store_mode(url, NULL, prefix, strcmp(what, "--from") == 0, out);
	if (rc < 0)
		fprintf(stderr, "starcloud store copy: %s %s: %s\n", what, url, sc_strerror(rc));
	return rc;
}

int sc_cli_store(int argc, char **argv)
{
	store_opts_t o = {0};
	int nargs = 0;
	int prc = sc_flags_parse(&store_cmd, &o, argc, argv, &nargs);
	if (prc != 0)
		return prc > 0 ? SC_EXIT_OK : SC_EXIT_USAGE;
	if (nargs != 1 || strcmp(argv[1], "copy") != 0) {
		sc_flags_usage(&store_cmd, stderr);
		return SC_EXIT_USAGE;
	}
	const char *from = o.from, *to = o.to, *prefix = o.prefix;
	if (!from || !to) {
		fprintf(stderr, "starcloud store copy: --from and --to are required\n");
		return SC_EXIT_USAGE;
	}
	sc_store_t *src = NULL, *dst = NULL;
	size_t copied = 0;
	int rc = open_store("--from", from, prefix, &src);
	if (rc == 0)
		rc = open_store("--to", to, prefix, &dst);
	if (rc == 0 && (rc = copy_all(src, dst, &copied)) < 0)
		fprintf(stderr, "starcloud store copy: %s (after %zu keys)\n", sc_strerror(rc),
		        copied);
	if (rc == 0)
		printf("copied %zu keys from %s to %s\n", copied, from, to);
	sc_store_close(src);
	sc_store_close(dst);
	if (rc == SC_EINVAL)
		return SC_EXIT_USAGE;
	return rc < 0 ? SC_EXIT_FAIL : SC_EXIT_OK;
}
