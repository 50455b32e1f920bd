/* GPU fragmentation as the FGD paper defines it (Weng et al., USENIX ATC'23).
 *
 * A node's free GPU milli counts as fragmented with respect to one pod
 * shape when that pod cannot use it: all of it when the pod does not fit
 * the node at all (too little CPU, no device with enough room, a GPU model
 * the pod does not accept, or a CPU-only pod, which uses no GPU), and, when
 * it fits, the devices whose free share is smaller than the pod's per-GPU
 * request. The node's fragmentation is the expectation of that amount over
 * the "typical pods": the most frequent pod shapes of the workload, taken
 * until they cover 95 % of its pods, weighted by their frequency.
 *
 * A node state is (GPU model, CPU left, multiset of free milli per device);
 * fragmentation depends on nothing else, so values are memoised per state:
 * thousands of nodes share a few hundred distinct states, which is what
 * makes FGD scoring cheap. The memo is private to one sc_frag_t (one run),
 * so parallel runs share nothing. */
#ifndef SC_SIM_FRAG_H
#define SC_SIM_FRAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "starcloud/cluster.h"

/* The resource shape of a pod as fragmentation sees it. */
typedef struct sc_pod_shape {
	int64_t cpu;     /* millicores; 0 is counted as 100 (kube-scheduler's
	                  * non-zero default for pods without requests) */
	int milli;       /* per-GPU milli: 0 (CPU pod), 1..999 (share), 1000 */
	int num;         /* GPUs */
	int spec;        /* caller's id of the allowed-model list (grouping) */
	uint64_t models; /* bit m = accepts model id m; all ones = any */
} sc_pod_shape_t;

typedef struct sc_typical {
	sc_pod_shape_t shape;
	double p; /* frequency; the list sums to 1 */
} sc_typical_t;

/* Picks the typical pods of a workload: shapes by decreasing frequency
 * (ties: larger cpu, then milli, num, spec first) until they cover
 * `coverage` (0.95) of the pods, renormalised to sum to 1. Returns the
 * count written to *out (malloc'd, caller frees) or SC_ENOMEM. */
int sc_typical_pods(const sc_pod_shape_t *pods, size_t n, double coverage, sc_typical_t **out);

/* Expected GPU milli that stays unused on one device, by its free milli g
 * (0..SC_GPU_MILLI), if share pods keep landing on it: the device gets a
 * share at all with probability 1 - exp(-fill_rate * Q(g)), where Q(g) is
 * the frequency of the typical share pods that fit g, and the share it
 * gets is one of those, in proportion to its frequency; it then keeps
 * going from g - milli. Whole-GPU and CPU pods do not fill gaps, so a
 * fresh device (g = SC_GPU_MILLI) is valued as a gap that shares fill.
 * A gap only rare pods fit (a 210 on an OpenB trace fits only the 160s,
 * under 1 % of pods) keeps most of its milli; a gap common pods fit
 * (a 530 takes a 470) is worth little waste. out gets SC_GPU_MILLI + 1
 * values. */
void sc_gap_waste(const sc_typical_t *t, size_t nt, double fill_rate, double out[SC_GPU_MILLI + 1]);

/* A memo of values per node state, open addressing at most half full. The
 * FGD score here and the scarce-capacity score (scarce.c) both value a node
 * by a pure function of its state and look states up in one; this is the
 * one implementation they share. Owns its slots (sc_state_memo_release
 * frees them); one per run, not thread-safe. */
typedef struct sc_state_key {
	int64_t cpu;
	int16_t gpu[SC_MAX_GPUS]; /* sorted, largest free first */
	int16_t model;
	int16_t ngpu;
	int32_t pad; /* zero unless a caller keeps a separate value space;
	              * keeps memcmp over the whole struct well defined */
} sc_state_key_t;

typedef struct sc_state_slot {
	sc_state_key_t key;
	double value;
	bool used;
} sc_state_slot_t;

typedef struct sc_state_memo {
	sc_state_slot_t *slots;
	size_t cap, count; /* cap is a power of two */
	bool oom;          /* the memo could not grow: callers compute directly */
} sc_state_memo_t;

/* Allocates cap (a power of two) empty slots: 0 or SC_ENOMEM. */
int sc_state_memo_init(sc_state_memo_t *m, size_t cap);
void sc_state_memo_release(sc_state_memo_t *m);
/* The key of a state: all of *k written (pad 0), the ngpu entries of gpu
 * sorted, so states that differ only in device order share one entry. */
void sc_state_key(sc_state_key_t *k, int model, int64_t cpu, const int16_t *gpu, int ngpu);
/* k's slot: used when k is stored, else the free slot it goes in (borrowed,
 * valid until the next sc_state_memo_added). */
sc_state_slot_t *sc_state_memo_slot(sc_state_memo_t *m, const sc_state_key_t *k);
/* To call after filling a free slot: keeps the load under one half so
 * probes stay short, setting m->oom when the table cannot grow. */
void sc_state_memo_added(sc_state_memo_t *m);

typedef struct sc_frag sc_frag_t;

/* typical is copied. nnodes sizes the per-node current values. */
sc_frag_t *sc_frag_new(const sc_typical_t *typical, size_t ntypical, size_t nnodes);
void sc_frag_free(sc_frag_t *f);

/* Fragmented milli of one node state (memoised). gpu_left has ngpu
 * entries in any order. */
double sc_frag_state(sc_frag_t *f, int model, int64_t cpu_left, const int16_t *gpu_left, int ngpu);
/* The same computed directly, without the memo (for tests). */
double sc_frag_compute(const sc_typical_t *t, size_t nt, int model, int64_t cpu_left,
                       const int16_t *gpu_left, int ngpu);

/* One-step lookahead: the state's fragmentation plus its expected
 * fragmentation after the next typical pod lands on it, where whole-GPU
 * pods take devices and CPU and CPU pods take CPU; share pods, and pods
 * that do not fit, leave it as is. Memoised like sc_frag_state. */
double sc_frag_lookahead(sc_frag_t *f, int model, int64_t cpu_left, const int16_t *gpu_left,
                         int ngpu);

/* The typical pods (borrowed; *n gets their count). */
const sc_typical_t *sc_frag_typical(const sc_frag_t *f, size_t *n);
/* Current fragmentation of node i, as of the last sc_frag_update. */
double sc_frag_node(const sc_frag_t *f, uint32_t i);
/* Recomputes node n's current value and the cluster total. */
void sc_frag_update(sc_frag_t *f, const sc_node_view_t *n);
/* Sum over all nodes updated so far. */
double sc_frag_total(const sc_frag_t *f);
/* Memo statistics, for benchmarks. */
size_t sc_frag_memo_size(const sc_frag_t *f);

#endif
