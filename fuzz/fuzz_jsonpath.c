/* libFuzzer target: `-o jsonpath=` templates (src/cli/jsonpath.c). The
 * input is a template, evaluated on a fixed document: it is refused with a
 * position, or it evaluates within a bounded output; nothing crashes, leaks
 * or overflows. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/jsonpath.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char doc_text[] =
    "{\"kind\":\"JobList\",\"items\":[{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\"}},"
    "\"spec\":{\"tasks\":[{\"replicas\":2}]},\"status\":{\"phase\":\"Running\"}},"
    "{\"metadata\":{\"name\":\"b\"},\"spec\":{\"tasks\":[]},\"status\":{}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *tmpl = malloc(size + 1), err[256];
	memcpy(tmpl, data, size);
	tmpl[size] = '\0';
	sc_jsonpath_t *p = sc_jsonpath_parse(tmpl, err, sizeof(err));
	if (!p && strncmp(err, "jsonpath: ", 10) != 0)
		abort(); /* every refusal says why */
	if (p) {
		json_t *doc = json_loads(doc_text, 0, NULL);
		sc_buf_t b;
		sc_buf_init(&b, 1 << 16);
		sc_jsonpath_eval(p, doc, &b);
		sc_buf_free(&b);
		json_decref(doc);
	}
	sc_jsonpath_free(p);
	free(tmpl);
	return 0;
}
