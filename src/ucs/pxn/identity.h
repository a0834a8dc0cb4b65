/*
 * Who is who on a node: the node identity, the identity of one process
 * incarnation, and the liveness test that tells a live owner from a dead
 * one (including a pid that the kernel has given to a new process).
 *
 * Contract:
 * - A process incarnation is {pid, start time, epoch}. pid + start time name
 *   one OS process for the whole uptime of the node (the start time is
 *   /proc/<pid>/stat field 22, clock ticks after boot, so a reused pid has a
 *   different one). The epoch is random and names one pxn instance inside
 *   that process (a new Registry entry, a restarted sender): it is never 0.
 * - is_alive() is conservative: when it cannot tell (e.g. /proc is not
 *   readable for a reason other than "no such process"), it says alive, so
 *   that nothing of a live process is ever removed. A zombie is dead: its
 *   memory mappings are gone.
 * - Functions that can fail log once at the point of failure and return a
 *   status; UCS_ERR_NO_ELEM from process_start_time() ("no such process") is
 *   an answer, not an error, and is not logged.
 * - Thread-safe: no state.
 */
#ifndef PXN_IDENTITY_H_
#define PXN_IDENTITY_H_

#include <ucs/type/status.h>

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace pxn {

constexpr const char *kBootIdPath = "/proc/sys/kernel/random/boot_id";

struct ProcessIdentity {
    uint32_t pid        = 0;
    uint64_t start_time = 0; /* /proc/<pid>/stat field 22 */
    uint64_t epoch      = 0; /* random, != 0 */

    /* Same OS process (the epoch may differ). */
    bool same_process(const ProcessIdentity &o) const
    {
        return (pid == o.pid) && (start_time == o.start_time);
    }
    bool operator==(const ProcessIdentity &o) const
    {
        return same_process(o) && (epoch == o.epoch);
    }
    bool operator!=(const ProcessIdentity &o) const { return !(*this == o); }
};

/* The node this process runs on: `override_id` when not empty (the value of
 * UCX_PXN_NODE_ID, validated by pxn::validate), else the kernel boot id read
 * from `boot_id_path`. */
ucs_status_t node_identity(const std::string &override_id, std::string *node_id,
                           const char *boot_id_path = kBootIdPath);

/* Parses the text of /proc/<pid>/stat. The comm field (2) may contain spaces
 * and parentheses: fields after it are counted from the LAST ')'. Returns
 * false for text that does not have a state (field 3) and a numeric field
 * 22. */
bool parse_proc_stat(const char *text, size_t length, char *state,
                     uint64_t *start_time);

/* Start time of a process. UCS_ERR_NO_ELEM: no such process, or a zombie.
 * Other errors are logged. */
ucs_status_t process_start_time(pid_t pid, uint64_t *start_time);

/* A random 64-bit value != 0 (getrandom). */
ucs_status_t random_epoch(uint64_t *epoch);

/* The calling process with a fresh random epoch. */
ucs_status_t current_process(ProcessIdentity *identity);

/* Is the process `pid` running and did it start at `start_time`?
 * kill(pid, 0) succeeds or fails with EPERM, it is not a zombie, and its
 * start time matches. pid <= 0 (or > INT_MAX when cast) is never alive. */
bool is_alive(int64_t pid, uint64_t start_time);

} // namespace pxn

#endif
