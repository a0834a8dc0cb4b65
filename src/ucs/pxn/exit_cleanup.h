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
 * - track_leave(fn, arg): fn(arg) runs at a normal exit, after the entries'
 *   files are gone (Registry: leave its directory, removing it when it was
 *   the last user, RegistryLease::leave). untrack_leave(slot) waits for a
 *   call in progress, so that `arg` may be destroyed once it returned.
 * - Normal exit (exit(), return from main): an atexit handler, installed
 *   at the first track_entry(), unlinks the tracked files and runs the
 *   leave functions.
 * - SIGTERM: at the first track_entry(), if SIGTERM's disposition is the
 *   default (SIG_DFL) a handler is installed that unlinks the tracked files
 *   (unlink(2) only: async-signal-safe) and then lets the default action
 *   end the process (it dies by SIGTERM, as it would without pxn). A
 *   disposition the application chose (a handler, SIG_IGN), before pxn or
 *   after, is never replaced or wrapped: then its own exit path (exit(),
 *   ucp_cleanup) is what removes the files. Leaving a directory takes
 *   locks, so the signal path does not: an empty registry directory (its
 *   .lock and .users) stays until the next pxn process of the group or
 *   `ucx_pxn_info --clean` leaves it.
 * - fork(): only the process that tracked a slot acts on it; a child's
 *   exit or SIGTERM removes none of its parent's files.
 * - Thread-safe; slots are claimed and released with atomics, and the
 *   handlers read them without locks.
 */
#ifndef PXN_EXIT_CLEANUP_H_
#define PXN_EXIT_CLEANUP_H_

#include <cstddef>
#include <string>

namespace pxn {

constexpr int    kMaxTrackedEntries = 64;
constexpr size_t kMaxTrackedPath    = 1024;

int  track_entry(const std::string &dir, const std::string &stem);
void untrack_entry(int slot);

using LeaveFn = void (*)(void *arg);
int  track_leave(LeaveFn fn, void *arg);
void untrack_leave(int slot);

/* Whether the SIGTERM handler is installed (tests). */
bool exit_cleanup_owns_sigterm();

} // namespace pxn

#endif
