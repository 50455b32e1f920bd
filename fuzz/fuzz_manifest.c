/* libFuzzer target: arbitrary bytes as a manifest file. Whatever decodes is
 * turned into a snapshot and scheduled, so the fuzzer reaches the core with
 * every shape of input the parsers let through. */
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "starcloud/core.h"
#include "starcloud/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sc_manifest_set_t *set = sc_manifest_set_new();
	if (!set)
		return 0;
	sc_manifest_error_t err;
	if (sc_manifest_add_text(set, "fuzz.yaml", (const char *)data, size, &err) >= 0) {
		sc_snapshot_t snap;
		if (sc_manifest_snapshot(set, 1800000000, &snap, &err) == 0) {
			sc_decisions_t *d = NULL;
			char msg[256];
			if (sc_schedule(&snap, &d, msg, sizeof(msg)) == 0) {
				json_t *j = sc_decisions_to_json(&snap, d);
				json_decref(j);
				sc_decisions_free(d);
			}
		}
	}
	sc_manifest_set_free(set);
	return 0;
}
