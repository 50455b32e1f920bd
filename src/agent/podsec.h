/* Who a pod runs as, and what of the node it can reach (docs/SECURITY.md).
 *
 * A pod never runs as root by default. Each queue seen on this node gets
 * its own uid, --pod-uid-base + n (n in the order queues first appear
 * here, kept in DATA/uids.json so restarts and adoption keep them), and
 * the same number as its gid; a job whose queue allows it may name its
 * uid (spec.runAsUser, checked by the server at apply). Pods of different
 * queues therefore cannot signal, ptrace or read each other's processes
 * and files; pods of one queue share a uid (one tenant).
 *
 * The agent's data dir is laid out so a pod reaches only its own folder:
 *
 *   DATA/            0711 root   (uids.json 0600)
 *   DATA/pods/JOB/   0711 root
 *   DATA/pods/JOB/POD/  0711 root: output.log(.1) 0600 and pod.json 0600,
 *                    written by the agent (a pod cannot swap them for a
 *                    link to something it should not read)
 *   DATA/pods/JOB/POD/work/  0700 the pod's uid: HOME and default cwd
 *
 * An agent not running as root cannot switch users: pods then run as the
 * agent's own user and can read its token and state, and the agent says
 * so at start-up. These functions are separate from pod.c so that a pod
 * supervisor outside the agent (issue 16) can apply the same rules. */
#ifndef SC_AGENT_PODSEC_H
#define SC_AGENT_PODSEC_H

#include <sys/types.h>

#include <jansson.h>

typedef struct sc_agent sc_agent_t;
typedef struct sc_pod sc_pod_t;

/* A pod's identity on the node. */
typedef struct sc_podsec {
	int set; /* uid/gid apply (the agent can switch users) */
	uid_t uid;
	gid_t gid;
} sc_podsec_t;

/* Checks whether users can be switched (root), makes the data dir private
 * and loads the queue -> uid table. Says at start-up what is not enforced.
 * 0, or SC_EIO when the data dir cannot be prepared. */
int sc__podsec_init(sc_agent_t *a);
/* Picks the uid of a pod of a job with spec (borrowed): spec.runAsUser,
 * else its queue's uid on this node. */
void sc__podsec_assign(sc_pod_t *p, json_t *spec);
/* Creates DATA/pods/JOB/POD (root, 0711) and its work/ folder owned by the
 * pod's uid (0700). 0 or SC_EIO. */
int sc__podsec_dirs(sc_pod_t *p);
/* The pod's work folder (HOME, default cwd). */
void sc__podsec_workdir(const sc_pod_t *p, char *out, size_t outsz);
/* Record fields for adoption, and back. */
void sc__podsec_save(const sc_pod_t *p, json_t *rec);
void sc__podsec_load(sc_pod_t *p, json_t *rec);

#endif
