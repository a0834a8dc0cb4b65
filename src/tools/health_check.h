/*
 * `ucx_pxn_info --check`: is this node's pxn healthy, for a readiness or
 * liveness probe. Healthy means: every expected rail has a relay that is
 * up (relay_is_up()). Judged from a snapshot (info_snapshot.h) only, so it
 * writes nothing and takes no lock.
 *
 * Contract:
 * - relay_is_up(): the entry was read (header checked), its state is READY,
 *   its process is alive (pid and start time) and its heartbeat is at most
 *   timeout_s old. Otherwise *why says which of these failed, in words.
 * - Expected rails come from the caller: a list, or rails_from_sysfs():
 *   every port of every RDMA device under <sysfs_root>/class/infiniband,
 *   "<device>:<port>" mapped by the RailMap (UCX_PXN_RAIL_MAP's format;
 *   a device not in it is its own rail, as pxn names rails). A rail none
 *   of whose ports is ACTIVE is a problem (its NIC is down).
 * - check_rails() gives one line per problem (FAIL <rail>: why, for every
 *   expected rail that is not up), one line per stale entry (STALE: what
 *   it holds in the registry's file system, allocated and apparent) and
 *   per file not read (NOTE), then a summary line; `healthy` is true only
 *   when no FAIL line was written. Stale entries and unreadable files do
 *   not make a node unhealthy by themselves: a rail is judged by its
 *   relays, and a file that is not a valid control file never counts as
 *   one.
 * - Strings from files are shown printable ASCII only (\xNN otherwise).
 */
#ifndef PXN_TOOLS_HEALTH_CHECK_H_
#define PXN_TOOLS_HEALTH_CHECK_H_

#include "info_snapshot.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pxn {
class RailMap;
}

namespace pxn_tools {

bool relay_is_up(const EntrySnapshot &entry, uint64_t now_ns, double timeout_s,
                 std::string *why);

/* The rail an entry's header names ("" when it was not read). */
std::string entry_rail(const EntrySnapshot &entry);

/* Bytes an entry's files take in the registry's file system: allocated
 * (what removing them frees) and apparent (their sizes). */
uint64_t entry_allocated_bytes(const EntrySnapshot &entry);
uint64_t entry_apparent_bytes(const EntrySnapshot &entry);

/* False (with *error) when the tree has no RDMA device. *problems: rails
 * whose NIC has no ACTIVE port. */
bool rails_from_sysfs(const std::string &sysfs_root, const pxn::RailMap &map,
                      std::vector<std::string> *rails,
                      std::vector<std::string> *problems, std::string *error);

struct CheckReport {
    bool                     healthy = false;
    std::vector<std::string> lines;
};

/* `registry` may be unread (it does not exist, ...): every expected rail
 * then fails with its reason. `nic_problems`: from rails_from_sysfs(), one
 * FAIL line each. */
CheckReport check_rails(const RegistrySnapshot &registry,
                        const std::vector<std::string> &expected_rails,
                        const std::vector<std::string> &nic_problems,
                        uint64_t now_ns, double timeout_s);

} // namespace pxn_tools

#endif
