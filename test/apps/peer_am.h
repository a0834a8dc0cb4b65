/*
 * ucx_pxn_peer's active-message commands: a sender that sends numbered,
 * patterned messages and a receiver that checks every one it is handed.
 *
 *   am listen                     -> ok
 *         a handler on every AM id (0-31) of the iface, which checks what
 *         it is given: the first 8 bytes are the message's number (0, 1, ...
 *         per id), the rest a pattern of that number (am_short's 8-byte
 *         header is the number itself)
 *   am send <short|iov|bcopy> <id> <count> <bytes>
 *                                 -> done <status> <ns> <sent>
 *         <count> messages of <bytes> (>= 8) on handler <id> (iov:
 *         am_short_iov of two elements), each posted
 *         again after progress while UCS_ERR_NO_RESOURCE (at most 10 s in
 *         all), then a flush
 *   am stats                      -> am <received> <bad> <out of order>
 *                                    <bytes>
 *   am caps                       -> am <flags: 1 short, 2 bcopy> <max short>
 *                                    <max bcopy>
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
