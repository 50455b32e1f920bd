/* Error codes of libstarcloud.
 *
 * Functions that can fail return int: 0 (or a non-negative count) on success,
 * a negative SC_E* code on failure. The list is one X-macro so that the enum
 * and sc_strerror() can never drift apart. */
#ifndef STARCLOUD_ERROR_H
#define STARCLOUD_ERROR_H

#define SC_ERRNO_MAP(X)                                                                            \
	X(NOMEM, "out of memory")                                                                  \
	X(INVAL, "invalid argument")                                                               \
	X(PARSE, "malformed input")                                                                \
	X(NOTFOUND, "not found")                                                                   \
	X(EXISTS, "already exists")                                                                \
	X(CONFLICT, "conflict")                                                                    \
	X(TOOBIG, "input too large")                                                               \
	X(IO, "input/output error")                                                                \
	X(RANGE, "value out of range")                                                             \
	X(NOFIT, "does not fit")                                                                   \
	X(LIMIT, "over a limit")                                                                   \
	X(UNAVAIL, "service unavailable")                                                          \
	X(FENCED, "no longer the leader (write fenced)")                                           \
	X(NOSPACE, "no space left on the storage device")                                          \
	X(UNSURE, "the store did not answer: the change may or may not have been made")            \
	X(CANCELED, "cancelled")

enum {
	SC_OK = 0,
#define SC__ERR_ENUM(name, msg) SC_E##name,
	SC__ERR_FIRST = -1000,
	SC_ERRNO_MAP(SC__ERR_ENUM) SC__ERR_LAST
#undef SC__ERR_ENUM
};

/* Returns a static message for a code from this list ("unknown error" else). */
const char *sc_strerror(int err);

#endif
