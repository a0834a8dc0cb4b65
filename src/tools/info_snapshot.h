/*
 * Snapshots of pxn registries for ucx_pxn_info, taken without disturbing
 * them: no registry lock, no cleanup, no claim, no write; control files are
 * mapped read-only.
 *
 * Contract:
 * - Nothing is silently skipped: every file of a registry directory but
 *   ".lock" becomes an EntrySnapshot (arena and wake files are attached to
 *   the control file of their stem when it exists), and whatever was not
 *   read carries the reason (`reason`), whatever looks wrong but was read
 *   carries `problems`.
 * - Only directories and files of the effective uid are read. A control
 *   file is mapped only after read_header() and check_header() (control_file.h)
 *   passed against the header's own geometry, that geometry is within the
 *   limits of settings.h, and fstat gave exactly the size it implies. A file
 *   truncated while it is read (SIGBUS) is reported, not fatal; the SIGBUS
 *   handler is installed only around that read, so the reader must be
 *   single-threaded.
 * - Values are snapshots of memory other processes write: each field is
 *   read atomically, the set is not consistent (a lane owner block, a
 *   seqlock, is retried; `owner_torn` if it kept changing).
 * - Liveness words: "alive" (pid runs with the recorded start time),
 *   "dead" (no such pid, or a zombie), "pid reused" (another start time),
 *   "exists" (the pid runs; no start time known to compare), "unknown"
 *   (/proc not readable). "dead" and "pid reused" are stale.
 */
#ifndef PXN_TOOLS_INFO_SNAPSHOT_H_
#define PXN_TOOLS_INFO_SNAPSHOT_H_

#include <ucs/pxn/abi.h>
#include <ucs/pxn/control_file.h>

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

struct LaneSnapshot {
    uint32_t    state = 0, owner_pid = 0;
    uint64_t    owner_start = 0, owner_epoch = 0, lane_epoch = 0, initial_seq = 0;
    bool        owner_torn = false;
    uint64_t    head = 0, doorbell = 0, reaped = 0;
    uint64_t    consumed = 0, completed = 0, acked_epoch = 0;
    uint32_t    routes = 0;                 /* route requests not answered */
    uint32_t    rkeys  = 0;                 /* gen != 0 */
    std::string owner_liveness;             /* claimed lanes only */
};

struct EntrySnapshot {
    std::string    name;
    std::string    kind; /* ctl, init, arena, wake (stray), unexpected */
    bool           parsed = false; /* name is p<pid>-<epoch>.<suffix> */
    pxn::EntryName parsed_name;
    struct stat    st = {};
    bool           stat_ok = false;
    int            stat_errno = 0;
    std::string    reason;   /* not read: why; empty when read */
    std::vector<std::string> problems;
    std::string    liveness; /* of the header's pid, else the name's */
    bool           header_ok = false; /* header checked: the rest is valid */
    pxn::abi::ProcessHeader   header = {};
    uint32_t                  state = 0, sleeping = 0; /* live header fields */
    uint64_t                  heartbeat_ns = 0;
    pxn::abi::ProcessCounters counters = {};
    std::vector<LaneSnapshot> lanes;
    std::vector<std::string>  files; /* "arena", "wake" of the same stem */
    uint64_t                  arena_bytes = 0;     /* its apparent size */
    uint64_t                  arena_allocated = 0; /* blocks it holds */

    bool read() const { return header_ok && reason.empty(); }
};

struct RegistrySnapshot {
    std::string path, group;
    uint64_t    uid = 0;    /* from the directory name */
    std::string reason;     /* not read: why */
    std::vector<std::string>   problems;
    std::vector<EntrySnapshot> entries; /* sorted by file name */
};

/* <base>/ucx-pxn-<euid>-<group>, or with `all` every <base>/ucx-pxn-* (other
 * uids' directories listed with a reason, not read). `message` is set when
 * there is nothing to show (no directory, no entry): why. */
std::vector<RegistrySnapshot> snapshot_registries(const std::string &base,
                                                  bool all,
                                                  const std::string &group,
                                                  std::string *message);

bool is_stale(const std::string &liveness);

/* head - reaped clamped to [0, slots]; *garbage when it needed clamping. */
uint64_t credit_in_use(const LaneSnapshot &lane, uint32_t slots, bool *garbage);

std::string file_type(mode_t mode);

std::string strformat(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Bytes outside printable ASCII as \xNN (strings read from files are
 * never shown raw). */
std::string printable(const std::string &text);

} // namespace pxn_tools

#endif
