/*
 * What a pxn process removes of its own when it ends without closing pxn
 * (the application exits without ucp_cleanup, or is sent SIGTERM): its
 * registry entries' files, and a registry directory it was the last user
 * of. A process that closes pxn removes them itself (RegistryEntry::close,
 * ~Registry); this is for the ends that skip that.
 *
 * Contract:
 * - track_entry(dir, stem): from now on, an end of this process unlinks
 *   <dir>/<stem>.{arena,wake,ctl,init}. Returns a slot (>= 0) for
 *   untrack_entry(), or -1 when nothing is tracked (the table's
 *   kMaxTrackedEntries slots are in use, or the path is longer than
 *   kMaxTrackedPath): that entry is then left to the next cleanup of its
 *   registry, as a killed process's is. RegistryEntry tracks its stem from
 *   the creation of its control file until close() has removed the files.
 * - track_leave(record): the registry directory of a Registry (a copy of
 *   what leaving it needs, registry_lease.h); an end of this process leaves
 *   it after the entries' files are gone: leave_registry() removes it when
 *   this process was its last user. untrack_leave(slot) when the Registry
 *   leaves by itself.
 * - Normal exit (exit(), return from main) and quick_exit(): an atexit and
 *   an at_quick_exit handler, installed at the first track, unlink the
 *   tracked files and leave the tracked directories. _exit() runs neither.
 * - SIGTERM: at the first track, if SIGTERM's disposition is the default
 *   (SIG_DFL), a handler is installed that does the same with system calls
 *   only (async-signal-safe: unlink, flock, open, getdents64, unlinkat) and
 *   then lets the default action end the process (it dies by SIGTERM, as
 *   it would without pxn). A disposition the application chose (a
 *   handler, SIG_IGN), before pxn or after, is never replaced or wrapped:
 *   then its own exit path (exit(), ucp_cleanup) is what removes them.
 * - fork(): only the process that tracked a slot acts on it; a child's
 *   exit or SIGTERM removes none of its parent's files.
 * - Thread-safe; slots are claimed and released with atomics (seqlocks),
 *   and the handlers read them without locks.
 */
#ifndef PXN_EXIT_CLEANUP_H_
#define PXN_EXIT_CLEANUP_H_

#include "registry_lease.h"

#include <cstddef>
#include <string>

namespace pxn {

constexpr int    kMaxTrackedEntries = 64;
constexpr size_t kMaxTrackedPath    = 1024;

int  track_entry(const std::string &dir, const std::string &stem);
void untrack_entry(int slot);

int  track_leave(const LeaseRecord &record);
void untrack_leave(int slot);

/* Whether the SIGTERM handler is installed (tests). */
bool exit_cleanup_owns_sigterm();

} // namespace pxn

#endif
