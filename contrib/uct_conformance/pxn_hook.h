/*
 * ucx-pxn: appended by contrib/uct_conformance.sh to the end of a *copy* of
 * UCX's test/gtest/uct/uct_test.h (never to UCX's own tree). Not UCX code.
 *
 * 1. Instantiates UCX's UCT test cases for the `pxn` transport as well:
 *    UCT_TEST_TLS already holds the 21 names UCS_PP_FOREACH can take, so
 *    pxn is added as one more INSTANTIATE_TEST_SUITE_P after the list (the
 *    NO_SELF and NO_GPU lists too).
 * 2. Declares the second-rail hook (pxn_hook.cc, appended to uct_test.cc).
 */
#ifndef PXN_CONFORMANCE_HOOK_H
#define PXN_CONFORMANCE_HOOK_H

#undef UCT_INSTANTIATE_TEST_CASE
#define UCT_INSTANTIATE_TEST_CASE(_test_case) \
    UCS_PP_FOREACH(_UCT_INSTANTIATE_TEST_CASE, _test_case, UCT_TEST_TLS) \
    _UCT_INSTANTIATE_TEST_CASE(_test_case, pxn)

#undef UCT_INSTANTIATE_NO_SELF_TEST_CASE
#define UCT_INSTANTIATE_NO_SELF_TEST_CASE(_test_case) \
    UCS_PP_FOREACH(_UCT_INSTANTIATE_TEST_CASE, _test_case, UCT_TEST_NO_SELF_TLS) \
    _UCT_INSTANTIATE_TEST_CASE(_test_case, pxn)

#undef UCT_INSTANTIATE_NO_GPU_TEST_CASE
#define UCT_INSTANTIATE_NO_GPU_TEST_CASE(_test_case) \
    UCS_PP_FOREACH(_UCT_INSTANTIATE_TEST_CASE, _test_case, \
                   UCT_TEST_NO_GPU_MEM_TYPE_TLS) \
    _UCT_INSTANTIATE_TEST_CASE(_test_case, pxn)

namespace pxn_conformance {

/* The md configuration a device entity opens its md with (uct_test.cc's
 * entity constructor calls it; pxn_hook.cc). */
uct_md_config_t *md_config(const resource &rsc, uct_md_config_t *dflt);

} // namespace pxn_conformance

#endif
