/* libFuzzer target: arbitrary bytes as every trace the simulator reads: an
 * OpenB node list and pod list (packing mode), and the time mode's job
 * traces (OpenB pods as jobs, Gavel with a fixed throughput table,
 * Tiresias). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/jobs.h"
#include "sim/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *tput = "{\"v100\": {\"('ResNet-18 (batch size 16)', 1)\": {\"null\": 2.0},"
                          " \"('ResNet-18 (batch size 16)', 2)\": {\"null\": 4.0}}}";

static void openb(const uint8_t *data, size_t size, char *msg, size_t msgsize)
{
	for (int kind = 0; kind < 2; kind++) {
		FILE *f = fmemopen((void *)data, size, "r");
		if (!f)
			return;
		if (kind == 0) {
			sc_trace_nodes_t n = {0};
			if (sc_trace_parse_nodes(f, "fuzz.csv", &n, msg, msgsize) == 0)
				sc_trace_nodes_free(&n);
		} else {
			sc_trace_pods_t p = {0};
			sc_tjobs_t j = {0};
			if (sc_trace_parse_pods(f, "fuzz.csv", &p, msg, msgsize) == 0) {
				if (sc_tjobs_from_openb(&p, "fuzz.csv", true, &j, msg, msgsize) ==
				    0)
					sc_tjobs_scale_arrivals(&j, 3.5);
				sc_tjobs_free(&j);
				sc_trace_pods_free(&p);
			}
		}
		fclose(f);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char msg[256];
	openb(data, size, msg, sizeof(msg));
	/* The job-trace readers take text. */
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	sc_tjobs_t j = {0};
	if (sc_tjobs_parse_gavel(text, "fuzz.trace", "vc", tput, "v100", &j, msg, sizeof(msg)) == 0)
		sc_tjobs_free(&j);
	if (sc_tjobs_parse_tiresias(text, "fuzz.csv", &j, msg, sizeof(msg)) == 0)
		sc_tjobs_free(&j);
	free(text);
	return 0;
}
