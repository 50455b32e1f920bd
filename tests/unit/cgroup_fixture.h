/* Finding the machine's cgroup v2 mount, for the unit tests that work on
 * the real hierarchies (test_cgkill, test_devbpf). Header-only: each test
 * binary is one translation unit. The agent itself only looks at
 * /sys/fs/cgroup; a hybrid v1 host mounts v2 elsewhere (.../unified). */
#ifndef SC_TEST_CGROUP_FIXTURE_H
#define SC_TEST_CGROUP_FIXTURE_H

#include <stdio.h>
#include <string.h>

/* The first cgroup2 mount point into out, 1; or 0 when there is none. */
static inline int v2_mount(char *out, size_t outsz)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], mnt[1024], fstype[64];
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f)) {
		const char *dash = strstr(line, " - ");
		if (dash && sscanf(line, "%*s %*s %*s %*s %1023s", mnt) == 1 &&
		    sscanf(dash + 3, "%63s", fstype) == 1 && strcmp(fstype, "cgroup2") == 0 &&
		    (size_t)snprintf(out, outsz, "%s", mnt) < outsz)
			found = 1;
	}
	if (f)
		fclose(f);
	return found;
}

#endif
