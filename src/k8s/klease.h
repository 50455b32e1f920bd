/* Leader election on a coordination.k8s.io/v1 Lease, client-go's rules,
 * as a pure state machine (the requests are made in kelect.c).
 *
 * Every retry period a replica reads the Lease and decides:
 *   - no Lease: create it, holding it;
 *   - it holds it: renew (renewTime = now);
 *   - nobody holds it (holderIdentity empty: released), or the record has
 *     not changed for leaseDurationSeconds by this replica's own clock
 *     since it first saw it that way: take it (leaseTransitions + 1);
 *   - otherwise wait.
 * Every write carries the resourceVersion it read, so two replicas that
 * race get one success and one 409.
 *
 * Fencing. A replica may write (bind, evict) only until
 *   send time of its last successful renewal + renew_deadline,
 * with renew_deadline < leaseDuration. A rival can only take over
 * leaseDuration after it last saw that renewal change the record, which is
 * after the renewal was sent; so the old leader has stopped writing at
 * least (leaseDuration - renew_deadline) before a new one starts, even if
 * its process was frozen (SIGSTOP, a long GC-like pause) and wakes up later:
 * the check is against the monotonic clock, not against a timer that might
 * fire late. Clocks are compared only as durations, never across hosts. */
#ifndef SC_K8S_KLEASE_H
#define SC_K8S_KLEASE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

typedef struct sc_klease_rec {
	bool exists;
	char holder[256];
	int64_t duration; /* leaseDurationSeconds, 0 when absent */
	char renew[48];   /* renewTime as written (compared, never parsed) */
	char acquire[48];
	int64_t transitions;
	char rv[64]; /* metadata.resourceVersion */
} sc_klease_rec_t;

enum sc_klease_action { SC_KLEASE_WAIT = 0, SC_KLEASE_CREATE, SC_KLEASE_RENEW, SC_KLEASE_TAKE };

typedef struct sc_klease {
	const char *identity;  /* borrowed */
	double duration;       /* seconds, what we write */
	double renew_deadline; /* seconds, < duration */
	bool leading;
	double valid_until; /* monotonic: writes allowed before this */
	bool observed;
	sc_klease_rec_t obs; /* the record as last seen changing */
	double observed_at;  /* monotonic time of that change */
} sc_klease_t;

/* Reads a Lease object; rec->exists is false when obj is not one. */
void sc_klease_parse(json_t *obj, sc_klease_rec_t *rec);
/* Notes what a read showed at time now (monotonic) and returns what to do.
 * Seeing another holder ends our leadership at once. */
int sc_klease_decide(sc_klease_t *l, const sc_klease_rec_t *rec, double now);
/* Our create/renew/take, sent at sent_at, succeeded. */
void sc_klease_won(sc_klease_t *l, double sent_at);
/* It failed with a conflict or was refused: we are not the leader. */
void sc_klease_lost(sc_klease_t *l);
/* May we write at time now? */
bool sc_klease_valid(const sc_klease_t *l, double now);
/* The Lease body for an action (CREATE, RENEW, TAKE) on the record rec
 * (NULL for CREATE); release = give it up (holder ""). now: MicroTime. */
json_t *sc_klease_body(const sc_klease_t *l, const sc_klease_rec_t *rec, int action, const char *ns,
                       const char *name, const char *now, bool release);

#endif
