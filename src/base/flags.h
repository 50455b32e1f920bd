/* Command-line flags from one table per command.
 *
 * A command describes each flag once, in a static table of sc_flag_t: its
 * name, its kind (which fixes how a value is parsed and checked, through
 * base/parse.h), the field of the command's options struct it fills, its
 * bounds, its default as text and its help. From that one table come:
 *
 *   sc_flags_parse()   (base/cmdline.h) argv -> the options struct (defaults, then the
 *                      environment, then argv), --help, errors that name
 *                      the flag;
 *   sc_flags_usage()   the --help text;
 *   base/flagdoc.h     man pages and completion (hidden --help-man and
 *                      --help-words print them for scripts/gen-docs.sh);
 *   sc_flags_set()     one NAME=VALUE from any other source with the same
 *                      checks and messages (a configuration file: its key
 *                      is the flag's name without the dashes, sc_flag_key();
 *                      base/flagfile.h reads one for a SC_FLAG_CONFIG flag);
 *   the table itself   for generated documentation (every field is data).
 *
 * Defaults are text parsed like any value, so the default that --help
 * prints is the one in force. A flag whose default is computed at start-up
 * (this machine's CPUs) has none here and says so in its help.
 *
 * A field is named with SC_FLAG_AT(KIND, struct type, field), which checks
 * at compile time that the field has the C type the kind writes:
 *
 *   typedef struct opts { sc_hostport_t listen; uint64_t timeout_ms; } opts_t;
 *   static const sc_flag_t flags[] = {
 *       {.name = "--listen", SC_FLAG_AT(ADDR, opts_t, listen),
 *        .def = "127.0.0.1:8080", .help = "where to serve"},
 *       {.name = "--timeout", SC_FLAG_AT(DURATION, opts_t, timeout_ms),
 *        .max = 7 * 86400e3, .def = "60s", .help = "whole request"},
 *   };
 *
 * Nothing here allocates; strings stored by SC_FLAG_STR borrow the value
 * (argv lives as long as the process). */
#ifndef SC_BASE_FLAGS_H
#define SC_BASE_FLAGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/parse.h"

typedef enum sc_flag_kind {
	SC_FLAG_SECTION,  /* no flag: a heading in --help (its .help) */
	SC_FLAG_BOOL,     /* int; takes no value and sets 1 */
	SC_FLAG_STR,      /* const char *: the value itself, borrowed */
	SC_FLAG_TEXT,     /* char[N]: a copy; longer than N - 1 is refused */
	SC_FLAG_INT,      /* int: a whole number in [min, max] */
	SC_FLAG_I64,      /* int64_t: a whole number in [min, max] */
	SC_FLAG_U64,      /* uint64_t: a whole number in [min, max] */
	SC_FLAG_NUM,      /* double: a finite number in [min, max] */
	SC_FLAG_DURATION, /* uint64_t milliseconds in [min, max] */
	SC_FLAG_SIZE,     /* size_t bytes in [min, max] ("4Mi") */
	SC_FLAG_ADDR,     /* sc_hostport_t: HOST:PORT */
	SC_FLAG_CHOICE,   /* int: the index of the value in .choices */
	SC_FLAG_FUNC,     /* .fn(opts, value, err, errsz) does it all */
} sc_flag_kind_t;

/* The C type each kind writes (SC_FLAG_AT checks fields against it). */
typedef int sc__flag_BOOL;
typedef const char *sc__flag_STR;
typedef int sc__flag_INT;
typedef int64_t sc__flag_I64;
typedef uint64_t sc__flag_U64;
typedef double sc__flag_NUM;
typedef uint64_t sc__flag_DURATION;
typedef size_t sc__flag_SIZE;
typedef sc_hostport_t sc__flag_ADDR;
typedef int sc__flag_CHOICE;

#define SC_FLAG_AT(KIND, T, f)                                                                     \
	.kind = SC_FLAG_##KIND, .off = _Generic(&((T *)0)->f, sc__flag_##KIND * : offsetof(T, f))
#define SC_FLAG_TEXT_AT(T, f)                                                                      \
	.kind = SC_FLAG_TEXT,                                                                      \
	.off = _Generic(&((T *)0)->f, char(*)[sizeof(((T *)0)->f)]                                 \
	                : offsetof(T, f)),                                                         \
	.cap = sizeof(((T *)0)->f)

/* Returns 0, or < 0 with a message (no flag name: the caller adds it). */
typedef int (*sc_flag_fn)(void *opts, const char *value, char *err, size_t errsz);

enum {
	SC_FLAG_REPEAT = 1, /* may be given more than once (FUNC: each value to .fn) */
	SC_FLAG_HIDDEN = 2, /* left out of --help */
	SC_FLAG_CONFIG = 4, /* a STR flag naming a configuration file (base/flagfile.h) */
	SC_FLAG_NOFILE = 8, /* given on the command line only, never in such a file */
};

struct json_t; /* jansson's value (base/flagfile.h hands keys' values over) */

/* A configuration file's key that is not a flag (see base/flagfile.h),
 * with its value, or one element of it when the value is a list (NULL for
 * an empty list): returns 0 when it took the value, SC_ENOTFOUND when the
 * key is unknown, another < 0 with a message in err (no key name: the
 * caller adds it). */
typedef int (*sc_flag_file_key_fn)(void *opts, const char *key, struct json_t *value, char *err,
                                   size_t errsz);

typedef struct sc_flag {
	const char *name;  /* "--listen" */
	const char *alias; /* "-l", or NULL */
	sc_flag_kind_t kind;
	size_t off;          /* the field in the options struct */
	size_t cap;          /* SC_FLAG_TEXT: the field's size */
	double min, max;     /* inclusive bounds; DURATION in ms, SIZE in bytes.
	                        max 0: no upper bound; both 0: the whole range */
	const char *choices; /* SC_FLAG_CHOICE: "fail|retry" (index 0, 1) */
	sc_flag_fn fn;       /* SC_FLAG_FUNC */
	const char *meta;    /* the value in --help ("HOST:PORT"); a default per kind */
	const char *def;     /* default as it would be typed, applied before argv */
	const char *env;     /* environment variable read when the flag is absent */
	const char *help;    /* one sentence; '\n' starts an indented line */
	unsigned flags;      /* SC_FLAG_REPEAT, SC_FLAG_HIDDEN */
} sc_flag_t;

typedef struct sc_command {
	const char *name;   /* "gateway": messages read "starcloud gateway: ..." */
	const char *args;   /* usage after the name: "[options]", "JOB [POD]" */
	const char *about;  /* a paragraph under the usage line, or NULL */
	const char *footer; /* a paragraph after the flags, or NULL */
	const sc_flag_t *flags;
	size_t nflags;
	int max_args;                 /* positional arguments allowed (0: none) */
	sc_flag_file_key_fn file_key; /* or NULL: every key of a file is a flag */
} sc_command_t;

/* Applies every default (SC_EINVAL if a table's default is itself bad: a
 * programming error that the unit test of each table catches). */
int sc_flags_defaults(const sc_command_t *cmd, void *opts);

/* Finds a flag by "--name", alias or key ("name"); NULL if none. */
const sc_flag_t *sc_flags_find(const sc_command_t *cmd, const char *name);

/* Applies value (NULL for a BOOL) to one flag. On error writes
 * "--flag: expected ..., got \"v\"" into err and returns < 0. */
int sc_flags_set(const sc_command_t *cmd, const sc_flag_t *f, void *opts, const char *value,
                 char *err, size_t errsz);

/* "--max-body" -> "max-body": the key in a configuration file. */
const char *sc_flag_key(const sc_flag_t *f);

/* The value a flag takes as --help and the man page show it: f->meta, or
 * one word for its kind ("N", "DUR", "HOST:PORT", "" for a switch).
 * Static storage or the table's own string. */
const char *sc_flag_meta(const sc_flag_t *f);

/* The --help text: usage line, about, flags with metavariables, help and
 * defaults aligned, footer. */
void sc_flags_usage(const sc_command_t *cmd, FILE *out);

#endif
