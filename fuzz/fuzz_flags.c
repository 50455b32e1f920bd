/* libFuzzer target: the strict value parsers (base/parse.c) and the flag
 * table parser (base/flags.c).
 *
 * The input is split at NUL bytes into words. Each word goes through every
 * value parser, whose answers are checked against independent readings
 * (strtoll, strtod): what is accepted is in bounds, finite and exactly the
 * text's value. Then the words are argv for a table with one flag of each
 * kind: whatever the words, parsing must not crash, and on success every
 * field holds a value its flag allows. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cmdline.h"
#include "base/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

typedef struct fopts {
	sc_hostport_t listen;
	uint64_t dur;
	int n;
	double f;
	size_t body;
	int mode, on;
	const char *s;
	char text[8];
	int64_t i;
	uint64_t u;
	int calls;
} fopts_t;

static int fn(void *opts, const char *v, char *err, size_t errsz)
{
	((fopts_t *)opts)->calls++;
	return v[0] == 'x' ? -1 : 0;
}

static const sc_flag_t flags[] = {
    {.name = "--listen", SC_FLAG_AT(ADDR, fopts_t, listen), .def = "127.0.0.1:1"},
    {.name = "--dur", SC_FLAG_AT(DURATION, fopts_t, dur), .min = 50, .max = 604800000},
    {.name = "--n", .alias = "-n", SC_FLAG_AT(INT, fopts_t, n), .min = -5, .max = 100},
    {.name = "--f", SC_FLAG_AT(NUM, fopts_t, f), .min = 0, .max = 1, .def = "0.5"},
    {.name = "--body", SC_FLAG_AT(SIZE, fopts_t, body), .min = 1024, .max = 1 << 26, .def = "4Mi"},
    {.name = "--mode", SC_FLAG_AT(CHOICE, fopts_t, mode), .choices = "a|bb|ccc"},
    {.name = "--on", SC_FLAG_AT(BOOL, fopts_t, on)},
    {.name = "--s", SC_FLAG_AT(STR, fopts_t, s)},
    {.name = "--text", SC_FLAG_TEXT_AT(fopts_t, text)},
    {.name = "--i", SC_FLAG_AT(I64, fopts_t, i)},
    {.name = "--u", SC_FLAG_AT(U64, fopts_t, u), .min = 1, .max = 1e12},
    {.name = "--fn", .kind = SC_FLAG_FUNC, .fn = fn, .flags = SC_FLAG_REPEAT},
};

static const sc_command_t cmd = {
    .name = "fuzz", .flags = flags, .nflags = sizeof(flags) / sizeof(flags[0]), .max_args = 2};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Every refused flag prints a line: send stdio's streams to /dev/null.
	 * Sanitizer reports are written to file descriptor 2 directly and
	 * still show. */
	FILE *null = fopen("/dev/null", "w");
	if (null)
		stdout = stderr = null;
	return 0;
}

static void check_word(const char *w)
{
	int64_t i;
	if (sc_parse_i64(w, INT64_MIN, INT64_MAX, &i) == 0) {
		char *end;
		long long ref = strtoll(w, &end, 10);
		if (*end || ref != i || w[0] == ' ')
			abort();
	}
	uint64_t u;
	if (sc_parse_u64(w, 0, UINT64_MAX, &u) == 0 && w[0] != '-' && strtoull(w, NULL, 10) != u)
		abort();
	double d;
	if (sc_parse_num(w, -1e308, 1e308, &d) == 0) {
		char *end;
		if (!isfinite(d) || strtod(w, &end) != d || *end || strchr(w, 'x') ||
		    strchr(w, 'n') || strchr(w, 'N'))
			abort();
	}
	uint64_t ms;
	if (sc_parse_duration_ms(w, 50, 604800000, &ms) == 0 && (ms < 50 || ms > 604800000))
		abort();
	uint64_t b;
	if (sc_parse_size(w, 0, UINT64_MAX, &b) == 0 && strchr(w, ' '))
		abort();
	sc_hostport_t hp;
	if (sc_parse_hostport(w, &hp) == 0 &&
	    (hp.port < 0 || hp.port > 65535 || !hp.host[0] || strlen(hp.host) >= SC_HOST_MAX))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *buf = malloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = '\0';
	char *argv[66];
	int argc = 0;
	argv[argc++] = "fuzz";
	for (size_t p = 0; p <= size && argc < 65;) {
		argv[argc++] = buf + p;
		check_word(buf + p);
		p += strlen(buf + p) + 1;
	}
	argv[argc] = NULL;
	fopts_t o;
	memset(&o, 0, sizeof(o));
	int nargs = 0;
	int rc = sc_flags_parse(&cmd, &o, argc, argv, &nargs);
	if (rc == 0) {
		if (o.dur && (o.dur < 50 || o.dur > 604800000))
			abort();
		if (o.n < -5 || o.n > 100 || !(o.f >= 0 && o.f <= 1) || o.body < 1024 ||
		    o.body > (1 << 26) || o.mode < 0 || o.mode > 2 || strlen(o.text) >= 8 ||
		    (o.u && o.u > 1000000000000ull) || nargs > 2)
			abort();
	}
	free(buf);
	return 0;
}
