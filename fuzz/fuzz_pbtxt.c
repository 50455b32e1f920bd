/* libFuzzer target: the Protocol Buffers text format reader (Triton model
 * configurations). Any input is either refused with a message or read into
 * a JSON object that serializes; nothing crashes, leaks or overflows. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/pbtxt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	err[0] = '\0';
	json_t *o = sc_pbtxt_parse((const char *)data, size, err, sizeof(err));
	if (!o) {
		if (strncmp(err, "line ", 5) != 0 && strcmp(err, "line 0") != 0 &&
		    !strstr(err, "longer than"))
			abort(); /* every refusal says where */
		return 0;
	}
	if (!json_is_object(o))
		abort();
	char *s = json_dumps(o, JSON_COMPACT);
	if (!s)
		abort();
	free(s);
	json_decref(o);
	return 0;
}
