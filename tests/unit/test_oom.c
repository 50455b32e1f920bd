/* Out of memory is an ordinary error: failing the scheduler's scratch
 * allocations one by one must give SC_ENOMEM (never a crash, a leak or a
 * half-made result), and the scheduler must work again afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fixture.h"

static void build(void)
{
	fx_reset();
	fx_nodes(4, 4);
	fx_queue("a", NULL, 4, 1, -1);
	fx_queue("b", NULL, 4, 1, -1);
	for (int i = 0; i < 4; i++)
		fx_running(fx_job("a", 1, 2, 0), 0, i / 2, (i % 2) * 2);
	fx_job("b", 2, 4, 0);
	fx_job("b", 4, 1, 2)->priority_class = "build";
}

static void test_fail_each_block(void **state)
{
	build();
	sc_scheduler_t *sch = sc_scheduler_new();
	assert_non_null(sch);
	sc_decisions_t *ref;
	char msg[256];
	assert_int_equal(sc_scheduler_run(sch, &F.snap, &ref, msg, sizeof(msg)), 0);
	int failures = 0;
	/* The arena keeps its blocks between cycles, so make a fresh one each
	 * time so every block request of a cycle can be failed. */
	for (long n = 1; n < 64; n++) {
		sc_scheduler_free(sch);
		sch = sc_scheduler_new();
		assert_non_null(sch);
		sc_scheduler_fail_after(sch, n);
		sc_decisions_t *d = NULL;
		int rc = sc_scheduler_run(sch, &F.snap, &d, msg, sizeof(msg));
		if (rc == 0) {
			/* The failure point lies past this cycle: same result. */
			assert_int_equal(d->nbindings, ref->nbindings);
			assert_int_equal(d->nevictions, ref->nevictions);
			sc_decisions_free(d);
			break;
		}
		assert_int_equal(rc, SC_ENOMEM);
		assert_null(d);
		failures++;
	}
	assert_true(failures > 0);
	sc_scheduler_fail_after(sch, 0);
	sc_decisions_t *d;
	assert_int_equal(sc_scheduler_run(sch, &F.snap, &d, msg, sizeof(msg)), 0);
	assert_int_equal(d->nbindings, ref->nbindings);
	sc_decisions_free(d);
	sc_decisions_free(ref);
	sc_scheduler_free(sch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fail_each_block),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
