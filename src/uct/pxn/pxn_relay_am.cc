/*
 * The relay's forwarding of active messages (pxn_relay.h, forward_am()):
 * beside forward_rma() in pxn_relay.cc, sharing its pieces, lanes, routes,
 * fence and completions.
 */
#include "pxn_relay.h"

#include "pxn_cuda.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/am_frame.h>

#include <new>

namespace pxn {
namespace uct {

void Relay::forward_am(Lane &lane, Piece &piece)
{
    (void)lane;
    piece.rkeys            = 0; /* messages name no key */
    piece.has_op           = false;
    piece.ops              = 0;
    piece.sgl_ops          = 0;
    piece.am_next          = 0;
    piece.am_offset        = 0;
    piece.am_waiting       = false;
    piece.am_closed        = false;
    piece.done.comp.status = UCS_OK;
    post_am(piece);
}

void Relay::park(Piece &piece, bool parked)
{
    if (piece.lane->parked != parked) {
        piece.lane->parked = parked;
        parked ? ++parked_ : --parked_;
    }
}

void Relay::post_am(Piece &piece)
{
    const Lane &lane         = *piece.lane;
    const abi::Plan *plans   = piece.snapshot.plans();
    const uint32_t count     = piece.snapshot.header().plan_count;
    const uint8_t *slot      = lane.slots.base + piece.slot_base;
    const uint64_t route_gen = routes_->gen(piece.route);
    uct_ep_h ep              = routes_->am_ep(piece.route);

    piece.has_op = false;
    while ((piece.status == UCS_OK) && (piece.am_next < count)) {
        if (fenced(lane)) {
            piece.status = UCS_ERR_CANCELED;
            abi::bump(counters_->fenced);
            break;
        }
        if (!routes_->usable(piece.route)) {
            piece.status = UCS_ERR_UNREACHABLE; /* its target is gone */
            break;
        }
        const abi::Plan &plan = plans[piece.am_next];
        const uint32_t cookie = am_plan_cookie(plan.remote_addr);
        const uint64_t key    = (uint64_t(piece.route) << 32) | cookie;
        AmFlow *flow;
        try {
            flow = &am_flows_[key];
            if (flow->route_gen != route_gen) {
                /* a new target behind this route id: a new flow */
                am_tokens_.erase(flow->token);
                *flow           = AmFlow();
                flow->route_gen = route_gen;
                flow->token     = am_token_base_ + (++am_next_token_);
                am_tokens_[flow->token] = key;
            }
        } catch (const std::bad_alloc&) {
            piece.status = UCS_ERR_NO_MEMORY;
            break;
        }
        if (flow->granted == kAmGrantGone) {
            /* its target iface closed (the piece's messages are all for
             * it): as a connection that the peer closed. The route, to
             * the target's process, serves its other ifaces on. */
            piece.status    = UCS_ERR_CONNECTION_RESET;
            piece.am_closed = true;
            break;
        }
        ucs_status_t status = UCS_OK;
        if (!flow->hello_sent) {
            uint8_t hello[sizeof(AmFrameHeader) + sizeof(AmHello) + 2 +
                          2 * UINT8_MAX];
            const size_t length = write_am_hello(hello, sizeof(hello),
                                                 flow->token, cookie,
                                                 am_token_base_,
                                                 net_->device_address(),
                                                 net_->iface_address());
            status = (length == 0) ? UCS_ERR_EXCEEDS_LIMIT :
                     net_->am_send(ep, hello, length, nullptr, 0);
            flow->hello_sent = (status == UCS_OK);
        }
        const uint64_t cost = am_cost(plan.length);
        if ((status == UCS_OK) && (flow->sent + cost > flow->granted)) {
            /* until the target grants more; counted once per wait, not at
             * every retry of the same one */
            abi::bump(counters_->am_credit_waits, !piece.am_waiting);
            piece.am_waiting = true;
            piece.has_op     = true;
            break;
        }
        if (status == UCS_OK) {
            uint8_t header[sizeof(AmFrameHeader)];
            write_am_data_header(header, sizeof(header), flow->token, cookie,
                                 am_plan_id(plan.remote_addr));
            const uint8_t *payload = slot + piece.am_offset;
            if (!am_bounce_.empty() && (plan.length != 0)) {
                /* a GPU arena: the CPU packs the inner message */
                GpuScope scope(slots_gpu_);
                status  = copy_to_host(am_bounce_.data(), payload, plan.length);
                payload = am_bounce_.data();
            }
            /* the fence once more, as close to the send as it gets: a relay
             * stopped since the check above (its sender gave up meanwhile)
             * sends nothing of the lane when it resumes */
            if (status == UCS_OK) {
                status = fenced(lane) ? UCS_ERR_CANCELED :
                         net_->am_send(ep, header, sizeof(header), payload,
                                       plan.length);
            }
            if (status == UCS_ERR_CANCELED) {
                abi::bump(counters_->fenced);
            }
        }
        if (status == UCS_ERR_NO_RESOURCE) {
            piece.has_op = true;
            break;
        }
        if (status != UCS_OK) {
            piece.status = status;
            break;
        }
        flow->sent       += cost;
        piece.am_offset  += plan.length;
        piece.am_waiting  = false;
        ++piece.am_next;
        ++piece.ops;
    }
    park(piece, piece.has_op);
    if (!piece.has_op) {
        finish(piece);
    }
}

void Relay::drop_am_flows(uint32_t route)
{
    for (auto flow = am_flows_.begin(); flow != am_flows_.end();) {
        if ((flow->first >> 32) == route) {
            am_tokens_.erase(flow->second.token);
            flow = am_flows_.erase(flow);
        } else {
            ++flow;
        }
    }
}

void Relay::end_am_flows(uint32_t route, uct_ep_h ep, bool failed)
{
    const uint64_t gen = routes_->gen(route);
    for (const auto &entry : am_flows_) {
        const AmFlow &flow = entry.second;
        if (((entry.first >> 32) != route) || (ep == nullptr) || failed ||
            !flow.hello_sent || (flow.route_gen != gen) ||
            (flow.granted == kAmGrantGone)) {
            continue;
        }
        uint8_t bye[sizeof(AmFrameHeader)];
        const size_t length = write_am_bye(bye, sizeof(bye), flow.token,
                                           uint32_t(entry.first));
        const ucs_status_t status = net_->am_send(ep, bye, length, nullptr, 0);
        if (status != UCS_OK) {
            ucs_debug("pxn: relay: no bye for AM flow %lu: %s", flow.token,
                      ucs_status_string(status));
        }
    }
    drop_am_flows(route);
}

void Relay::am_granted(uint64_t source, uint64_t granted)
{
    auto token = am_tokens_.find(source);
    if (token == am_tokens_.end()) {
        return;
    }
    AmFlow &flow = am_flows_[token->second];
    if (granted > flow.granted) {
        flow.granted = granted; /* cumulative: an older grant changes nothing */
    }
}

} // namespace uct
} // namespace pxn
