/* `starcloud describe`, `explain` and `top`: human summaries built from
 * what the server returns. The HTTP side stays in client.c: these modules
 * read through a function it hands in, so they hold no connection code and
 * their output is the same whichever server or token answered. */
#ifndef SC_CLI_DESCRIBE_H
#define SC_CLI_DESCRIBE_H

#include <jansson.h>

/* GETs path (/api/v1/...) into *doc (new reference, or NULL); returns the
 * HTTP status, or -1 when the server cannot be reached. */
typedef long (*sc_cli_get_fn)(void *ud, const char *path, json_t **doc);

/* describe RES NAME (RES the API's plural): a node's capacity, allocation,
 * devices and pods; a job's or deployment's tasks, pods, conditions and,
 * while it waits, why (explain); a queue's place in the tree, quotas and
 * the scheduler's figures; events about the object, oldest first. Other
 * kinds print their fields. Returns an exit status (SC_EXIT_*), having
 * printed the server's error when the object cannot be read. */
int sc_cli_describe_run(const char *res, const char *name, sc_cli_get_fn get, void *ud);

/* explain's text for the server's Explanation document e; res is "jobs"
 * or "deployments"; in_describe leaves out what describe already said and
 * indents the rest. */
void sc_cli_explain_print(json_t *e, const char *res, int in_describe);

/* top queues|nodes from the scheduler's own figures (GET
 * /api/v1/scheduler/status) and the pods the scheduler placed: queues as
 * their tree with fair share, allocated, requested, quota and limit
 * (shares and MIG slices as fractions, deployments included, parents
 * summed); nodes with the GPUs, CPU and memory allocated of each.
 * Returns an exit status. */
int sc_cli_top_run(const char *what, sc_cli_get_fn get, void *ud);

#endif
