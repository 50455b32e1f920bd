/* Gated start of a pod's processes (see spawn.h). */
#include "agent/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define POLL_MS 100 /* without pidfd_open: how often waitpid is asked */

extern char **environ;

/* ---- the child --------------------------------------------------------- */

/* Only async-signal-safe calls from here to the exec: the agent has other
 * threads, whose locks may be held forever in this copy of it. */
static void child_fail(int errfd, int err)
{
	ssize_t n = write(errfd, &err, sizeof(err));
	(void)n;
	_exit(127);
}

/* fd moved to 3 or above, so that placing stdio cannot overwrite it. */
static int high_fd(int fd, int errfd)
{
	if (fd >= 3)
		return fd;
	int h = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (h < 0)
		child_fail(errfd, errno);
	return h;
}

static void child_stdio(int in, int out, int errfd)
{
	in = high_fd(in, errfd);
	out = high_fd(out, errfd);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		child_fail(errfd, errno);
}

static void child_run(const sc_spawn_opts_t *o, int gate, int errfd, int nullfd)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	/* The agent's handlers and ignored signals (SIGPIPE) are not the
	 * pod's; SIGKILL and SIGSTOP merely refuse. */
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL);
	if (setsid() < 0)
		child_fail(errfd, errno);
	child_stdio(nullfd, o->out_fd >= 0 ? o->out_fd : nullfd, errfd);
	if (o->cwd && chdir(o->cwd) < 0)
		child_fail(errfd, errno);
	if (o->set_ids) {
		/* Fails unless root: then there are none of root's to drop. */
		if (setgroups(0, NULL) < 0 && errno != EPERM)
			child_fail(errfd, errno);
		if (setgid(o->gid) < 0 || setuid(o->uid) < 0)
			child_fail(errfd, errno);
	}
	/* Unblocked before the wait: a guard's SIGTERM ends a waiting child. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	char go = 0;
	ssize_t n;
	while ((n = read(gate, &go, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		_exit(127); /* the agent closed the gate, or died: run nothing */
	/* execvp looks in PATH of environ: the pod's, as it must. */
	environ = o->env;
	execvp(o->argv[0], o->argv);
	child_fail(errfd, errno);
}

/* ---- the agent's side -------------------------------------------------- */

static void close_pair(int p[2])
{
	close(p[0]);
	close(p[1]);
}

int sc__spawn_gated(const sc_spawn_opts_t *o, sc_child_t *c)
{
	int gate[2], err[2];
	c->pid = 0;
	c->gate = c->err = c->pidfd = -1;
	c->h = NULL;
	if (pipe2(gate, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(err, O_CLOEXEC) < 0) {
		int e = errno;
		close_pair(gate);
		return -e;
	}
	int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0) {
		int e = errno;
		close_pair(gate);
		close_pair(err);
		return -e;
	}
	/* Every signal blocked across the fork: the child must not run the
	 * agent's handlers before it has reset them. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = fork();
	if (pid == 0) {
		/* Its own copy of the write end would keep the gate open. */
		close(gate[1]);
		close(err[0]);
		child_run(o, gate[0], err[1], nullfd);
	}
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(gate[0]);
	close(err[1]);
	close(nullfd);
	if (pid < 0) {
		close(gate[1]);
		close(err[0]);
		return -e;
	}
	c->pid = (int)pid;
	c->gate = gate[1];
	c->err = err[0];
	return 0;
}

static void reap(sc_child_t *c)
{
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
	c->pid = 0;
}

int sc__spawn_release(sc_child_t *c)
{
	char go = 1;
	int e = 0;
	/* A child already dead: EPIPE (the agent ignores SIGPIPE, main.c),
	 * then end-of-file below, and its watcher sees the exit. */
	ssize_t n = write(c->gate, &go, 1);
	(void)n;
	close(c->gate);
	c->gate = -1;
	/* Until the exec closes the pipe (O_CLOEXEC), as uv_spawn waits too. */
	while ((n = read(c->err, &e, sizeof(e))) < 0 && errno == EINTR)
		;
	close(c->err);
	c->err = -1;
	if (n == 0)
		return 0;
	reap(c);
	return n == (ssize_t)sizeof(e) && e > 0 ? -e : -EIO;
}

void sc__spawn_cancel(sc_child_t *c)
{
	if (c->gate >= 0)
		close(c->gate);
	if (c->err >= 0)
		close(c->err);
	c->gate = c->err = -1;
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		reap(c);
	}
}

/* ---- watching ---------------------------------------------------------- */

/* The child's exit is seen without reaping it (WNOWAIT): while on_exit
 * runs, its pid, which is also its process group's id, cannot be reused,
 * so on_exit may signal the group safely. Reaped right after. */
static void check_exit(sc_child_t *c)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	int pid = c->pid;
	int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
	if ((r == 0 && si.si_pid == 0) || (r < 0 && errno == EINTR))
		return; /* still running */
	if (c->h == (uv_handle_t *)&c->poll)
		uv_poll_stop(&c->poll);
	else
		uv_timer_stop(&c->timer);
	int status = -1, sig = 0;
	if (r == 0 && si.si_code == CLD_EXITED)
		status = si.si_status;
	else if (r == 0) {
		status = 0;
		sig = si.si_status;
	}
	if (c->on_exit)
		c->on_exit(c, status, sig);
	while (r == 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

static void on_pidfd(uv_poll_t *h, int status, int events)
{
	check_exit(h->data);
}

static void on_timer(uv_timer_t *t)
{
	check_exit(t->data);
}

void sc__child_watch(uv_loop_t *loop, sc_child_t *c)
{
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (c->pidfd >= 0 && uv_poll_init(loop, &c->poll, c->pidfd) == 0) {
		c->poll.data = c;
		c->h = (uv_handle_t *)&c->poll;
		uv_poll_start(&c->poll, UV_READABLE, on_pidfd);
		return;
	}
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->pidfd = -1;
	uv_timer_init(loop, &c->timer);
	c->timer.data = c;
	c->h = (uv_handle_t *)&c->timer;
	uv_timer_start(&c->timer, on_timer, POLL_MS, POLL_MS);
}

static void on_closed(uv_handle_t *h)
{
	sc_child_t *c = h->data;
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->pidfd = -1;
	if (c->on_closed)
		c->on_closed(c);
}

void sc__child_close(sc_child_t *c)
{
	if (!c->h || uv_is_closing(c->h))
		return;
	uv_close(c->h, on_closed);
}
