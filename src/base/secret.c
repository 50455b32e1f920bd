#include "base/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "starcloud/error.h"

static int read_file(const char *path, char *out, size_t outsz, char *err, size_t errsz)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		snprintf(err, errsz, "cannot open %s: %s", path, strerror(errno));
		return SC_EIO;
	}
	int rc = SC_EINVAL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errsz, "%s is not a regular file", path);
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(err, errsz, "%s is readable by others (mode %03o): chmod 600 it", path,
		         (unsigned)(st.st_mode & 0777));
		goto out;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(err, errsz, "%s belongs to another user (uid %u)", path,
		         (unsigned)st.st_uid);
		goto out;
	}
	ssize_t n = read(fd, out, outsz - 1);
	if (n < 0) {
		snprintf(err, errsz, "cannot read %s: %s", path, strerror(errno));
		rc = SC_EIO;
		goto out;
	}
	out[n] = '\0';
	out[strcspn(out, "\r\n")] = '\0';
	if ((size_t)n == outsz - 1 && strlen(out) == (size_t)n) {
		snprintf(err, errsz, "%s: the token is longer than %zu bytes", path, outsz - 2);
		rc = SC_ETOOBIG;
		goto out;
	}
	if (!out[0]) {
		snprintf(err, errsz, "%s is empty", path);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Blanks every argv string equal to the token: the "--token T" and
 * "--token=T" forms alike (for the latter, the part after '='). */
static void blank_argv(const char *tok, int argc, char **argv)
{
	size_t n = strlen(tok);
	for (int i = 1; i < argc && n; i++) {
		char *v = argv[i];
		if (!v)
			continue; /* the flag parser may have moved positionals */
		char *eq = strncmp(v, "--token=", 8) == 0 ? v + 8 : NULL;
		if (eq && strcmp(eq, tok) == 0)
			memset(eq, 'x', n);
		else if (strcmp(v, tok) == 0 && argv[i - 1] && strcmp(argv[i - 1], "--token") == 0)
			memset(v, 'x', n);
	}
}

int sc_secret_file(const char *cmd, const char *flag, const char *path, char *out, size_t outsz)
{
	char err[512];
	out[0] = '\0';
	if (read_file(path, out, outsz, err, sizeof(err)) < 0) {
		fprintf(stderr, "starcloud %s: %s: %s\n", cmd, flag, err);
		out[0] = '\0';
		return SC_EINVAL;
	}
	return 0;
}

int sc_secret_token(const char *cmd, const char *flag_token, const char *token_file,
                    const char *env_name, int argc, char **argv, char *out, size_t outsz)
{
	out[0] = '\0';
	if (token_file)
		return sc_secret_file(cmd, "--token-file", token_file, out, outsz);
	if (!flag_token)
		return 0;
	if (strlen(flag_token) >= outsz) {
		fprintf(stderr, "starcloud %s: --token: longer than %zu bytes\n", cmd, outsz - 1);
		return SC_ETOOBIG;
	}
	snprintf(out, outsz, "%s", flag_token);
	/* Only a token that sits in argv warns (not one from the environment
	 * or a configuration file). */
	int in_argv = 0;
	if (!out[0])
		return 0;              /* empty (an unfilled configuration key): nothing to hide */
	for (int i = 1; i < argc; i++) /* the flag parser may leave NULLs */
		in_argv |= argv[i] && strstr(argv[i], out) != NULL;
	(void)env_name;
	if (in_argv) {
		fprintf(stderr,
		        "starcloud %s: warning: --token on the command line can be read by every "
		        "local user; use --token-file or $%s\n",
		        cmd, env_name ? env_name : "STARCLOUD_TOKEN");
		blank_argv(out, argc, argv);
	}
	return 0;
}
