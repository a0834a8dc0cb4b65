/*
 * ucx_pxn_peer's active-message commands: a sender that sends numbered,
 * patterned messages and a receiver that checks every one it is handed.
 *
 *   am listen                     -> ok
 *         a handler on every AM id (0-31) of the iface, which checks what
 *         it is given: the first 8 bytes are the message's number (0, 1, ...
 *         per id), the rest a pattern of that number (am_short's 8-byte
 *         header is the number itself)
 *   am send <short|iov|bcopy|zcopy|zcopy-cuda> <id> <count> <bytes>
 *           [nopending | pending | flushpending | busy <n>]
 *                                 -> done <status> <ns> <sent> [<dispatches>]
 *         <count> messages of <bytes> (>= 8) on handler <id> (iov:
 *         am_short_iov of two elements; zcopy: am_zcopy of an 8-byte
 *         header and two elements, each done at once (UCS_OK) or with a
 *         completion that must have run with UCS_OK by the end; buffers
 *         kept until then; zcopy-cuda: the payload in GPU memory, one
 *         buffer per message), numbered per id (0, 1, ...
 *         on from where the last "am send" on that id stopped), each posted
 *         again after progress while UCS_ERR_NO_RESOURCE (at most 10 s in
 *         all), then a flush. The status: the first error of a post or
 *         the flush (pending: or of the iface's error handler).
 *         nopending: stops at the first UCS_ERR_NO_RESOURCE, which is then
 *         the status, <sent> the messages posted before it; no flush (the
 *         receiver may not be progressing). busy <n>: as without a mode,
 *         but gives up (status UCS_ERR_NO_RESOURCE, no flush) at the
 *         (n+1)-th UCS_ERR_NO_RESOURCE: n attempts more, with progress
 *         between them.
 *         pending: at each UCS_ERR_NO_RESOURCE, uct_ep_pending_add (posted
 *         again at once on UCS_ERR_BUSY) and progress until the pending
 *         callback runs (it only notes that it ran), then the same message
 *         again; at most 30 s in all; <dispatches>: the callbacks that
 *         ran. flushpending: as pending, with a request ahead of the
 *         message's that calls uct_ep_flush when dispatched and stays
 *         pending while that says UCS_ERR_NO_RESOURCE (UCP's ep flush)
 *   am close [keep]               -> ok
 *         closes the ep and the iface; the process lives on (only
 *         "progress", "am stats" and "quit" make sense after it); keep:
 *         another iface on the same device opened first and kept (as
 *         another worker of the process would: pxn's inner iface stays)
 *   am stats                      -> am <received> <bad> <out of order>
 *                                    <bytes>
 *   am caps                       -> am <flags: 1 short, 2 bcopy, 4 zcopy>
 *                                    <max short> <max bcopy> <max zcopy>
 *                                    <max hdr> <max iov>
 */
#ifndef PXN_TOOLS_PEER_AM_H_
#define PXN_TOOLS_PEER_AM_H_

#include "peer_uct.h"

#include <sstream>
#include <string>

namespace pxn_tools {

/* The reply to "am <args>" (arguments in `in`). */
std::string am_command(Peer &p, std::istringstream &in);

} // namespace pxn_tools

#endif
