/*
 * Allocation failure on demand, for the process this file is linked into:
 * it replaces the global operator new and new[] (plain and aligned; the
 * matching deletes with them) by malloc-based ones that throw
 * std::bad_alloc for the nth allocation of the arming thread after
 * fail_alloc_arm(n). Other threads (the relay's engine thread) never fail.
 *
 * An executable's operator new interposes on every shared library that
 * calls it through the PLT: libpxn_transport.so leaves _Znwm undefined
 * (nm -D), so pxn's allocations inside a UCT call fail as armed
 * (PxnNoMemory tests: "fired" says the armed allocation was reached).
 */
#ifndef PXN_TOOLS_FAIL_ALLOC_H_
#define PXN_TOOLS_FAIL_ALLOC_H_

namespace pxn_tools {

/* The nth allocation of this thread from now (1: the next) throws;
 * 0 disarms. */
void fail_alloc_arm(unsigned long nth);
/* Disarms; whether the armed allocation was reached (and thrown). */
bool fail_alloc_disarm();

} // namespace pxn_tools

#endif
