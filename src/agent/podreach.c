/* Whether a pod's user can reach its program (see podreach.h).
 *
 * The child below runs between fork and _exit only: it calls no malloc
 * (stack buffers, snprintf of numbers and strings) so that a lock another
 * thread of the agent held at fork time cannot stop it. */
#include "agent/podreach.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "starcloud/error.h"

#define CHECK_ARGS 256 /* as many as a pod's command line holds (pod.c) */
#define ANSWER_MS 5000 /* a hung file system: give up, let the spawn try */
#define WHY_MAX 1024

/* What the child knows while it checks. */
typedef struct reach {
	unsigned uid, gid; /* the user it runs as, for the message */
	char cwd[PATH_MAX];
	char *why;
	size_t whysz;
} reach_t;

static void owner_name(uid_t uid, char *out, size_t outsz)
{
	if (uid == 0)
		snprintf(out, outsz, "root");
	else
		snprintf(out, outsz, "uid %u", (unsigned)uid);
}

/* path, relative to the pod's working dir unless absolute, for messages.
 * A path too long for out is cut (the kernel refuses it anyway:
 * ENAMETOOLONG, which is not a question of reach). */
static void absolute(const reach_t *r, const char *path, char *out, size_t outsz)
{
	int n = path[0] == '/' ? snprintf(out, outsz, "%s", path)
	                       : snprintf(out, outsz, "%s/%s", r->cwd, path);
	if (n < 0 || (size_t)n >= outsz)
		out[outsz - 1] = '\0';
}

/* "DIR is 0700 owned by root", from a stat as the pod's user (which can
 * see the folder: its parent was passed). */
static void describe(const reach_t *r, const char *path, char *out, size_t outsz)
{
	struct stat st;
	char owner[32], shown[PATH_MAX];
	absolute(r, path, shown, sizeof(shown));
	if (stat(path, &st) < 0) {
		/* A link whose target lies below a closed folder. */
		snprintf(out, outsz, "%s cannot be passed through (%s)", shown, strerror(errno));
		return;
	}
	owner_name(st.st_uid, owner, sizeof(owner));
	snprintf(out, outsz, "%s is %04o owned by %s", shown, (unsigned)(st.st_mode & 07777),
	         owner);
}

/* The first folder on the way to path (as exec resolves it: a relative
 * one from the working dir the child is in) that this user cannot pass
 * through, described into out. 1 when there is one, 0 when the way is
 * open or ends for another reason (a missing folder is not ours to
 * explain). */
static int blocker(const reach_t *r, const char *path, char *out, size_t outsz)
{
	char pre[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof(pre))
		return 0;
	memcpy(pre, path, n + 1);
	for (size_t i = 1; i < n; i++) {
		if (pre[i] != '/')
			continue;
		pre[i] = '\0';
		struct stat st;
		int ok = access(pre, X_OK) == 0;
		if (!ok && errno == EACCES && (stat(pre, &st) < 0 || S_ISDIR(st.st_mode))) {
			describe(r, pre, out, outsz);
			return 1;
		}
		if (!ok)
			return 0;
		pre[i] = '/';
	}
	return 0;
}

/* The answer for what (a label and the path), blocked: by a folder on its
 * way or, for a command, by its own mode. */
static void blocked(reach_t *r, const char *what, const char *path)
{
	char cause[PATH_MAX + 64], owner[32], shown[PATH_MAX];
	struct stat st;
	if (!blocker(r, path, cause, sizeof(cause))) {
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
			describe(r, path, cause, sizeof(cause)); /* a working dir */
		else if (stat(path, &st) == 0) {
			owner_name(st.st_uid, owner, sizeof(owner));
			snprintf(cause, sizeof(cause), "not executable by it (%04o owned by %s)",
			         (unsigned)(st.st_mode & 07777), owner);
		} else
			snprintf(cause, sizeof(cause), "%s", strerror(EACCES));
	}
	absolute(r, path, shown, sizeof(shown));
	snprintf(r->why, r->whysz, "%s %s: %s; the pod runs as uid %u gid %u", what, shown, cause,
	         r->uid, r->gid);
}

/* The value of name in env, or NULL. */
static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

/* The pod's PATH, as execvp reads it (glibc's default without one). */
static const char *search_path(char *const *env)
{
	const char *search = env_get(env, "PATH");
	return search ? search : "/bin:/usr/bin";
}

/* execvp's search for cmd in the pod's PATH, as this process's user: 1
 * with the file it would run in out; else 0, and denied names the first
 * candidate execvp could not try for EACCES (below a closed folder, or a
 * file it may not run), or is "". */
static int search(const reach_t *r, const char *cmd, char *const *env, char *out, size_t outsz,
                  char *denied, size_t deniedsz)
{
	struct stat st;
	denied[0] = '\0';
	for (const char *e = search_path(env);; e++) {
		const char *end = strchr(e, ':');
		size_t len = end ? (size_t)(end - e) : strlen(e);
		/* An empty entry is the working dir, as for execvp; a relative
		 * entry is taken from it, where the child is. */
		if (snprintf(out, outsz, "%.*s/%s", len ? (int)len : 1, len ? e : ".", cmd) >=
		    (int)outsz)
			out[0] = '\0';
		if (access(out, X_OK) == 0 && stat(out, &st) == 0 && S_ISREG(st.st_mode))
			return 1;
		/* A folder by that name also fails execve with EACCES. */
		if (!denied[0] && (errno == EACCES || access(out, F_OK) == 0))
			snprintf(denied, deniedsz, "%s", out);
		if (!end)
			return 0;
		e = end;
	}
}

/* The command as execvp finds it. 0 when it would run (or, given with a
 * '/', does not exist: the spawn says so); 'B' (why set) where execvp
 * fails with EACCES: a closed folder or the file's mode; 'N' when no PATH
 * folder has it. A PATH folder the user cannot search is named, never
 * looked into (as root: that would tell the pod what it cannot see). */
static int check_command(reach_t *r, const char *cmd, char *const *env)
{
	char cand[PATH_MAX], denied[PATH_MAX], cause[PATH_MAX + 64], shown[PATH_MAX];
	if (strchr(cmd, '/')) {
		if (access(cmd, X_OK) == 0 || errno != EACCES)
			return 0;
		blocked(r, "command", cmd);
		return 'B';
	}
	if (search(r, cmd, env, cand, sizeof(cand), denied, sizeof(denied)))
		return 0; /* the one execvp runs */
	if (!denied[0]) {
		snprintf(r->why, r->whysz, "command %s: not found in PATH %s", cmd,
		         search_path(env));
		return 'N';
	}
	if (!blocker(r, denied, cause, sizeof(cause))) {
		blocked(r, "command", denied); /* there, and not executable */
		return 'B';
	}
	*strrchr(denied, '/') = '\0';
	absolute(r, denied, shown, sizeof(shown));
	snprintf(r->why, r->whysz,
	         "command %s: in none of the PATH folders open to the pod's user; %s is closed to "
	         "it: %s; the pod runs as uid %u gid %u",
	         cmd, shown, cause, r->uid, r->gid);
	return 'B';
}

/* Absolute arguments below a folder the pod's user cannot pass through.
 * Whether they exist is not asked (as root it would tell the pod what it
 * cannot see; as the pod there is no telling): the program could neither
 * open nor create them. */
static int check_args(reach_t *r, char *const *argv)
{
	struct stat st;
	for (int i = 1; i < CHECK_ARGS && argv[i]; i++) {
		if (argv[i][0] != '/' || stat(argv[i], &st) == 0 || errno != EACCES)
			continue;
		char what[32];
		snprintf(what, sizeof(what), "argument %d", i);
		blocked(r, what, argv[i]);
		return 'B';
	}
	return 0;
}

/* The working dir the task named (workingDir): 'B' (why set) when the
 * pod's user could not enter it by its path. The spawn enters it as root
 * before it changes user (libuv), which would let a pod sit in a folder it
 * cannot reach, such as another queue's pod folder, and read the files
 * there that are open to all. The pod's own folder is the agent's to
 * make reachable (it warns at start-up when it is not) and is not asked. */
static int check_cwd(reach_t *r, int asked)
{
	if (!asked || access(r->cwd, X_OK) == 0 || errno != EACCES)
		return 0;
	blocked(r, "working dir", r->cwd);
	return 'B';
}

/* In the forked child: take the pod's ids, check, write the answer (empty:
 * reachable) to fd. Never returns. */
static void child(const sc_podsec_t *sec, char *const *argv, char *const *env, const char *cwd,
                  int cwd_asked, int fd)
{
	char why[WHY_MAX] = "";
	reach_t r = {.why = why, .whysz = sizeof(why)};
	r.uid = sec->set ? (unsigned)sec->uid : (unsigned)geteuid();
	r.gid = sec->set ? (unsigned)sec->gid : (unsigned)getegid();
	if (cwd[0] == '/' || !getcwd(r.cwd, sizeof(r.cwd)))
		snprintf(r.cwd, sizeof(r.cwd), "%s", cwd);
	else
		snprintf(r.cwd + strlen(r.cwd), sizeof(r.cwd) - strlen(r.cwd), "/%s", cwd);
	/* What libuv's child does before exec (uv__process_child_init): the
	 * working dir first, as root (where that fails the spawn says so),
	 * then the user. */
	if (chdir(cwd) < 0)
		_exit(0);
	if (sec->set && (setgroups(0, NULL) < 0 || setresgid(sec->gid, sec->gid, sec->gid) < 0 ||
	                 setresuid(sec->uid, sec->uid, sec->uid) < 0))
		_exit(2);
	int kind = check_cwd(&r, cwd_asked);
	if (!kind)
		kind = check_command(&r, argv[0], env);
	if (!kind)
		kind = check_args(&r, argv);
	/* The answer: nothing (reachable), or its kind and why. */
	char out[WHY_MAX + 1];
	size_t n = 0, off = 0;
	if (kind)
		n = (size_t)snprintf(out, sizeof(out), "%c%s", kind, why);
	while (off < n) {
		ssize_t w = write(fd, out + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);
		off += (size_t)w;
	}
	_exit(0);
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads the child's answer until it closes the pipe: its length, or -1
 * when it gave none within ANSWER_MS. */
static ssize_t read_answer(int fd, char *buf, size_t bufsz)
{
	size_t got = 0;
	long long deadline = now_ms() + ANSWER_MS;
	for (;;) {
		long long left = deadline - now_ms();
		if (left <= 0)
			return -1;
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int rc = poll(&pf, 1, (int)left);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return -1;
		ssize_t n = read(fd, buf + got, bufsz - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0 || (got += (size_t)n) == bufsz - 1)
			break;
	}
	buf[got] = '\0';
	return (ssize_t)got;
}

int sc__podreach_check(const sc_podsec_t *sec, char *const *argv, char *const *env, const char *cwd,
                       int cwd_asked, char *why, size_t whysz)
{
	char answer[WHY_MAX];
	int fds[2], st = 0;
	if (whysz)
		why[0] = '\0';
	if (!argv || !argv[0] || pipe2(fds, O_CLOEXEC) < 0)
		return 0;
	pid_t pid = fork();
	int fork_err = errno;
	if (pid == 0) {
		close(fds[0]);
		child(sec, argv, env, cwd, cwd_asked, fds[1]);
	}
	close(fds[1]);
	ssize_t n = pid < 0 ? -1 : read_answer(fds[0], answer, sizeof(answer));
	close(fds[0]);
	if (pid > 0 && n < 0)
		kill(pid, SIGKILL);
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid < 0 || n < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		sc_log_warn("cannot check whether the pod's user can reach %s (%s): starting it "
		            "unchecked",
		            argv[0],
		            pid < 0 ? strerror(fork_err)
		            : n < 0 ? "no answer in 5 s"
		                    : "the check failed");
		return 0;
	}
	if (n == 0)
		return 0;
	snprintf(why, whysz, "%s", answer + 1);
	return answer[0] == 'N' ? SC_ENOTFOUND : SC_EINVAL;
}
