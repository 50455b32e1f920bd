/* Job traces for the time mode of `starcloud simulate` (`--time`).
 *
 * Every format is turned into one list of jobs: a queue, an arrival time,
 * a run time, and a gang of identical pods that must all start together.
 *
 *   openb     an OpenB pod list (alibaba/clusterdata): one job of one pod per
 *             row; arrival = creation_time, run time = deletion_time minus
 *             scheduled_time (creation_time when absent); queue = qos
 *             (`--queue-by qos`, the default) or one queue; gpu_spec
 *             limits the GPU models a pod may use.
 *   gavel     Philly-derived traces of stanford-futuredata/gavel: TSV rows
 *             job_type, command, num_steps_arg, needs_data_dir, total_steps,
 *             arrival_time, scale_factor; one file per virtual cluster, the
 *             file's base name is the queue; run time = total_steps divided
 *             by the isolated throughput of (job_type, scale_factor) on the
 *             chosen GPU type in simulation_throughputs.json.
 *   tiresias  SymbioticLab/Tiresias CSV: job_id,num_gpu,submit_time,...,
 *             duration; one queue.
 *
 * Errors name the file, line and column ("FILE:LINE:COLUMN: ..."), return
 * SC_EPARSE (SC_EIO when a file cannot be read) and return nothing. */
#ifndef SC_SIM_JOBS_H
#define SC_SIM_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/trace.h"

typedef struct sc_tjob {
	char *name;
	char *queue;
	int64_t arrival;   /* seconds */
	int64_t duration;  /* seconds of running, >= 1 */
	int pods;          /* gang size, >= 1 */
	int gpus;          /* whole GPUs per pod */
	int gpu_milli;     /* share of one GPU per pod when gpus == 0 (0 = CPU pod) */
	int64_t cpu_milli; /* per pod */
	int64_t memory;    /* bytes per pod */
	bool preemptible;  /* best-effort class; others are "normal" */
	/* Allowed GPU models (OpenB gpu_spec "A|B"); NULL = any. One block,
	 * owned by the list: the pointers, then the names. */
	char **models;
	size_t nmodels;
} sc_tjob_t;

typedef struct sc_tjobs {
	sc_tjob_t *v;
	size_t n;
} sc_tjobs_t;

enum sc_tjob_format { SC_TJOB_OPENB = 0, SC_TJOB_GAVEL, SC_TJOB_TIRESIAS };

/* Parses a format name ("openb", "gavel", "tiresias"); -1 when unknown. */
int sc_tjob_format_parse(const char *name);

/* OpenB pod list already read by sc_trace_read_pods; `fname` for messages.
 * by_qos: queue per qos class, else one queue "default". */
int sc_tjobs_from_openb(const sc_trace_pods_t *pods, const char *fname, bool by_qos,
                        sc_tjobs_t *out, char *msg, size_t msgsize);
/* A gavel .trace file (appends to *out). throughputs: path of
 * simulation_throughputs.json; gpu_type: "v100", "p100" or "k80". */
int sc_tjobs_read_gavel(const char *path, const char *throughputs, const char *gpu_type,
                        sc_tjobs_t *out, char *msg, size_t msgsize);
/* Same with the trace text from a stream and the JSON already parsed
 * (for tests): json_text is the throughput file's content. */
int sc_tjobs_parse_gavel(const char *text, const char *fname, const char *queue,
                         const char *json_text, const char *gpu_type, sc_tjobs_t *out, char *msg,
                         size_t msgsize);
int sc_tjobs_read_tiresias(const char *path, sc_tjobs_t *out, char *msg, size_t msgsize);
int sc_tjobs_parse_tiresias(const char *text, const char *fname, sc_tjobs_t *out, char *msg,
                            size_t msgsize);

/* Makes arrivals `load` times as dense: each arrival's distance from the
 * first arrival is divided by load (rounded to the second); run times are
 * unchanged, so load > 1 raises the offered load. load must be > 0. */
void sc_tjobs_scale_arrivals(sc_tjobs_t *j, double load);

/* Gavel and Tiresias give a job as N pods of one GPU. Many multi-GPU jobs
 * run on one server (NVLink): this turns each such job with 2..max_gpus
 * pods into one pod of N GPUs (cpu and memory summed), so that it needs N
 * whole GPUs on one node and fragmentation can keep it waiting. */
void sc_tjobs_one_node(sc_tjobs_t *j, int max_gpus);

void sc_tjobs_free(sc_tjobs_t *j);

#endif
