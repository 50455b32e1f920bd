/* What the CLI reads out of the objects the server returns, in one place
 * so that `get`, `describe` and `top` count alike: a job's status, the pods
 * it asks for and holds, the GPUs a pod holds (shares and MIG slices as
 * fractions of a device, as the scheduler counts them), a node's state,
 * ages. Pure: no I/O; objects are borrowed. */
#ifndef SC_CLI_OBJINFO_H
#define SC_CLI_OBJINFO_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* The string at obj.a.b.c (NULL ends the path), or "" (never NULL). */
const char *sc_obj_str(json_t *obj, const char *a, const char *b, const char *c);

/* s, or dflt when s is "" (what sc_obj_str gives for an absent field): the
 * placeholder a table or a description shows instead. */
const char *sc_str_or(const char *s, const char *dflt);

/* Seconds since metadata.creationTimestamp (or `at`, an RFC 3339 string,
 * when given), at now; -1 when unknown. */
double sc_obj_age(json_t *obj, const char *at, int64_t now);

/* A job's or deployment's status as `get` shows it: its phase (Pending,
 * Running, Succeeded, Failed, Evicted), "Pending" before the first cycle
 * wrote one, "Releasing" while a running job's pods are being evicted. */
const char *sc_job_status(json_t *job);

/* Pods a job asks for: the sum of its tasks' replicas (1 when a task gives
 * none), or a deployment's spec.replicas. */
long sc_job_replicas(json_t *job);

/* Whether a pod of status.pods holds its node's resources: Running,
 * Releasing (being evicted) or Pipelined (bound to resources being freed). */
int sc_pod_holds(json_t *pod);

/* Pods of status.pods in phase (NULL: those that hold resources,
 * sc_pod_holds). */
long sc_job_pods(json_t *job, const char *phase);

/* Devices a pod holds: whole GPUs count 1 each, a gpuShare its milli /
 * 1000, a gpuMemory share its bytes over dev_mem (the node's device memory;
 * 0 when unknown: counted as 0), a MIG instance its compute slices / 7. */
double sc_pod_gpus(json_t *pod, double dev_mem);

/* GPUs held by a job's pods that hold resources (sc_pod_holds; dev_mem as
 * above). */
double sc_job_gpus(json_t *job, double dev_mem);

/* The task of a job a pod belongs to (pods are <job>-<task>-<index>), or
 * a deployment's template; NULL when none matches. */
json_t *sc_pod_task(json_t *job, const char *pod);

/* Resources of one replica of a task: cpu millicores and memory bytes
 * (0 when not given or not readable). */
void sc_task_cpu_mem(json_t *task, int64_t *cpu_milli, int64_t *mem);

/* A node's STATUS as kubectl words it: Ready or NotReady (status.ready;
 * a node no agent reports on is Ready, as the scheduler treats it), with
 * ",SchedulingDisabled" when cordoned. */
void sc_node_status(json_t *node, char *out, size_t outsz);

/* Device memory of a node's GPUs in bytes (spec.gpus.memory), 0 if none. */
double sc_node_gpu_mem(json_t *node);

/* "k=v,k2=v2" from metadata.labels, or "<none>". */
void sc_obj_labels(json_t *obj, char *out, size_t outsz);

/* A quantity (JSON number or string) as a double: cpu in cores, memory in
 * bytes; -1 when absent or unreadable. kai: a scheduling.run.ai/v2 Queue
 * (cpu in millicores, memory in MB). */
double sc_qty_cpu(json_t *v, int kai);
double sc_qty_mem(json_t *v, int kai);

/* Bytes for people: 512Mi, 80Gi, 1.5Ti. */
void sc_fmt_bytes(char *out, size_t outsz, double bytes);

/* Figure res (cpu, memory, gpu...) of a queue's resource object r as a
 * cell: "-" when r or the figure is absent or null, bytes for people when
 * bytes is set, else a number. One function so `describe queue` and `top`
 * show a queue's figures alike. r is borrowed; out is the caller's. */
void sc_fmt_res(char *out, size_t outsz, json_t *r, const char *res, int bytes);

#endif
