/* Device rules on cgroup v2 (docs/SECURITY.md): v2 has no devices.deny
 * file; the kernel asks a BPF program of type BPF_PROG_TYPE_CGROUP_DEVICE
 * attached to the cgroup instead. This one is made from the rules a pod
 * needs (devcg.c lists the same nodes for v1): every access (read, write,
 * mknod) to a listed node is refused (EPERM), anything else is allowed, as
 * v1's devices.deny lines on top of "a *:* rwm" do.
 *
 * Raw bpf(2), no libbpf: the program is a straight list of compares,
 *   r2 = type (ctx->access_type & 0xffff), r3 = major, r4 = minor;
 *   per rule: if r2 == T && r3 == MAJ && r4 == MIN: return 0;
 *   return 1;
 * Loading and attaching need CAP_SYS_ADMIN (CAP_BPF and CAP_NET_ADMIN
 * since Linux 5.8 would do). A cgroup holds one such program (attached
 * without BPF_F_ALLOW_MULTI): attaching again, for a pod started again
 * with other GPUs, replaces it; removing the cgroup detaches it. */
#ifndef SC_AGENT_DEVBPF_H
#define SC_AGENT_DEVBPF_H

#define SC_DEVBPF_MAX 256

typedef struct sc_devrule {
	char type; /* 'c' or 'b' */
	unsigned major, minor;
} sc_devrule_t;

/* Attaches to the cgroup v2 folder dir a program refusing deny[0..n-1]
 * (n <= SC_DEVBPF_MAX). 0, or SC_EINVAL (too many rules) or SC_EIO with
 * errno kept (EPERM: no CAP_SYS_ADMIN; dir not a v2 cgroup). */
int sc__devbpf_attach(const char *dir, const sc_devrule_t *deny, int n);
/* 1 when this process may load and attach device programs (a program is
 * loaded and dropped, nothing attached), else 0 with errno kept. */
int sc__devbpf_usable(void);

#endif
