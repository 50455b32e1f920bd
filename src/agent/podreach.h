/* Whether a pod's user can reach what it is about to run (docs/AGENT.md,
 * "Where a pod's program comes from"; docs/SECURITY.md).
 *
 * A pod runs as its own uid (podsec.h). When its program, its working dir
 * or a script named on its command line sits below a folder that uid
 * cannot pass through (a checkout in a `mktemp -d` folder, which is 0700,
 * or under /root), exec fails with EACCES or, worse, an interpreter starts
 * and cannot open its script: the pod crash-loops and its probes never
 * pass, with nothing in its status to say why. This check runs first, in a
 * forked child that has taken the pod's uid and gid and dropped every
 * supplementary group (what libuv's child does before exec), so its
 * answer is the kernel's for that user, never root's. It names the path
 * and the folder that blocks it:
 *
 *   argument 1 /tmp/tmp.X/p/worker.py: /tmp/tmp.X is 0700 owned by root;
 *   the pod runs as uid 200001 gid 200001
 *
 * What is checked, in this order, after the child has entered the
 * working dir as root and then changed user (the order of libuv's child,
 * so relative paths resolve from there as exec resolves them):
 *  - a working dir the task named (workingDir): the pod's user must be
 *    able to enter it by its path. Entered as root, it would let a pod sit
 *    in a folder it cannot reach (another queue's pod folder) and read
 *    what is open to all there. The pod's own folder is not asked: the
 *    agent makes it and warns at start-up when it cannot be reached;
 *  - the command: resolved as execvp resolves it (a name without '/' is
 *    looked up in the pod's PATH, an entry that gives EACCES is skipped
 *    for a later one): blocked only where execvp would fail with EACCES
 *    (a PATH folder closed to the user is named in the message, never
 *    looked into); a name in no PATH folder is "not found in PATH"; a
 *    path with '/' that does not exist is left to the spawn ("no such
 *    file or directory");
 *  - every later argument that is an absolute path the pod's user cannot
 *    resolve because a folder on its way is closed to it: the interpreter
 *    case (python3 SCRIPT) and data files (--checkpoint FILE). Whether it
 *    exists is not asked (the program could neither open nor create it).
 *    A file that the user can reach but not read, and paths inside other
 *    arguments (--x=/p, sh -c "..."), are not checked: the first may be
 *    meant for a child that changes user, the second cannot be told from
 *    text.
 * Nothing is looked at as root (the working dir is only entered): the
 * answer tells the pod nothing it could not find out itself.
 * A pod that means to hand its program a path it cannot reach must pass it
 * some other way (an environment variable, a shell string). */
#ifndef SC_AGENT_PODREACH_H
#define SC_AGENT_PODREACH_H

#include <stddef.h>

#include "agent/podsec.h"

/* Checks as the user sec names (sec->set 0: as this process's own user,
 * whose ids the pod keeps) that argv (NULL-terminated; argv[0] the
 * command), run with the environment env (NULL-terminated NAME=VALUE;
 * its PATH is the one execvp uses) in the folder cwd (cwd_asked: the task
 * named it, and the user must be able to enter it), can be reached.
 * All borrowed. 0 when it can, or when the check itself cannot run (no
 * fork, no answer within 5 s: logged; the spawn then fails or not as it
 * would have). SC_EINVAL with why (whysz bytes, NUL-terminated) saying
 * what blocks which path when it cannot; SC_ENOTFOUND (why set) when the
 * command is in none of the PATH's folders. Blocks the caller for the time a
 * fork and a few stat calls take. */
int sc__podreach_check(const sc_podsec_t *sec, char *const *argv, char *const *env, const char *cwd,
                       int cwd_asked, char *why, size_t whysz);

#endif
