/* libFuzzer target: arbitrary bytes as an OpenB node list and pod list. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char msg[256];
	for (int kind = 0; kind < 2; kind++) {
		FILE *f = fmemopen((void *)data, size, "r");
		if (!f)
			return 0;
		if (kind == 0) {
			sc_trace_nodes_t n = {0};
			if (sc_trace_parse_nodes(f, "fuzz.csv", &n, msg, sizeof(msg)) == 0)
				sc_trace_nodes_free(&n);
		} else {
			sc_trace_pods_t p = {0};
			if (sc_trace_parse_pods(f, "fuzz.csv", &p, msg, sizeof(msg)) == 0)
				sc_trace_pods_free(&p);
		}
		fclose(f);
	}
	return 0;
}
