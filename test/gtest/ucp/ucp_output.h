/*
 * What UCP and UCX's tools print, read by the UCP tests (test_pxn_ucp*.cc):
 * the ep configuration lines of UCX_LOG_LEVEL=info, the protocol tables of
 * UCX_PROTO_INFO=y, in the shape of each UCX version; and what the UCX under
 * test does where versions differ (configure reads it, ucx_info shows it).
 */
#ifndef PXN_TEST_UCP_OUTPUT_H_
#define PXN_TEST_UCP_OUTPUT_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace pxn_test {

/* The last `lines` lines of `text`. */
std::string tail(const std::string &text, size_t lines = 40);

/* The ep configuration lines of a UCX_LOG_LEVEL=info log, e.g.
 * "ep_cfg[0]: rma(pxn/memory) am(tcp/front) ka(tcp/front)" (UCX 1.13) or
 * "perftest inter-node cfg#0 rma(pxn/memory)" (1.14 on). */
std::vector<std::string> ep_cfg_lines(const std::string &log);

/* Whether one of them names a pxn lane. */
bool any_pxn_lane(const std::vector<std::string> &cfgs);
/* Whether every lane they name is pxn's (and there is one). */
bool only_pxn_lanes(const std::vector<std::string> &cfgs);

/* One table of UCX_PROTO_INFO=y (protocols v2): its title lines (the ep
 * configuration, the operation, e.g. "remote memory write by ucp_put* from
 * host memory to host") and the Config cell of each row (the lanes). Both
 * layouts: UCX 1.18 (title "cfg | operation" in one row) and 1.22. */
struct ProtoTable {
    std::string              title;
    std::vector<std::string> configs;
};
std::vector<ProtoTable> proto_tables(const std::string &log);

/* Tables about `operation` ("ucp_put", "ucp_get") of host memory: how many,
 * their rows, the rows that name a pxn lane, and their text. */
struct OpTables {
    size_t      count = 0, rows = 0, pxn_rows = 0;
    std::string text;
};
OpTables op_tables(const std::string &log, const std::string &operation);

/* UCX 1.16 on: protocols v2 are UCP's default (no UCX_PROTO_ENABLE), and
 * UCX_PROTO_INFO=y prints their tables. */
bool new_protocols_by_default();

/* Whether ucp_get on an ep in peer error mode uses an RMA lane (pxn) at
 * all: UCX 1.13's default (legacy) protocols do; of protocols v2, only
 * from UCX 1.19 (configure reads it from the UCX source). UCX 1.18
 * emulates those gets with active messages on the AM lane. */
bool peer_mode_gets_use_rma_lanes();

/* The lines, each followed by a newline. */
std::string joined(const std::vector<std::string> &lines);

/* Is `port` listening in the network namespace of process `pid`? */
bool listening(pid_t pid, int port);

} // namespace pxn_test

#endif
