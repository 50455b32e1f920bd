/* xoshiro256** with splitmix64 seeding (public-domain algorithms by
 * Blackman and Vigna, written here from their published description). */
#include "sim/rng.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void sc_rng_seed(sc_rng_t *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

uint64_t sc_rng_next(sc_rng_t *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

/* Lemire's multiply-and-reject: unbiased without a division per call. */
uint64_t sc_rng_below(sc_rng_t *r, uint64_t n)
{
	unsigned __int128 m = (unsigned __int128)sc_rng_next(r) * n;
	uint64_t low = (uint64_t)m;
	if (low < n) {
		uint64_t t = -n % n;
		while (low < t) {
			m = (unsigned __int128)sc_rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

double sc_rng_double(sc_rng_t *r)
{
	return (double)(sc_rng_next(r) >> 11) * 0x1.0p-53;
}
