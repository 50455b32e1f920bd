/* Device rules as a cgroup v2 BPF program (see devbpf.h). */
#include "agent/devbpf.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/alloc.h"
#include "starcloud/error.h"

#define RULE_INSNS 5
#define HEAD_INSNS 4
#define TAIL_INSNS 2

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	struct bpf_insn i;
	memset(&i, 0, sizeof(i));
	i.code = code;
	i.dst_reg = dst & 0xf;
	i.src_reg = src & 0xf;
	i.off = off;
	i.imm = imm;
	return i;
}

/* The program for deny[0..n-1] into out (HEAD + n x RULE + TAIL insns). */
static int build(const sc_devrule_t *deny, int n, struct bpf_insn *out)
{
	int k = 0;
	/* struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; } */
	out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0);
	out[k++] = insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff);
	out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_3, BPF_REG_1, 4, 0);
	out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 8, 0);
	for (int i = 0; i < n; i++) {
		int type = deny[i].type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR;
		/* A mismatch jumps past the rest of this rule. */
		out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 4, type);
		out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 3, (int32_t)deny[i].major);
		out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 2, (int32_t)deny[i].minor);
		out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
		out[k++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	}
	out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
	out[k++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	return k;
}

/* A loaded program's fd, or -1 with errno kept. */
static int load(const sc_devrule_t *deny, int n)
{
	struct bpf_insn *prog =
	    sc_xcalloc((size_t)(HEAD_INSNS + n * RULE_INSNS + TAIL_INSNS), sizeof(*prog));
	union bpf_attr attr;
	static const char license[] = "GPL";
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	attr.insn_cnt = (uint32_t)build(deny, n, prog);
	attr.insns = (uint64_t)(uintptr_t)prog;
	attr.license = (uint64_t)(uintptr_t)license;
	int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
	int saved = errno;
	free(prog);
	errno = saved;
	return fd;
}

int sc__devbpf_attach(const char *dir, const sc_devrule_t *deny, int n)
{
	union bpf_attr attr;
	if (n < 0 || n > SC_DEVBPF_MAX)
		return SC_EINVAL;
	int cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		return SC_EIO;
	int prog = load(deny, n), rc = SC_EIO;
	if (prog >= 0) {
		memset(&attr, 0, sizeof(attr));
		attr.target_fd = (uint32_t)cg;
		attr.attach_bpf_fd = (uint32_t)prog;
		attr.attach_type = BPF_CGROUP_DEVICE;
		if (syscall(SYS_bpf, BPF_PROG_ATTACH, &attr, sizeof(attr)) == 0)
			rc = 0;
	}
	int saved = errno;
	if (prog >= 0)
		close(prog); /* the cgroup holds it now */
	close(cg);
	errno = saved;
	return rc;
}

int sc__devbpf_usable(void)
{
	int fd = load(NULL, 0);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}
