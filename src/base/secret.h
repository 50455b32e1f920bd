/* Secrets (API tokens) from where argv cannot show them.
 *
 * A token on the command line is readable by every local user in
 * /proc/PID/cmdline, a pod's user included (issue 15). Daemons and the CLI
 * therefore take it, in this order, from --token-file (a file only its
 * owner can read), from --token (still accepted, with a warning; the
 * argument is then blanked in place so /proc shows x's from then on) or
 * from an environment variable (/proc/PID/environ is readable only by
 * the same user and root). */
#ifndef SC_BASE_SECRET_H
#define SC_BASE_SECRET_H

#include <stddef.h>

#define SC_SECRET_MAX 512

/* The token for command cmd ("agent"): token_file if given (its first
 * line; the file must be a regular file owned by this user or root with no
 * group or other permission bits, 0600 or 0400: anything else is refused,
 * since a token others can read is already lost), else flag_token (from
 * argv, or from env_name or a configuration file when the flag table
 * filled it from there), else "". Only a token found in argv warns, and
 * it is overwritten there with 'x' after it is copied. Messages go to
 * stderr prefixed "starcloud CMD: ". 0 or < 0. */
int sc_secret_token(const char *cmd, const char *flag_token, const char *token_file,
                    const char *env_name, int argc, char **argv, char *out, size_t outsz);

/* Another secret from a file, under the same rules as --token-file (its
 * first line; regular, ours or root's, 0600 or 0400, not empty); errors
 * name flag. 0 or SC_EINVAL. */
int sc_secret_file(const char *cmd, const char *flag, const char *path, char *out, size_t outsz);

#endif
