/* Readers for the OpenB trace format (alibaba/clusterdata
 * cluster-trace-gpu-v2023), the input of `starcloud simulate`.
 *
 * Node lists:  sn,cpu_milli,memory_mib,gpu,model
 * Pod lists:   name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,
 *              pod_phase,creation_time,deletion_time,scheduled_time]
 * The first line is a header naming the columns; columns are found by name,
 * so their order may vary and unknown columns are ignored. The multigpu*
 * lists carry only the first five pod columns.
 *
 * Input is bounded (SC_TRACE_MAX_LINE bytes a line, SC_TRACE_MAX_ROWS rows)
 * and validated row by row; the first bad field stops the read with
 * SC_EPARSE (or SC_ETOOBIG) and a message "FILE:LINE:COLUMN: ..." naming the
 * column. Nothing is returned on failure. */
#ifndef SC_SIM_TRACE_H
#define SC_SIM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SC_TRACE_MAX_LINE 4096
#define SC_TRACE_MAX_ROWS 10000000
#define SC_TRACE_NOTIME INT64_MIN /* time column absent or empty */

typedef struct sc_trace_node {
	char *name; /* column sn */
	int64_t cpu_milli;
	int64_t memory_mib;
	int gpu;     /* devices */
	char *model; /* "" for a CPU-only node */
} sc_trace_node_t;

typedef struct sc_trace_pod {
	char *name;
	int64_t cpu_milli;
	int64_t memory_mib;
	int num_gpu;
	int gpu_milli;         /* 0 for CPU pods, 1..1000 per GPU otherwise */
	char *gpu_spec;        /* "" = any model; else "A|B|C" */
	char *qos;             /* "" when absent */
	char *phase;           /* "" when absent */
	int64_t creation_time; /* seconds, or SC_TRACE_NOTIME */
	int64_t deletion_time;
	int64_t scheduled_time;
} sc_trace_pod_t;

typedef struct sc_trace_nodes {
	sc_trace_node_t *v;
	size_t n;
} sc_trace_nodes_t;

typedef struct sc_trace_pods {
	sc_trace_pod_t *v;
	size_t n;
} sc_trace_pods_t;

/* Reads from an open stream; `fname` names it in messages. On success the
 * caller owns *out (free with the matching _free). */
int sc_trace_parse_nodes(FILE *f, const char *fname, sc_trace_nodes_t *out, char *msg,
                         size_t msgsize);
int sc_trace_parse_pods(FILE *f, const char *fname, sc_trace_pods_t *out, char *msg,
                        size_t msgsize);
/* Same, opening `path` (SC_EIO with a message when it cannot be opened). */
int sc_trace_read_nodes(const char *path, sc_trace_nodes_t *out, char *msg, size_t msgsize);
int sc_trace_read_pods(const char *path, sc_trace_pods_t *out, char *msg, size_t msgsize);

/* Free what a reader returned; accept NULL and zeroed structs. */
void sc_trace_nodes_free(sc_trace_nodes_t *t);
void sc_trace_pods_free(sc_trace_pods_t *t);

#endif
