/* GPU declarations (see gpudecl.h). */
#include "base/gpudecl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"

uint64_t sc_gpu_model_memory(const char *model)
{
	const char *dash = strrchr(model, '-');
	if (!dash)
		return 0;
	char *end;
	unsigned long v = strtoul(dash + 1, &end, 10);
	if (end == dash + 1 || !isdigit((unsigned char)dash[1]) ||
	    (strcmp(end, "GB") != 0 && strcmp(end, "G") != 0) || v > 4096)
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
	char *end;
	memset(out, 0, sizeof(*out));
	if (!decl || !isdigit((unsigned char)decl[0]))
		return SC_EINVAL;
	long count = strtol(decl, &end, 10);
	if (*end != 'x' || count < 0 || count > SC_GPU_DECL_MAX)
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
