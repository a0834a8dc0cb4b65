/*
 * Active messages through pxn: how a message is written on each hop.
 *
 *   sender --(lane: a piece of op kOpAm)--> relay --(inner AM)--> target port
 *   target port --(inner AM: a grant)--> relay
 *
 * In a lane, an AM piece carries one message per plan (abi::Plan): the
 * plan's bytes in the slot are the message's payload (for am_short the
 * 8-byte header first, as UCT delivers it), its remote_addr names the
 * target iface and the AM id (am_plan_address()), its rkey_index is 0. A
 * message may be empty (am_bcopy of nothing).
 *
 * Between nodes every inner AM of pxn's one inner AM id starts with an
 * AmFrameHeader; what follows depends on its kind:
 *   kAmData:  the message's payload (frame length - header);
 *   kAmHello: an AmHello, then the relay port's inner device and iface
 *             addresses (u8 length, bytes, u8 length, bytes): a route
 *             announces itself and asks for credit;
 *   kAmGrant: an AmGrant: the target's credit for the route `source`;
 *             kAmGrantGone: the target iface closed (its process lives
 *             on), the route's flow ends and what waits for its credit
 *             fails;
 *   kAmBye:   nothing more: the route `source` to the iface `cookie` ends
 *             (its relay lives on), after its last data frame on the same
 *             inner ep; the target takes back the credit it still holds.
 * and, where the inner transport connects ep to ep (UCX_PXN_NET_CONNECT=
 * wired: rc), for the relay's own connection to the target's port, the
 * frames going over the port's to-iface wiring transport (ud, dc; tcp):
 *   kAmWire:    the relay port's inner device address, its new ep's
 *               address and its wiring iface address (u8 length, bytes,
 *               three times): connect an ep of yours to mine and tell me
 *               its address;
 *   kAmWired:   the target's answer: its ep's address (u8 length, bytes);
 *   kAmUnwire:  the relay port's device and wiring iface addresses (as
 *               in its kAmWire): the route ended, the target's ep may go.
 * In these three, `cookie` is the relay's route id + 1 and `source` the
 * route's generation (RouteTable).
 * Fields are in the byte order of the hosts (pxn's nodes share one
 * architecture). A frame is checked whole before anything in it is used
 * (read_am_frame()); a receiver counts and drops what fails.
 *
 * Credits keep the target's inbox bounded (am_inbox.h): a route may have
 * at most granted - sent bytes of am_cost() on their way, grants are
 * cumulative (a later grant replaces an earlier one, so a lost or
 * reordered grant only delays), and the target grants only room it has.
 */
#ifndef PXN_AM_FRAME_H_
#define PXN_AM_FRAME_H_

#include "address.h"

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>

namespace pxn {

/* UCT's AM ids are below UCT_AM_ID_MAX (32 in every UCX pxn builds for). */
constexpr unsigned kAmIdCount = 32;

/* The AM plan's remote_addr: the target iface's cookie and the AM id. */
constexpr uint64_t am_plan_address(uint32_t cookie, uint8_t am_id)
{
    return (uint64_t(cookie) << 8) | am_id;
}
constexpr uint32_t am_plan_cookie(uint64_t address)
{
    return uint32_t(address >> 8);
}
constexpr uint8_t am_plan_id(uint64_t address)
{
    return uint8_t(address & 0xff);
}
/* Whether a plan's remote_addr is one am_plan_address() makes. */
constexpr bool am_plan_address_valid(uint64_t address)
{
    return (address >> 40) == 0 && am_plan_id(address) < kAmIdCount &&
           am_plan_cookie(address) != 0;
}

enum AmFrameKind : uint8_t {
    kAmData  = 1,
    kAmHello = 2,
    kAmGrant = 3,
    kAmBye   = 4,
    kAmWire  = 5,
    kAmWired = 6,
    kAmUnwire = 7
};

struct AmFrameHeader {
    uint8_t  kind;     /* AmFrameKind */
    uint8_t  am_id;    /* kAmData: the UCT AM id; else 0 */
    uint16_t reserved; /* 0 */
    uint32_t cookie;   /* kAmData, kAmHello, kAmBye: the target iface;
                          kAmWire, kAmWired, kAmUnwire: route id + 1;
                          else 0 */
    uint64_t source;   /* the route: its relay's token for it */
};
static_assert(sizeof(AmFrameHeader) == 16, "AmFrameHeader wire layout");

struct AmHello {
    uint64_t relay;    /* the relay's identity (its epoch) */
};

struct AmGrant {
    uint64_t granted;  /* credit granted to `source` since its hello, bytes */
};
/* AmGrant::granted of a flow whose target iface is gone: no later grant
 * can exceed it, so a relay that took it keeps it. */
constexpr uint64_t kAmGrantGone = UINT64_MAX;

/* What a message of `length` payload bytes costs in credit: its place in
 * the target's inbox (am_inbox.h), header included. */
constexpr uint64_t kAmRecordHeader = 16;
constexpr uint64_t am_cost(uint64_t length)
{
    return (kAmRecordHeader + length + 7) / 8 * 8;
}

/* A frame as read_am_frame() accepted it; payload points into the frame. */
struct AmFrame {
    AmFrameHeader  header{};
    const uint8_t *payload        = nullptr; /* kAmData */
    size_t         payload_length = 0;
    AmHello        hello{};                  /* kAmHello */
    Bytes          relay_dev;                /* kAmHello, kAmWire, kAmUnwire */
    Bytes          relay_iface;              /* kAmHello, kAmWire, kAmUnwire */
    Bytes          ep;                       /* kAmWire: the relay's,
                                                kAmWired: the target's */
    AmGrant        grant{};                  /* kAmGrant */
};

/* Checks and reads one inner AM's bytes. UCS_ERR_INVALID_PARAM (nothing
 * of *frame to use) for: a frame shorter than its kind needs, an unknown
 * kind, reserved bits set, an AM id >= kAmIdCount, a cookie of 0 where one
 * is needed (or one where none is), a hello whose addresses overrun the
 * frame or leave bytes after them, a grant of the wrong length, a bye with
 * a body, a wire, wired or unwire frame whose addresses overrun it or leave
 * bytes after them. */
ucs_status_t read_am_frame(const void *data, size_t length, AmFrame *frame);

/* The writers: each returns the frame's length, or 0 when `capacity` is
 * too small. */
size_t write_am_data_header(void *out, size_t capacity, uint64_t source,
                            uint32_t cookie, uint8_t am_id);
size_t write_am_hello(void *out, size_t capacity, uint64_t source,
                      uint32_t cookie, uint64_t relay, const Bytes &relay_dev,
                      const Bytes &relay_iface);
size_t write_am_grant(void *out, size_t capacity, uint64_t source,
                      uint64_t granted);
size_t write_am_bye(void *out, size_t capacity, uint64_t source,
                    uint32_t cookie);
size_t write_am_wire(void *out, size_t capacity, uint64_t source,
                     uint32_t cookie, const Bytes &relay_dev,
                     const Bytes &relay_ep, const Bytes &relay_iface);
size_t write_am_wired(void *out, size_t capacity, uint64_t source,
                      uint32_t cookie, const Bytes &target_ep);
size_t write_am_unwire(void *out, size_t capacity, uint64_t source,
                       uint32_t cookie, const Bytes &relay_dev,
                       const Bytes &relay_iface);

} // namespace pxn

#endif
