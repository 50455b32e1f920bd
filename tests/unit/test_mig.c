/* MIG slice choice and accounting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fixture.h"

static sc_decisions_t *run(void)
{
	sc_decisions_t *d = NULL;
	char msg[256];
	if (sc_schedule(&F.snap, &d, msg, sizeof(msg)) < 0)
		fail_msg("sc_schedule: %s", msg);
	return d;
}

static sc_job_spec_t *mig_job(const char *profile)
{
	sc_job_spec_t *j = fx_job("a", 1, 0, 0);
	F.tasks[j - F.jobs].req.mig = profile;
	return j;
}

/* A 3g.20gb goes to slice 4 so that a 4g.20gb can still start at 0. */
static void test_mig_keeps_space_usable(void **state)
{
	fx_reset();
	fx_nodes(1, 1);
	F.nodes[0].gpu_model = "A100-40GB";
	F.nodes[0].gpu_memory = (int64_t)40 << 30;
	F.nodes[0].mig_mode = SC_MIG_DYNAMIC;
	fx_queue("a", NULL, -1, 1, -1);
	mig_job("3g.20gb");
	mig_job("4g.20gb");
	sc_decisions_t *d = run();
	assert_int_equal(d->nbindings, 2);
	assert_string_equal(d->bindings[0].mig_profile, "3g.20gb");
	assert_int_equal(d->bindings[0].mig_start, 4);
	assert_int_equal(d->bindings[1].mig_start, 0);
	sc_decisions_free(d);
}

static void test_mig_full_device(void **state)
{
	fx_reset();
	fx_nodes(1, 1);
	F.nodes[0].gpu_memory = (int64_t)80 << 30;
	F.nodes[0].mig_mode = SC_MIG_DYNAMIC;
	fx_queue("a", NULL, -1, 1, -1);
	mig_job("7g.80gb");
	mig_job("1g.10gb");
	sc_decisions_t *d = run();
	assert_int_equal(d->nbindings, 1);
	assert_int_equal(d->npending, 1);
	assert_non_null(strstr(d->pending[0].reason, "no free MIG slot"));
	sc_decisions_free(d);
}

static void test_mig_not_on_plain_gpus(void **state)
{
	fx_reset();
	fx_nodes(2, 8);
	fx_queue("a", NULL, -1, 1, -1);
	mig_job("1g.10gb");
	sc_decisions_t *d = run();
	assert_int_equal(d->nbindings, 0);
	assert_non_null(strstr(d->pending[0].reason, "2 nodes have no MIG-enabled GPUs"));
	sc_decisions_free(d);
}

static void test_mig_fixed_layout(void **state)
{
	static const char *const layout0[] = {"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"};
	static const sc_mig_layout_t layout[1] = {{layout0, 4}};
	fx_reset();
	fx_nodes(1, 1);
	F.nodes[0].gpu_memory = (int64_t)40 << 30;
	F.nodes[0].mig_mode = SC_MIG_FIXED;
	F.nodes[0].mig_layout = layout;
	fx_queue("a", NULL, -1, 1, -1);
	mig_job("1g.5gb");
	mig_job("1g.5gb");
	mig_job("1g.5gb"); /* only two exist */
	mig_job("2g.10gb");
	sc_decisions_t *d = run();
	assert_int_equal(d->nbindings, 3);
	/* Laid out as 3g@4, 2g@0, 1g@2, 1g@3. */
	assert_int_equal(d->bindings[0].mig_start, 2);
	assert_int_equal(d->bindings[1].mig_start, 3);
	assert_int_equal(d->bindings[2].mig_start, 0);
	sc_decisions_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mig_keeps_space_usable),
	    cmocka_unit_test(test_mig_full_device),
	    cmocka_unit_test(test_mig_not_on_plain_gpus),
	    cmocka_unit_test(test_mig_fixed_layout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
