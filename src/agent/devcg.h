/* A pod sees only its own GPUs' device nodes (docs/SECURITY.md).
 *
 * CUDA_VISIBLE_DEVICES is a request a hostile pod can ignore: GPU nodes
 * are mode 0666, so any local user may open /dev/nvidiaN. Where the host
 * has the cgroup v1 `devices` controller, each pod that must be kept from
 * some GPU node gets a devices cgroup, DEVICES/starcloud-NODE/JOB.POD,
 * whose devices.deny lists every /dev/nvidiaN that is not the pod's (and,
 * for a pod without GPUs, the shared nvidiactl, nvidia-uvm(-tools),
 * nvidia-modeset and nvidia-caps nodes too). Other devices keep their
 * file modes as the only guard (pods are unprivileged users). cgroup v2
 * has no devices files: there the same rules are a BPF program attached to
 * the pod's v2 cgroup (devbpf.h, sc__devcg_v2_attach).
 *
 * The nodes are found by reading --dev-dir (/dev) when a pod starts, so a
 * node that appears later (a driver loaded after the pod started) is not
 * denied to it. A MIG pod is given its parent GPU's node and the
 * nvidia-caps nodes (MIG capabilities are not separated per instance).
 *
 * The pod's process must be in the cgroup before it runs any code, and
 * libuv offers no hook between fork and exec: so the agent moves itself
 * into the pod's cgroup, forks (spawn.h), and moves itself back at once.
 * The child is born inside. Only the devices hierarchy is touched. */
#ifndef SC_AGENT_DEVCG_H
#define SC_AGENT_DEVCG_H

#include <uv.h>

#include "agent/state.h"

/* Finds the devices controller and the agent's own cgroup in it; says at
 * start-up when GPU nodes exist but cannot be isolated. */
void sc__devcg_init(sc_agent_t *a);
/* Before the fork of one of pod p's processes (the pod itself or an exec
 * probe): moves the agent into the pod's devices cgroup, made or updated
 * now. 1 when it did (call sc__devcg_leave right after the fork), 0 when
 * the pod needs none (no GPU node to hide, or no devices controller: then
 * said at start-up), SC_EIO when it needs one and it cannot be made or
 * entered: start nothing, the pod would see every GPU. */
int sc__devcg_enter(sc_pod_t *p);
/* cgroup v2: attaches to the pod's v2 cgroup dir (made, the pod not in it
 * yet) the BPF program denying what devcg_enter would deny on v1
 * (devbpf.h). 0 (also when v2 device programs are not in use: said at
 * start-up), or SC_EIO: start nothing, the pod would see every GPU. */
int sc__devcg_v2_attach(sc_pod_t *p, const char *dir);
/* Moves the agent back to its own cgroup (entered: what enter returned). */
void sc__devcg_leave(sc_agent_t *a, int entered);
/* Removes the pod's cgroup (once its main process is gone), killing what
 * is left in it first (cgkill.h). */
void sc__devcg_remove(sc_pod_t *p);
/* Removes DEVICES/starcloud-NODE when no pod cgroup is left in it. */
void sc__devcg_close(sc_agent_t *a);

#endif
