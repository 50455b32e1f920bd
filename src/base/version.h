/* The release version and the rules for version skew between components.
 *
 * A server of version N serves agents, gateways and CLIs from the release
 * before it (N-1) on: SC_MIN_PEER_VERSION names the oldest one. Every
 * Starcloud client says who it is in its User-Agent header,
 * "starcloud-<component>/<version>" (SC_USER_AGENT), and the
 * server refuses a Starcloud client older than that with an error that
 * says so (sc_version_check). A client that does not name itself as
 * Starcloud (curl, a browser, Prometheus, and the 0.1 releases, which sent
 * no User-Agent) is not checked: the REST API is versioned by its path.
 *
 * The version is also debian/changelog's (tests/install/test_make_install.py checks
 * that the two agree). */
#ifndef SC_BASE_VERSION_H
#define SC_BASE_VERSION_H

#include <stddef.h>

#define SC_VERSION "0.2.0"

/* Exit statuses of every command:
 *   SC_EXIT_OK (0)     success
 *   SC_EXIT_FAIL (1)   the operation failed (out of memory, I/O, server)
 *   SC_EXIT_USAGE (2)  bad usage or bad input (a manifest error, a flag) */
enum { SC_EXIT_OK = 0, SC_EXIT_FAIL = 1, SC_EXIT_USAGE = 2 };
/* The oldest agent, gateway or CLI a server of this version serves. */
#define SC_MIN_PEER_VERSION "0.1.0"

typedef struct sc_version {
	int major, minor, patch;
} sc_version_t;

/* Parses "MAJOR.MINOR.PATCH" (each 0..9999, digits only, nothing after).
 * SC_EINVAL otherwise. */
int sc_version_parse(const char *s, sc_version_t *out);
/* <0, 0, >0 as a is older than, equal to or newer than b. */
int sc_version_cmp(const sc_version_t *a, const sc_version_t *b);
/* The User-Agent of a component, a string literal: SC_USER_AGENT("agent")
 * is "starcloud-agent/0.2.0". */
#define SC_USER_AGENT(component) "starcloud-" component "/" SC_VERSION
/* Reads a User-Agent value (may be NULL). Returns 1 when it names a
 * Starcloud component ("starcloud-NAME/X.Y.Z", anything after a space
 * ignored), filling component (truncated to compsz) and *v; 0 when it is
 * not a Starcloud client; SC_EINVAL when it claims to be one but the
 * version cannot be read (treated as too old: a client must say which
 * release it is). */
int sc_version_from_user_agent(const char *ua, char *component, size_t compsz, sc_version_t *v);
/* Decides whether a server of this version serves the client behind ua.
 * Returns 0 when it does (or ua is not a Starcloud client), SC_ERANGE when
 * the client is too old, with a message for the client in msg, naming
 * both versions and what to do. */
int sc_version_check(const char *ua, char *msg, size_t msgsz);

#endif
