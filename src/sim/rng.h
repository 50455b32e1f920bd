/* Deterministic pseudo-random numbers for the simulator.
 *
 * The simulator needs reproducible streams (a seed gives the same run on
 * every machine) that are independent per purpose (shuffling pods, picking
 * nodes for the random policy), so each stream is a small value type seeded
 * from the run's seed and a stream number. The generator is xoshiro256**
 * seeded through splitmix64: fast, well tested, and free of the modulo bias
 * that a plain `rand() % n` would add. Exact equality with Go's math/rand is
 * not a goal; statistical agreement with the reference simulator is. */
#ifndef SC_SIM_RNG_H
#define SC_SIM_RNG_H

#include <stdint.h>

typedef struct sc_rng {
	uint64_t s[4];
} sc_rng_t;

/* Seeds a stream; different `stream` values give unrelated sequences. */
void sc_rng_seed(sc_rng_t *r, uint64_t seed, uint64_t stream);
uint64_t sc_rng_next(sc_rng_t *r);
/* Uniform integer in [0, n); n must be > 0. */
uint64_t sc_rng_below(sc_rng_t *r, uint64_t n);
/* Uniform double in [0, 1). */
double sc_rng_double(sc_rng_t *r);

#endif
