/* The metrics every daemon shares (see promtext.h). */
#include "net/promtext.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/parse.h"
#include "base/version.h"

void sc_prom_family(sc_buf_t *b, const char *name, const char *type, const char *help)
{
	sc_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void sc_prom_build_info(sc_buf_t *b, const char *component, const char *extra)
{
	sc_prom_family(b, "starcloud_build_info", "gauge",
	               "Always 1; the labels say which component and release this is.");
	sc_buf_printf(b, "starcloud_build_info{component=\"%s\",version=\"%s\"%s%s} 1\n", component,
	              SC_VERSION, extra && extra[0] ? "," : "", extra ? extra : "");
}

/* Reads a small /proc file whole; the length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	return (ssize_t)n;
}

/* The fields of /proc/self/stat after the command name (which may hold
 * spaces and parentheses, so the scan starts after its last ')'). field is
 * counted as proc(5) does: 3 is the state. */
static int stat_field(const char *stat, int field, uint64_t *out)
{
	const char *p = strrchr(stat, ')');
	if (!p)
		return -1;
	p++;
	for (int f = 3; f <= field; f++) {
		while (*p == ' ')
			p++;
		if (f == field)
			return sc_parse_digits(&p, UINT64_MAX, out) < 0 ? -1 : 0;
		p += strcspn(p, " ");
		if (!*p)
			return -1;
	}
	return -1;
}

/* The machine's boot time (btime of /proc/stat), in Unix seconds. */
static int boot_time(uint64_t *out)
{
	char buf[8192];
	if (read_small("/proc/stat", buf, sizeof(buf)) < 0)
		return -1;
	const char *p = strstr(buf, "\nbtime ");
	if (!p)
		return -1;
	p += 7;
	return sc_parse_digits(&p, UINT64_MAX, out) < 0 ? -1 : 0;
}

static long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	long n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory stream's own descriptor */
}

void sc_prom_process(sc_buf_t *b)
{
	char stat[1024];
	uint64_t ut, st, start, vsize, rss, boot;
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	int have = read_small("/proc/self/stat", stat, sizeof(stat)) > 0 && tick > 0;
	if (have && stat_field(stat, 14, &ut) == 0 && stat_field(stat, 15, &st) == 0) {
		sc_prom_family(b, "process_cpu_seconds_total", "counter",
		               "User and system CPU time spent, in seconds.");
		sc_buf_printf(b, "process_cpu_seconds_total %.2f\n", (double)(ut + st) / tick);
	}
	if (have && stat_field(stat, 23, &vsize) == 0) {
		sc_prom_family(b, "process_virtual_memory_bytes", "gauge",
		               "Virtual memory size in bytes.");
		sc_buf_printf(b, "process_virtual_memory_bytes %llu\n", (unsigned long long)vsize);
	}
	if (have && page > 0 && stat_field(stat, 24, &rss) == 0) {
		sc_prom_family(b, "process_resident_memory_bytes", "gauge",
		               "Resident memory size in bytes.");
		sc_buf_printf(b, "process_resident_memory_bytes %llu\n",
		              (unsigned long long)(rss * (uint64_t)page));
	}
	if (have && stat_field(stat, 22, &start) == 0 && boot_time(&boot) == 0) {
		sc_prom_family(b, "process_start_time_seconds", "gauge",
		               "Start time of the process since the Unix epoch, in seconds.");
		sc_buf_printf(b, "process_start_time_seconds %.2f\n",
		              (double)boot + (double)start / tick);
	}
	long fds = open_fds();
	if (fds >= 0) {
		sc_prom_family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
		sc_buf_printf(b, "process_open_fds %ld\n", fds);
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		sc_prom_family(b, "process_max_fds", "gauge",
		               "Maximum number of open file descriptors.");
		sc_buf_printf(b, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
	}
}
