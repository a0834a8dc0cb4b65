/*
 * Life across fork(): which process image a pxn object belongs to.
 *
 * A child of fork() inherits a copy of every pxn object of its parent but
 * none of its threads, and shares with the parent the files, shared
 * memory, sockets and epoll sets those objects refer to. Such an object
 * belongs to the parent: the child must never tear it down (unlink the
 * relay's registry entry, release its lanes, close its inner transport,
 * join its engine thread) nor write through it (post on a lane). An object
 * records the generation it was made in (ForkBorn); in a child, where the
 * generation moved on, inherited() says so, and its owners leak it instead
 * of destroying it. A child that uses pxn afresh makes new objects of its
 * own (its own relay among them).
 *
 * Threads of pxn's own (the engine) must not be inside anything at the
 * instant of fork() (UCX's memory hooks, an allocation, a lock of theirs):
 * the child would find it held forever. ForkGate: such a thread holds the
 * gate while it works and lets go of it between rounds when a fork is
 * pending and before it blocks; fork() (the pthread_atfork prepare
 * handler) waits until every such thread let go, so at most one of its
 * rounds.
 *
 * Contract:
 * - fork_generation() is 0 in a process that never forked from a pxn
 *   process, and grows by one in each child, at fork (a pthread_atfork
 *   child handler, installed by watch_forks(): the first ForkBorn or
 *   Engine). Reading it is one relaxed atomic load: cheap enough for every
 *   operation.
 * - Objects made before the first ForkBorn of the process count as the
 *   parent's: make one before anything whose ownership matters.
 * - Thread-safe.
 */
#ifndef PXN_FORK_H_
#define PXN_FORK_H_

#include <cstdint>

namespace pxn {

uint64_t fork_generation();
/* Installs the fork handlers (once; every call after the first is free). */
void     watch_forks();

class ForkGate {
public:
    /* Takes the gate (shared); waits while a fork is under way. */
    static void enter();
    static void leave();
    /* A fork waits for this thread: leave() and enter() again soon. */
    static bool fork_pending();
};

class ForkBorn {
public:
    ForkBorn();
    /* Made in the parent of this (forked) process. */
    bool inherited() const { return born_ != fork_generation(); }

private:
    uint64_t born_;
};

} // namespace pxn

#endif
