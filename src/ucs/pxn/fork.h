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
 * Contract:
 * - fork_generation() is 0 in a process that never forked from a pxn
 *   process, and grows by one in each child, at fork (a pthread_atfork
 *   child handler, installed by the first ForkBorn). Reading it is one
 *   relaxed atomic load: cheap enough for every operation.
 * - Objects made before the first ForkBorn of the process count as the
 *   parent's: make one before anything whose ownership matters.
 * - Thread-safe.
 */
#ifndef PXN_FORK_H_
#define PXN_FORK_H_

#include <cstdint>

namespace pxn {

uint64_t fork_generation();

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
