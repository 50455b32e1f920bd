/* Command line of `starcloud agent` and what it discovers at start-up. */
#ifndef SC_AGENT_AGENT_OPTS_H
#define SC_AGENT_AGENT_OPTS_H

#include <jansson.h>

#include "agent/state.h"

/* Fills a->o from argv. 0 to run, 1 after --help, < 0 on bad usage
 * (already reported). */
int sc__agent_parse(int argc, char **argv, sc_agent_t *a);
/* GPUs (NVML, then --gpus), CPU and memory defaults, advertise address. */
int sc__agent_discover(sc_agent_t *a);
/* Adds "k=v,k2=v2" to labels (an object). SC_EINVAL on bad syntax. */
int sc__agent_labels(const char *text, json_t *labels);

#endif
