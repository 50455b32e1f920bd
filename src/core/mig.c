/* MIG: choosing a device and start slice for a profile.
 *
 * With a dynamic layout the scheduler creates instances itself, so the
 * choice matters: a 1g instance at slice 0 of an empty A100 blocks every
 * 4g and 7g instance there. A device's usability is the number of valid
 * free positions of every profile, weighted by size; each candidate
 * (device, start) is scored by how much usability it destroys, and the
 * smallest loss wins. Filling the last hole of a used device destroys
 * less than opening an empty one, so this also packs; ties go to the
 * device already in use, then the lower index. With a fixed layout only the
 * declared instances exist and the first free one of the profile is taken. */
#include <string.h>

#include "core/cluster_int.h"

#define SLICES 8

static const sc_mig_profile_t mig40[] = {
    {"1g.5gb", 1, 1, 0x7f},  {"1g.10gb", 1, 2, 0x55}, {"2g.10gb", 2, 2, 0x15},
    {"3g.20gb", 3, 4, 0x11}, {"4g.20gb", 4, 4, 0x01}, {"7g.40gb", 7, 8, 0x01},
};
static const sc_mig_profile_t mig80[] = {
    {"1g.10gb", 1, 1, 0x7f}, {"1g.20gb", 1, 2, 0x55}, {"2g.20gb", 2, 2, 0x15},
    {"3g.40gb", 3, 4, 0x11}, {"4g.40gb", 4, 4, 0x01}, {"7g.80gb", 7, 8, 0x01},
};
#define NPROF 6

static const sc_mig_profile_t *table(int64_t device_memory)
{
	return device_memory > ((int64_t)48 << 30) ? mig80 : mig40;
}

const sc_mig_profile_t *sc_mig_profile(const char *name, int64_t device_memory)
{
	const sc_mig_profile_t *t = table(device_memory);
	for (int i = 0; name && i < NPROF; i++)
		if (strcmp(t[i].name, name) == 0)
			return &t[i];
	return NULL;
}

static uint8_t span(int start, int size)
{
	return (uint8_t)(((1u << size) - 1) << start);
}

static int usability(const sc_mig_profile_t *t, uint8_t used)
{
	int u = 0;
	for (int i = 0; i < NPROF; i++)
		for (int s = 0; s < SLICES; s++)
			if ((t[i].starts >> s & 1) && s + t[i].size <= SLICES &&
			    !(used & span(s, t[i].size)))
				u += t[i].size;
	return u;
}

/* Places instances i.. of a layout into the free slices of `taken`, by
 * backtracking: a layout like 3g+2g+1g+1g only fits as 2g,1g,1g,3g in slice
 * order, which placing each at its lowest start would miss. */
static bool solve(const sc_mig_profile_t **prof, int n, int i, uint8_t taken, int *start)
{
	if (i == n)
		return true;
	for (int s = 0; s < SLICES; s++) {
		const sc_mig_profile_t *p = prof[i];
		if (!(p->starts >> s & 1) || s + p->size > SLICES || (taken & span(s, p->size)))
			continue;
		start[i] = s;
		if (solve(prof, n, i + 1, taken | span(s, p->size), start))
			return true;
	}
	return false;
}

/* Start slices of the declared instances of device d; 0 when the layout
 * names an unknown profile or cannot be laid out. */
static int fixed_positions(const sc_node_spec_t *ns, int d, const sc_mig_profile_t **prof,
                           int *start, int max)
{
	if (!ns->mig_layout || d >= ns->gpu_count)
		return 0;
	const sc_mig_layout_t *l = &ns->mig_layout[d];
	int n = 0;
	for (size_t i = 0; i < l->nprofiles && n < max; i++) {
		prof[n] = sc_mig_profile(l->profiles[i], ns->gpu_memory);
		if (!prof[n++])
			return 0;
	}
	return solve(prof, n, 0, 0, start) ? n : 0;
}

int sc__mig_choose(const sc_node_view_t *n, const char *profile, int *dev, int *start)
{
	const sc_node_spec_t *ns = n->spec;
	if (ns->mig_mode == SC_MIG_NONE || !n->schedulable)
		return SC_ENOFIT;
	const sc_mig_profile_t *p = sc_mig_profile(profile, ns->gpu_memory);
	if (!p)
		return SC_ENOFIT;
	int best = -1, best_loss = 1 << 30, best_used = -1;
	for (int d = 0; d < n->gpu_count; d++) {
		uint8_t used = n->mig_used[d];
		if (ns->mig_mode == SC_MIG_FIXED) {
			const sc_mig_profile_t *fp[SLICES];
			int fs[SLICES];
			int k = fixed_positions(ns, d, fp, fs, SLICES);
			for (int i = 0; i < k; i++)
				if (fp[i] == p && !(used & span(fs[i], p->size))) {
					*dev = d;
					*start = fs[i];
					return 0;
				}
			continue;
		}
		for (int s = 0; s < SLICES; s++) {
			if (!(p->starts >> s & 1) || s + p->size > SLICES ||
			    (used & span(s, p->size)))
				continue;
			const sc_mig_profile_t *t = table(ns->gpu_memory);
			int loss = usability(t, used) - usability(t, used | span(s, p->size));
			int nused = __builtin_popcount(used);
			if (loss < best_loss || (loss == best_loss && nused > best_used)) {
				best = d * SLICES + s;
				best_loss = loss;
				best_used = nused;
			}
		}
	}
	if (best < 0)
		return SC_ENOFIT;
	*dev = best / SLICES;
	*start = best % SLICES;
	return 0;
}

int64_t sc__mig_milli(const sc_mig_profile_t *p)
{
	return p ? (int64_t)p->compute * SC_GPU_MILLI / 7 : 0;
}
