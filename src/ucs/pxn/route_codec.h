/*
 * The route exchange of a lane (abi.h RouteRequest/RouteReply), in one
 * place for both sides: the sender posts requests and reads replies, the
 * relay reads requests and posts replies.
 *
 * Contract
 * - post_*() write every field of their block with the abi.h helpers, then
 *   store-release the generation: the other side that load-acquires it
 *   sees the whole message.
 * - read_route_request() copies the request into private memory, reading
 *   each shared field exactly once, and checks it: kind known, every length
 *   within its array, the addresses the kind needs present and those it
 *   does not need absent, reserved fields zero. The relay uses only the
 *   copy. A request that fails the check is answered
 *   UCS_ERR_INVALID_PARAM; nothing a sender writes can make the reader
 *   read outside the block.
 * - read_route_reply() likewise for the sender: a reply whose generation is
 *   not the one waited for is "not yet"; a reply with bad lengths is
 *   UCS_ERR_INVALID_ADDR.
 */
#ifndef PXN_ROUTE_CODEC_H_
#define PXN_ROUTE_CODEC_H_

#include "abi.h"
#include "address.h"

#include <ucs/type/status.h>

#include <cstdint>

namespace pxn {

struct RouteMessage {
    abi::RouteKind kind  = abi::kRouteToIface;
    uint32_t       route = 0; /* kRouteConnectEp, kRouteRelease */
    Bytes          dev;       /* target's inner device address */
    Bytes          iface;     /* kRouteToIface: target's inner iface address */
    Bytes          ep;        /* kRouteConnectEp: target's inner ep address */
};

struct RouteAnswer {
    ucs_status_t status = UCS_OK;
    uint32_t     route  = 0;
    Bytes        relay_dev; /* kRouteCreateEp: the relay's inner addresses */
    Bytes        relay_ep;
};

/* Sender. UCS_ERR_INVALID_PARAM (nothing written) when an address does not
 * fit its array. */
ucs_status_t post_route_request(abi::RouteRequest *request, uint64_t gen,
                                const RouteMessage &message);
/* Sender. false: no reply for `gen` yet. */
bool read_route_reply(const abi::RouteReply *reply, uint64_t gen,
                      RouteAnswer *answer);

/* Relay. The generation of the request currently posted. */
inline uint64_t route_request_gen(const abi::RouteRequest *request)
{
    return abi::load_acquire(request->request_gen);
}
/* Relay: the private copy of the request of generation `gen` (load it with
 * route_request_gen() first). UCS_ERR_INVALID_PARAM: malformed. */
ucs_status_t read_route_request(const abi::RouteRequest *request,
                                RouteMessage *message);
/* Relay. An answer whose addresses do not fit goes out as
 * UCS_ERR_BUFFER_TOO_SMALL without them. */
void post_route_reply(abi::RouteReply *reply, uint64_t gen,
                      const RouteAnswer &answer);

} // namespace pxn

#endif
