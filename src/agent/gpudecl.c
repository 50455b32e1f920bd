/* GPU declarations (see gpudecl.h). */
#include "agent/gpudecl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "starcloud/error.h"

uint64_t sc_gpu_model_memory(const char *model)
{
	const char *dash = strrchr(model, '-');
	if (!dash)
		return 0;
	const char *end = dash + 1;
	uint64_t v;
	if (sc_parse_digits(&end, 4096, &v) < 0 ||
	    (strcmp(end, "GB") != 0 && strcmp(end, "G") != 0))
		return 0;
	return (uint64_t)v << 30;
}

static int model_ok(const char *m, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)m[i]) && m[i] != '-' && m[i] != '.' && m[i] != '_')
			return 0;
	return len > 0;
}

int sc_gpu_decl_parse(const char *decl, sc_gpu_decl_t *out)
{
	const char *end = decl;
	uint64_t count;
	memset(out, 0, sizeof(*out));
	if (!decl || sc_parse_digits(&end, SC_GPU_DECL_MAX, &count) < 0 || *end != 'x')
		return SC_EINVAL;
	const char *m = end + 1, *colon = strchr(m, ':');
	size_t mlen = colon ? (size_t)(colon - m) : strlen(m);
	if (mlen >= sizeof(out->model) || (colon && strcmp(colon, ":mig") != 0) ||
	    !model_ok(m, mlen))
		return SC_EINVAL;
	out->count = (int)count;
	snprintf(out->model, sizeof(out->model), "%.*s", (int)mlen, m);
	out->memory = sc_gpu_model_memory(out->model);
	out->mig = colon != NULL;
	return 0;
}
