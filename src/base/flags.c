#include "base/flags.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "starcloud/error.h"

const char *sc_flag_key(const sc_flag_t *f)
{
	const char *k = f->name ? f->name : "";
	while (*k == '-')
		k++;
	return k;
}

const sc_flag_t *sc_flags_find(const sc_command_t *cmd, const char *name)
{
	for (size_t i = 0; i < cmd->nflags; i++) {
		const sc_flag_t *f = &cmd->flags[i];
		if (f->kind == SC_FLAG_SECTION || !f->name)
			continue;
		if (strcmp(f->name, name) == 0 || (f->alias && strcmp(f->alias, name) == 0) ||
		    (name[0] != '-' && strcmp(sc_flag_key(f), name) == 0))
			return f;
	}
	return NULL;
}

/* ---------------------------------------------------------------------
 * Values
 * ------------------------------------------------------------------- */

/* Both bounds 0: the type's whole range. max 0 alone: no upper bound. */
static bool unbounded(const sc_flag_t *f)
{
	return f->min == 0 && f->max == 0;
}

static bool no_max(const sc_flag_t *f)
{
	return f->max == 0;
}

static int64_t i64_bound(double v)
{
	return v >= 9.2233720368547758e18    ? INT64_MAX
	       : v <= -9.2233720368547758e18 ? INT64_MIN
	                                     : (int64_t)v;
}

static uint64_t u64_bound(double v)
{
	return v >= 1.8446744073709552e19 ? UINT64_MAX : v <= 0 ? 0 : (uint64_t)v;
}

/* The choice's index in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *v)
{
	size_t vl = strlen(v);
	int i = 0;
	for (const char *p = choices; *p; i++) {
		size_t n = strcspn(p, "|");
		if (n == vl && vl && strncmp(p, v, n) == 0)
			return i;
		p += n + (p[n] == '|');
	}
	return -1;
}

/* 604800000 -> "7d", 1500 -> "1500ms": the largest unit that is exact. */
static const char *ms_words(uint64_t ms, char *buf, size_t bufsz)
{
	static const struct {
		uint64_t ms;
		const char *unit;
	} units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (ms && ms % units[i].ms == 0) {
			snprintf(buf, bufsz, "%llu%s", (unsigned long long)(ms / units[i].ms),
			         units[i].unit);
			return buf;
		}
	snprintf(buf, bufsz, "%llums", (unsigned long long)ms);
	return buf;
}

/* Words for "expected ..." of one flag, bounds included. */
static void expected(const sc_flag_t *f, char *out, size_t outsz)
{
	switch (f->kind) {
	case SC_FLAG_INT:
	case SC_FLAG_I64:
	case SC_FLAG_U64:
		if (unbounded(f))
			snprintf(out, outsz, "%s", sc_parse_expect(SC_PARSE_WHOLE));
		else if (no_max(f))
			snprintf(out, outsz, "a whole number of at least %.0f", f->min);
		else
			snprintf(out, outsz, "a whole number from %.0f to %.0f", f->min, f->max);
		return;
	case SC_FLAG_NUM:
		if (unbounded(f))
			snprintf(out, outsz, "%s", sc_parse_expect(SC_PARSE_NUM));
		else if (no_max(f))
			snprintf(out, outsz, "a number of at least %g", f->min);
		else
			snprintf(out, outsz, "a number from %g to %g", f->min, f->max);
		return;
	case SC_FLAG_DURATION: {
		char lo[32], hi[32];
		snprintf(out, outsz, "%s", sc_parse_expect(SC_PARSE_DURATION));
		if (no_max(f) && f->min > 0)
			snprintf(out + strlen(out), outsz - strlen(out), " of at least %s",
			         ms_words(u64_bound(f->min), lo, sizeof(lo)));
		else if (!no_max(f) && f->min == 0)
			snprintf(out + strlen(out), outsz - strlen(out), " of at most %s",
			         ms_words(u64_bound(f->max), hi, sizeof(hi)));
		else if (!no_max(f))
			snprintf(out + strlen(out), outsz - strlen(out), " from %s to %s",
			         ms_words(u64_bound(f->min), lo, sizeof(lo)),
			         ms_words(u64_bound(f->max), hi, sizeof(hi)));
		return;
	}
	case SC_FLAG_SIZE:
		snprintf(out, outsz, "%s", sc_parse_expect(SC_PARSE_SIZE));
		if (no_max(f) && f->min > 0)
			snprintf(out + strlen(out), outsz - strlen(out), " of at least %.0f",
			         f->min);
		else if (!no_max(f))
			snprintf(out + strlen(out), outsz - strlen(out), " from %.0f to %.0f",
			         f->min, f->max);
		return;
	case SC_FLAG_ADDR:
		snprintf(out, outsz, "%s", sc_parse_expect(SC_PARSE_HOSTPORT));
		return;
	case SC_FLAG_CHOICE: {
		/* "a|b|c" -> "a, b or c" */
		size_t n = 0, k = 0, count = 1;
		for (const char *p = f->choices; *p; p++)
			count += *p == '|';
		out[0] = '\0';
		for (const char *p = f->choices; *p && n < outsz; k++) {
			size_t l = strcspn(p, "|");
			const char *sep = k == 0 ? "" : k + 1 == count ? " or " : ", ";
			n += (size_t)snprintf(out + n, outsz - n, "%s%.*s", sep, (int)l, p);
			p += l + (p[l] == '|');
		}
		return;
	}
	case SC_FLAG_TEXT:
		snprintf(out, outsz, "at most %zu bytes", f->cap ? f->cap - 1 : 0);
		return;
	default:
		snprintf(out, outsz, "a value");
		return;
	}
}

/* set_value's numbers: parsed within the flag's bounds (those of the C
 * type when the table gives none) into field. 0 or < 0. */
static int set_number(const sc_flag_t *f, char *field, const char *v)
{
	int64_t i;
	uint64_t u;
	int rc;
	switch (f->kind) {
	case SC_FLAG_INT:
		rc = sc_parse_i64(v, unbounded(f) ? INT_MIN : i64_bound(f->min),
		                  no_max(f) ? INT_MAX : i64_bound(f->max), &i);
		if (rc == 0)
			*(int *)field = (int)i;
		return rc;
	case SC_FLAG_I64:
		return sc_parse_i64(v, unbounded(f) ? INT64_MIN : i64_bound(f->min),
		                    no_max(f) ? INT64_MAX : i64_bound(f->max), (int64_t *)field);
	case SC_FLAG_U64:
		return sc_parse_u64(v, u64_bound(f->min),
		                    no_max(f) ? UINT64_MAX : u64_bound(f->max), (uint64_t *)field);
	case SC_FLAG_NUM:
		return sc_parse_num(v, unbounded(f) ? -1e308 : f->min, no_max(f) ? 1e308 : f->max,
		                    (double *)field);
	case SC_FLAG_DURATION:
		return sc_parse_duration_ms(v, u64_bound(f->min),
		                            no_max(f) ? UINT64_MAX : u64_bound(f->max),
		                            (uint64_t *)field);
	case SC_FLAG_SIZE:
		rc = sc_parse_size(v, u64_bound(f->min), no_max(f) ? SIZE_MAX : u64_bound(f->max),
		                   &u);
		if (rc == 0)
			*(size_t *)field = (size_t)u;
		return rc;
	default:
		return SC_EINVAL;
	}
}

static int set_value(const sc_flag_t *f, void *opts, const char *v, char *err, size_t errsz)
{
	char *field = (char *)opts + f->off;
	int rc = 0;
	switch (f->kind) {
	case SC_FLAG_SECTION:
		return SC_EINVAL;
	case SC_FLAG_BOOL:
		*(int *)field = 1;
		return 0;
	case SC_FLAG_STR:
		*(const char **)field = v;
		return 0;
	case SC_FLAG_TEXT:
		if (strlen(v) >= f->cap) {
			rc = SC_ERANGE;
			break;
		}
		memcpy(field, v, strlen(v) + 1);
		return 0;
	case SC_FLAG_INT:
	case SC_FLAG_I64:
	case SC_FLAG_U64:
	case SC_FLAG_NUM:
	case SC_FLAG_DURATION:
	case SC_FLAG_SIZE:
		rc = set_number(f, field, v);
		break;
	case SC_FLAG_ADDR:
		rc = sc_parse_hostport(v, (sc_hostport_t *)field);
		break;
	case SC_FLAG_CHOICE: {
		int i = choice_index(f->choices, v);
		if (i < 0)
			rc = SC_EPARSE;
		else
			*(int *)field = i;
		break;
	}
	case SC_FLAG_FUNC: {
		char why[256] = "";
		rc = f->fn(opts, v, why, sizeof(why));
		if (rc < 0) {
			snprintf(err, errsz, "%s: %s", f->name, why[0] ? why : "bad value");
			return SC_EINVAL;
		}
		return 0;
	}
	}
	if (rc == 0)
		return 0;
	char exp[160];
	expected(f, exp, sizeof(exp));
	snprintf(err, errsz, "%s: expected %s, got \"%s\"", f->name, exp, v);
	return SC_EINVAL;
}

int sc_flags_set(const sc_command_t *cmd, const sc_flag_t *f, void *opts, const char *value,
                 char *err, size_t errsz)
{
	(void)cmd;
	if (f->kind == SC_FLAG_BOOL)
		return set_value(f, opts, "", err, errsz);
	if (!value) {
		snprintf(err, errsz, "%s needs a value", f->name);
		return SC_EINVAL;
	}
	return set_value(f, opts, value, err, errsz);
}

int sc_flags_defaults(const sc_command_t *cmd, void *opts)
{
	char err[512];
	for (size_t i = 0; i < cmd->nflags; i++) {
		const sc_flag_t *f = &cmd->flags[i];
		if (!f->def || f->kind == SC_FLAG_SECTION)
			continue;
		if (f->kind == SC_FLAG_BOOL) {
			/* "0"/"1" name a switch's default; only "1" sets it. */
			if (strcmp(f->def, "1") == 0)
				*(int *)((char *)opts + f->off) = 1;
			continue;
		}
		if (set_value(f, opts, f->def, err, sizeof(err)) < 0) {
			fprintf(stderr, "starcloud %s: default of %s\n", cmd->name, err);
			return SC_EINVAL;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * --help
 * ------------------------------------------------------------------- */

const char *sc_flag_meta(const sc_flag_t *f)
{
	if (f->meta)
		return f->meta;
	switch (f->kind) {
	case SC_FLAG_BOOL:
		return "";
	case SC_FLAG_INT:
	case SC_FLAG_I64:
	case SC_FLAG_U64:
		return "N";
	case SC_FLAG_NUM:
		return "F";
	case SC_FLAG_DURATION:
		return "DUR";
	case SC_FLAG_SIZE:
		return "BYTES";
	case SC_FLAG_ADDR:
		return "HOST:PORT";
	case SC_FLAG_CHOICE:
		return f->choices;
	default:
		return "VALUE";
	}
}

/* "--name META" or "-n, --name META" into buf. */
static void flag_words(const sc_flag_t *f, char *buf, size_t bufsz)
{
	const char *m = sc_flag_meta(f);
	snprintf(buf, bufsz, "%s%s%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : "", f->name,
	         *m ? " " : "", m);
}

void sc_flags_usage(const sc_command_t *cmd, FILE *out)
{
	fprintf(out, "usage: starcloud %s %s\n", cmd->name, cmd->args ? cmd->args : "[options]");
	if (cmd->about)
		fprintf(out, "\n%s\n", cmd->about);
	/* One column for help, after the widest flag (within reason). */
	size_t col = 0;
	char words[160];
	for (size_t i = 0; i < cmd->nflags; i++) {
		const sc_flag_t *f = &cmd->flags[i];
		if (f->kind == SC_FLAG_SECTION || (f->flags & SC_FLAG_HIDDEN))
			continue;
		flag_words(f, words, sizeof(words));
		if (strlen(words) > col)
			col = strlen(words);
	}
	col = col > 26 ? 26 : col;
	fprintf(out, "\n");
	for (size_t i = 0; i < cmd->nflags; i++) {
		const sc_flag_t *f = &cmd->flags[i];
		if (f->flags & SC_FLAG_HIDDEN)
			continue;
		if (f->kind == SC_FLAG_SECTION) {
			fprintf(out, "\n%s\n", f->help ? f->help : "");
			continue;
		}
		flag_words(f, words, sizeof(words));
		fprintf(out, "  %-*s", (int)col, words);
		if (strlen(words) > col)
			fprintf(out, "\n  %-*s", (int)col, "");
		const char *h = f->help ? f->help : "";
		for (;;) {
			size_t n = strcspn(h, "\n");
			fprintf(out, "  %.*s", (int)n, h);
			if (!h[n])
				break;
			fprintf(out, "\n  %-*s", (int)col, "");
			h += n + 1;
		}
		if (f->def && f->kind != SC_FLAG_BOOL)
			fprintf(out, " (default %s)", f->def);
		if (f->env)
			fprintf(out, " [$%s]", f->env);
		if (f->flags & SC_FLAG_REPEAT)
			fprintf(out, " (repeatable)");
		fprintf(out, "\n");
	}
	if (cmd->footer)
		fprintf(out, "\n%s\n", cmd->footer);
}
