/*
 * ucx_pxn_peer's commands that make an allocation fail inside one UCT call
 * (fail_alloc.h: the nth operator new of this thread from the arming on;
 * the UCT call is the only code between arming and disarming). "fired":
 * the armed allocation was reached, 1/0; statuses as numbers.
 *
 *   nomem put_zcopy <nth> <raddr> <rkey> <bytes>
 *                                 -> nomem <status> <fired> comp <status|none>
 *         one put_zcopy of the current buffer's first bytes to raddr; comp:
 *         its completion after progressing (until it came, for
 *         UCS_INPROGRESS; else for 100 ms, where none must come)
 *   nomem pending <raddr> <rkey> <max>
 *                                 -> pending <i> <status> added <n> purged <n>
 *                                    again <status>
 *         a 1-byte put_zcopy and a fence (so that pending_add adds), then up
 *         to <max> uct_ep_pending_add, each with its first allocation armed,
 *         until one fails: <i> (0: none did) and its status; every request
 *         added comes back through pending_purge (purged), after one more
 *         pending_add unarmed (again); then waits for the put
 *   nomem iface <nth>             -> nomem <status> <fired> again <status>
 *         a second iface of the same device opened (and closed), then once
 *         more unarmed
 */
#ifndef PXN_TOOLS_PEER_NOMEM_H_
#define PXN_TOOLS_PEER_NOMEM_H_

#include "peer_uct.h"

#include <sstream>
#include <string>

namespace pxn_tools {

/* The reply to "nomem <args>" (arguments in `in`). */
std::string nomem_command(Peer &p, std::istringstream &in);

} // namespace pxn_tools

#endif
