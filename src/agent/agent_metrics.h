/* The agent's /metrics (Prometheus text format): its pods, its link to the
 * server, and, when NVML is loaded, live figures of every GPU under the
 * DCGM exporter's metric names and labels (docs/AGENT.md), so dashboards
 * made for dcgm-exporter read them unchanged. Each device series also
 * names the pod and queue holding the device (one series per pod on a
 * shared device; empty labels on a free one), which is what per-queue GPU
 * utilisation in deploy/grafana is built on. Uses state.h and gpu.h only. */
#ifndef SC_AGENT_AGENT_METRICS_H
#define SC_AGENT_AGENT_METRICS_H

#include "agent/state.h"
#include "starcloud/buf.h"

/* Appends the whole page to b. Reads NVML now (a few calls per device). */
void sc__agent_metrics(sc_agent_t *a, sc_buf_t *b);

#endif
