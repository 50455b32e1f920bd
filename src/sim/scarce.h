/* Scarce capacity, as the `default` placement policy sees it
 * (docs/SIMULATOR.md has the measurements behind each rule).
 *
 * Restricted shapes. Some pods can run on few nodes: a gpu_spec naming one
 * or two models, or eight GPUs with 120 cores (only the 39 G3 nodes of
 * OpenB have that much CPU beside eight GPUs). Every other pod can go
 * elsewhere, so a placement that takes such a node's room away from them
 * costs them capacity they cannot replace, long before the cluster is
 * full. A shape is restricted when the nodes an empty copy of it fits
 * (GPU model, CPU, devices) hold at most half of the cluster's GPUs. A
 * placement's loss is, over the restricted shapes, the slots (pods of that
 * shape the node could still take) it removes, each weighted by the GPUs
 * of a slot and by how densely that shape is demanded on the GPUs it can
 * use: w = freq x gpus x gpus / (GPUs of the nodes it fits). The level is
 * the loss in steps of half the average demand density (all GPU shapes'
 * freq x gpus over all GPUs): whole numbers, so small differences do not
 * override the keys that follow it.
 *
 * Restricted room under pressure. The static weight above is small for a
 * rare shape (a P100-only share in gpuspec10 loses a fraction of a step
 * to a 1-GPU pod on a P100 node), so other pods could fill its few nodes
 * early and its pods then failed from 25 % arrived on. Each restricted
 * shape's pressure is the pods of that shape still to come (its frequency x
 * the pods the free GPU capacity still holds, at the typical pods' milli
 * per pod) over its slots left in the cluster; from 0.15 it ramps to 1 at
 * 0.4, and each of its slots a placement takes then adds ramp x 3 x the
 * slot's GPUs to the level (a 1-GPU slot under full pressure: 3 levels).
 *
 * Fresh devices. A whole-GPU pod needs untouched devices and a share above
 * half a GPU nearly always does too; a share can also fill a partly used
 * one. While untouched devices are plentiful it does not matter where a
 * share goes, but near saturation a share that opens one takes it from a
 * whole-GPU pod that will then fail. The pressure is the untouched devices
 * the free GPU capacity implies will be asked for (free milli / milli per
 * typical pod x untouched devices per typical pod) over the untouched
 * devices left; opening one costs 0 milli up to pressure 1.5, rising
 * linearly to 1,000 (a whole device) at 3.
 *
 * Values per node state (model, CPU left, devices' free milli in any
 * order) are memoised; one sc_scarce_t belongs to one run. */
#ifndef SC_SIM_SCARCE_H
#define SC_SIM_SCARCE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/frag.h"
#include "starcloud/cluster.h"

typedef struct sc_scarce sc_scarce_t;

/* shapes: every pod shape of the workload with its frequency (models
 * resolved for c), typical: the typical pods; both copied. Returns NULL
 * when out of memory. */
sc_scarce_t *sc_scarce_new(const sc_typical_t *shapes, size_t nshapes, const sc_typical_t *typical,
                           size_t ntypical, const sc_cluster_t *c);
void sc_scarce_free(sc_scarce_t *s);

/* The level of leaving node n with devices `left` and cpu_left CPU (n as it
 * is now is the state before). 0 when nothing restricted is lost. */
int sc_scarce_level(sc_scarce_t *s, const sc_node_view_t *n, const int16_t *left, int64_t cpu_left);

/* Records node n's state after a placement (the fresh-device count, the
 * restricted shapes' slots and pressure). */
void sc_scarce_update(sc_scarce_t *s, const sc_node_view_t *n);
/* The cost, in milli, of a share opening an untouched device now. */
double sc_scarce_fresh_cost(const sc_scarce_t *s);

/* Restricted shapes found (for tests and benchmarks). */
size_t sc_scarce_nrestricted(const sc_scarce_t *s);

#endif
