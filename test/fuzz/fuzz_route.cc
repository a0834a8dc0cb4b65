/*
 * libFuzzer target: the relay's route table under hostile route requests.
 *
 * Input: a sequence of steps, each a step byte and, for requests, the raw
 * bytes of a RouteRequest as a sender would leave them in its mailbox
 * (448 bytes, zero-padded when short). Steps:
 *   0-3  a request: read_route_request() on the raw bytes, served by the
 *        RouteTable when it passes (the answer is encoded with
 *        post_route_reply() and read back with read_route_reply());
 *   4    release one hold of a route id (from the next byte), held or not;
 *   5    a piece starts on a route id the table handed out;
 *   6    that piece finishes (status from the next byte);
 *   7    a relay round begins: collect() (a finished piece never frees its
 *        route in the completion callback; the next round does).
 * The inner transport is a stub that tracks its eps. Must never crash or
 * hit UB; invariants: ids below the capacity, no more routes than the
 * capacity, a route's ep is live while the table can hand it out, no ep is
 * destroyed twice or while a piece uses it, and every ep is destroyed by
 * the first relay round after nothing holds or uses its route.
 *
 * Built by test/fuzz/run.sh (links libucs for pxn's logging).
 */
#include "fuzz_check.h"

#include <uct/pxn/pxn_relay_routes.h>

#include <ucs/pxn/route_codec.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

namespace {

namespace abi = pxn::abi;

constexpr uint32_t kCapacity = 8;

class StubNet final : public pxn::uct::Net {
public:
    explicit StubNet(ConnectMode mode)
    {
        tl_name_              = "stub";
        mode_                 = mode;
        attr_.device_addr_len = 4;
        attr_.iface_addr_len  = (mode == ConnectMode::kIface) ? 4 : 0;
        attr_.ep_addr_len     = (mode == ConnectMode::kEp) ? 4 : 0;
    }

    pxn::Bytes device_address() const override { return {1, 2, 3, 4}; }
    pxn::Bytes iface_address() const override { return {5, 6, 7, 8}; }
    bool is_reachable(const uint8_t *dev, const uint8_t *) const override
    {
        return dev[0] != 0xee; /* an unreachable target, sometimes */
    }
    ucs_status_t ep_create_to_iface(const uint8_t *dev, const uint8_t *,
                                    uct_ep_h *ep) override
    {
        if (dev[1] == 0xee) {
            return UCS_ERR_NO_MEMORY; /* creation fails, sometimes */
        }
        *ep = new_ep();
        return UCS_OK;
    }
    ucs_status_t ep_create_unconnected(uct_ep_h *ep, pxn::Bytes *addr) override
    {
        *ep   = new_ep();
        *addr = {9, 9, 9, 9};
        return UCS_OK;
    }
    ucs_status_t ep_connect(uct_ep_h ep, const uint8_t *, const uint8_t *) override
    {
        FUZZ_CHECK(live.count(ep) == 1);
        return UCS_OK;
    }
    void ep_destroy(uct_ep_h ep) override
    {
        FUZZ_CHECK(live.erase(ep) == 1);
    }
    ucs_status_t put_zcopy(uct_ep_h, const uct_iov_t *, uint64_t, uct_rkey_t,
                           uct_completion_t *) override
    {
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_status_t get_zcopy(uct_ep_h, const uct_iov_t *, uint64_t, uct_rkey_t,
                           uct_completion_t *) override
    {
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_status_t rkey_unpack(const uint8_t *, size_t, uct_rkey_bundle_t *) override
    {
        return UCS_ERR_UNSUPPORTED;
    }
    void rkey_release(uct_rkey_bundle_t *) override {}
    ucs_status_t mem_reg(void *, size_t, uct_mem_h *) override
    {
        return UCS_ERR_UNSUPPORTED;
    }
    void mem_dereg(uct_mem_h) override {}
    unsigned progress() override { return 0; }

    std::set<uct_ep_h> live;

private:
    uct_ep_h new_ep()
    {
        uct_ep_h ep = reinterpret_cast<uct_ep_h>(uintptr_t(++next_) << 4);
        live.insert(ep);
        return ep;
    }
    uint64_t next_ = 0;
};

struct Reader {
    const uint8_t *p;
    size_t         left;

    bool next(uint8_t *b)
    {
        if (left == 0) {
            return false;
        }
        *b = *p++;
        --left;
        return true;
    }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Reader in{data, size};
    uint8_t mode_byte = 0;
    in.next(&mode_byte);
    StubNet net((mode_byte & 1) ? pxn::uct::Net::ConnectMode::kEp :
                                  pxn::uct::Net::ConnectMode::kIface);
    /* the relay's own address is refused */
    pxn::uct::RouteTable table(&net, kCapacity,
                               [](const pxn::Bytes &dev, const pxn::Bytes &iface) {
                                   return !dev.empty() && (dev[0] == 0x55) &&
                                          (iface.empty() || (iface[0] == 0x55));
                               },
                               1000000000ull /* wiring timeout: unused */);
    std::map<uint32_t, unsigned> holds;  /* what the "lanes" hold */
    std::map<uint32_t, unsigned> pieces; /* pieces in flight per route */

    for (uint8_t step; in.next(&step);) {
        switch (step % 8) {
        case 4: {
            uint8_t id = 0;
            in.next(&id);
            table.release(id % (kCapacity + 2)); /* also ids never handed out */
            if (holds[id % (kCapacity + 2)] > 0) {
                --holds[id % (kCapacity + 2)];
            }
            break;
        }
        case 5: {
            uint8_t id = 0;
            in.next(&id);
            const uint32_t route = id % kCapacity;
            if (holds[route] > 0) { /* only held routes carry pieces */
                table.piece_started(route);
                ++pieces[route];
            }
            break;
        }
        case 6: {
            uint8_t id = 0, st = 0;
            in.next(&id);
            in.next(&st);
            const uint32_t route = id % kCapacity;
            if (pieces[route] > 0) {
                --pieces[route];
                table.piece_finished(route, (st & 1) ? UCS_ERR_ENDPOINT_TIMEOUT :
                                                       UCS_OK);
            }
            break;
        }
        case 7:
            table.collect();
            break;
        default: {
            abi::RouteRequest raw;
            memset(&raw, 0, sizeof(raw));
            const size_t n = std::min(in.left, sizeof(raw));
            memcpy(&raw, in.p, n);
            in.p    += n;
            in.left -= n;
            pxn::RouteMessage message;
            if (pxn::read_route_request(&raw, &message) != UCS_OK) {
                break; /* answered UCS_ERR_INVALID_PARAM by the relay */
            }
            FUZZ_CHECK(message.dev.size() <= abi::kDevAddrMax);
            FUZZ_CHECK(message.iface.size() <= abi::kIfaceAddrMax);
            FUZZ_CHECK(message.ep.size() <= abi::kEpAddrMax);
            if ((message.kind == abi::kRouteRelease) ||
                ((message.kind == abi::kRouteConnectEp) &&
                 (holds[message.route] == 0))) {
                break; /* the relay checks the lane's holds first */
            }
            const pxn::RouteAnswer answer = table.serve(message);
            /* what the sender reads back */
            abi::RouteReply reply;
            memset(&reply, 0, sizeof(reply));
            pxn::post_route_reply(&reply, 7, answer);
            pxn::RouteAnswer read;
            FUZZ_CHECK(pxn::read_route_reply(&reply, 7, &read));
            FUZZ_CHECK((read.status == answer.status) ||
                       (read.status == UCS_ERR_BUFFER_TOO_SMALL));
            if (answer.status != UCS_OK) {
                break;
            }
            FUZZ_CHECK(answer.route < kCapacity);
            if (message.kind != abi::kRouteConnectEp) {
                ++holds[answer.route];
            }
            FUZZ_CHECK(net.live.count(table.ep(answer.route)) == 1);
            break;
        }
        }
        FUZZ_CHECK(table.active() <= kCapacity);
        FUZZ_CHECK(net.live.size() <= kCapacity);
        for (uint32_t id = 0; id < kCapacity; ++id) {
            if (table.usable(id)) {
                FUZZ_CHECK(net.live.count(table.ep(id)) == 1);
            }
        }
    }
    /* everything let go: every ep is destroyed */
    for (auto &p : pieces) {
        while (p.second-- > 0) {
            table.piece_finished(p.first, UCS_OK);
        }
    }
    for (auto &h : holds) {
        while (h.second-- > 0) {
            table.release(h.first);
        }
    }
    table.collect(); /* the next relay round */
    FUZZ_CHECK(table.active() == 0);
    FUZZ_CHECK(net.live.empty());
    return 0;
}
