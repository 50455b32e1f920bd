/* `starcloud store copy --from sqlite:DIR --to etcd://H:P[,...]`: copies
 * every key of one store into another, which must hold no data yet, in
 * transactions of BATCH creates. Values are copied unchanged; the copies
 * get the destination's revisions (so resourceVersions change, as after
 * an etcd restore, and watchers list again). Run it with the servers
 * stopped. */
#include "cli/cli_store.h"

#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "server/ha.h"
#include "starcloud/error.h"

/* etcd refuses more than --max-txn-ops (default 128) operations per txn. */
#define BATCH 100

static void usage(FILE *f)
{
	fprintf(f, "usage: starcloud store copy --from URL --to URL [--etcd-prefix /starcloud/]\n\n"
		   "Copies every object and token from one store to an empty one.\n"
		   "URL: sqlite:DATA_DIR or etcd://HOST:PORT[,HOST:PORT...]\n");
}

static int copy_all(sc_store_t *from, sc_store_t *to, size_t *copied)
{
	sc_kv_list_t src, dst;
	int rc = sc_store_list(to, "/", &dst);
	if (rc < 0)
		return rc;
	size_t existing = dst.n;
	sc_kv_list_free(&dst);
	if (existing > 0) {
		fprintf(stderr, "starcloud store copy: --to already holds %zu keys; refusing to "
				"mix stores\n", existing);
		return SC_EEXISTS;
	}
	if ((rc = sc_store_list(from, "/", &src)) < 0)
		return rc;
	sc_store_op_t ops[BATCH];
	for (size_t i = 0; i < src.n && rc == 0; i += BATCH) {
		size_t n = src.n - i < BATCH ? src.n - i : BATCH;
		for (size_t k = 0; k < n; k++)
			ops[k] = (sc_store_op_t){ SC_STORE_PUT, src.items[i + k].key,
						  src.items[i + k].value, SC_REV_ABSENT };
		if ((rc = sc_store_txn(to, ops, n, NULL, NULL)) == 0)
			*copied += n;
	}
	sc_kv_list_free(&src);
	return rc;
}

static int open_store(const char *what, const char *url, const char *prefix, sc_store_t **out)
{
	int rc = sc__ha_open_store(url, NULL, prefix, out);
	if (rc < 0)
		fprintf(stderr, "starcloud store copy: %s %s: %s\n", what, url, sc_strerror(rc));
	return rc;
}

int sc_cli_store(int argc, char **argv)
{
	const char *from = NULL, *to = NULL, *prefix = NULL;
	if (sc__cli_wants_help(argc, argv)) {
		usage(stdout);
		return SC_EXIT_OK;
	}
	if (argc < 2 || strcmp(argv[1], "copy") != 0) {
		usage(stderr);
		return SC_EXIT_USAGE;
	}
	for (int i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(argv[i], "--from") == 0 && v)
			from = argv[++i];
		else if (strcmp(argv[i], "--to") == 0 && v)
			to = argv[++i];
		else if (strcmp(argv[i], "--etcd-prefix") == 0 && v)
			prefix = argv[++i];
		else {
			fprintf(stderr, "starcloud store copy: unknown or incomplete option \"%s\"\n",
				argv[i]);
			return SC_EXIT_USAGE;
		}
	}
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
