/* The name of the agent's folder under every cgroup hierarchy (cgroup v2,
 * each v1 controller, devices): starcloud-NODE-HASH, HASH the 8 hex digits
 * of a 32-bit FNV-1a over the node name and the real path of the data
 * folder, each with its NUL. Pod P of job J is in .../starcloud-NODE-HASH/J.P.
 *
 * Why the data folder: a pod's cgroups are emptied whole when it stops,
 * restarts or is fenced by the guard (cgkill.h). Named by node alone, two
 * agents of the same node name on one machine (two clusters' agents, two
 * test runs side by side) shared the cgroups of same-named pods, and each
 * of those killed the other's pod too. The same agent restarted on its
 * data folder gets the same name, so it finds the cgroups of the pods it
 * adopts. The node name is cut so that the name fits in 255 bytes (the
 * hash covers all of it).
 *
 * An agent of the earlier layout named the folder starcloud-NODE. Upgraded
 * in place, the agent keeps that name while a pod recorded in its data
 * folder still runs there (its /proc/PID/cgroup says so: records of that
 * release list no cgroups), and says so at start-up; once none does, the
 * next start takes the new name. */
#ifndef SC_AGENT_CGNAME_H
#define SC_AGENT_CGNAME_H

#include "agent/state.h"

/* Sets a->cgroup_name. After the data folder exists (podsec.h), before
 * the cgroups are set up (podenv.h, devcg.h). */
void sc__cgname_init(sc_agent_t *a);

#endif
