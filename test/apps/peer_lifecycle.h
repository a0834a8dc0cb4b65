/*
 * ucx_pxn_peer's commands about UCT's rules and a process's life, beyond
 * moving data (ucx_pxn_peer.cc lists every command):
 *
 *   contract                      -> contract <completions inside posting calls>
 *   fork <exit|cleanup|fresh>     -> fork <child pid> <child exit status>
 *         the child exits at once, or first closes what it inherited (as a
 *         child calling ucp_cleanup does), or then also opens the transport
 *         afresh and exits 0 once its own pxn registry entry exists (2: it
 *         does not within 5 s)
 *   put_cancel <raddr> <rkey> <bytes> <chunk>
 *                                 -> canceled <n> ok <n> failed <n> after <status>
 *         zero-copy puts of chunk bytes, then uct_ep_flush(CANCEL); waits
 *         for every completion and the flush, then tries one more put
 *   pending                       -> busy | added
 *         uct_ep_pending_add of a request (purged again when added)
 *   zero                          -> zero <put_short> <put_bcopy> <put_zcopy>
 *                                         <get_bcopy> <get_zcopy>
 *         zero-length operations with UCT_INVALID_RKEY (as UCP posts them)
 *   oversize <raddr> <rkey>       -> oversize <put_short> <get_bcopy> <put_zcopy>
 *         a put_short of max_short + 1 bytes, a get_bcopy of max_bcopy + 1,
 *         a put_zcopy of max_iov + 1 elements (the current buffer must hold
 *         them)
 *   iface_flush <ms>              -> ok | timeout | err <status>
 */
#ifndef PXN_TOOLS_PEER_LIFECYCLE_H_
#define PXN_TOOLS_PEER_LIFECYCLE_H_

#include "peer_uct.h"

#include <sstream>
#include <string>

namespace pxn_tools {

/* The reply to command `cmd` (arguments in `in`), or "" if `cmd` is not
 * one of these. */
std::string lifecycle_command(Peer &p, const std::string &cmd,
                              std::istringstream &in);

} // namespace pxn_tools

#endif
