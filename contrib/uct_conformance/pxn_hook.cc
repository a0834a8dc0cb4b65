/*
 * ucx-pxn: appended by contrib/uct_conformance.sh to the end of a *copy* of
 * UCX's test/gtest/uct/uct_test.cc (never to UCX's own tree). Not UCX code.
 *
 * The second rail. When PXN_CONFORMANCE_ENV_B is set, an entity of a test
 * opens its pxn md with the settings of PXN_CONFORMANCE_ENV_B
 * ("NAME=VALUE;NAME=VALUE;..."), the others with PXN_CONFORMANCE_ENV_A:
 *   PXN_CONFORMANCE_B=rest (default): every entity after the first of the
 *       test is B (UCX's tests connect the first entity to the others, or
 *       the others to the first: every such pair crosses rails);
 *   PXN_CONFORMANCE_B=odd: entities 1, 3, 5, ... are B.
 * pxn takes its settings from the md configuration given to uct_md_open
 * (UCX parses UCX_PXN_* from the environment in uct_md_config_read), and
 * uct_test reads one configuration per test, so the hook sets the
 * environment and reads a configuration of its own for that entity; the
 * process environment is A again afterwards.
 */
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace pxn_conformance {

/* "A=1;B=2" (or separated by blanks): setenv each */
static void apply_env(const char *list)
{
    std::string all((list != NULL) ? list : "");
    for (size_t i = 0; i < all.size(); ++i) {
        if (all[i] == ';') {
            all[i] = ' ';
        }
    }
    std::istringstream in(all);
    std::string item;
    while (in >> item) {
        const size_t eq = item.find('=');
        if (eq != std::string::npos) {
            setenv(item.substr(0, eq).c_str(), item.substr(eq + 1).c_str(), 1);
        }
    }
}

uct_md_config_t *md_config(const resource &rsc, uct_md_config_t *dflt)
{
    static const ::testing::TestInfo *test = NULL;
    static unsigned count                  = 0;
    static std::vector<uct_md_config_t*> configs;

    const char *env_b = getenv("PXN_CONFORMANCE_ENV_B");
    if ((env_b == NULL) || (rsc.md_name.compare(0, 4, "pxn_") != 0)) {
        return dflt;
    }
    const ::testing::TestInfo *current =
            ::testing::UnitTest::GetInstance()->current_test_info();
    if (current != test) {
        test  = current;
        count = 0;
        for (size_t i = 0; i < configs.size(); ++i) {
            uct_config_release(configs[i]);
        }
        configs.clear();
    }
    const char *policy = getenv("PXN_CONFORMANCE_B");
    const unsigned n   = count++;
    const bool is_b    = ((policy != NULL) && (strcmp(policy, "odd") == 0)) ?
                         ((n % 2) == 1) : (n > 0);
    const char *env_a  = getenv("PXN_CONFORMANCE_ENV_A");
    apply_env(is_b ? env_b : env_a);
    uct_md_config_t *config = NULL;
    ucs_status_t status     = uct_md_config_read(rsc.component, NULL, NULL,
                                                 &config);
    apply_env(env_a);
    if (status != UCS_OK) {
        return dflt;
    }
    configs.push_back(config);
    if (getenv("PXN_CONFORMANCE_VERBOSE") != NULL) {
        UCS_TEST_MESSAGE << "pxn_conformance: entity " << n << " of the test "
                         << "opens " << rsc.md_name << " as "
                         << (is_b ? "B" : "A");
    }
    return config;
}

} // namespace pxn_conformance
