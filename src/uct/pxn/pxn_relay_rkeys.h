/*
 * A relay's cache of the remote keys of one lane, unpacked with its inner
 * transport (pxn_relay.h): an entry is unpacked once per (index,
 * generation) of the lane's rkey table and kept for the pieces that use
 * it.
 *
 * Contract
 * - An entry in use by a piece in flight (hold()/drop()) is never
 *   released: a descriptor naming a newer generation of its index is
 *   refused instead (a sender only rewrites keys it no longer uses).
 * - An entry goes (rkey_release with the inner component) when its
 *   generation changes, when the route it was last used with is released
 *   by the lane or fails (its target is gone or unreachable: an inner
 *   transport may hold memory for such a key, e.g. cuda_ipc's mappings),
 *   and with the lane (clear()). A key asked for again is unpacked again.
 * - The relay counter rkeys_held is the number of entries unpacked now,
 *   over all lanes.
 *
 * Threading: the engine thread, with the Net lock held.
 */
#ifndef PXN_UCT_PXN_RELAY_RKEYS_H_
#define PXN_UCT_PXN_RELAY_RKEYS_H_

#include "pxn_net.h"

#include <ucs/pxn/control_file.h>
#include <ucs/pxn/descriptor.h>

#include <cstdint>
#include <vector>

namespace pxn {
namespace uct {

class LaneRkeys {
public:
    /* Copied only while empty (the relay sizes its lanes once). */
    LaneRkeys() = default;
    ~LaneRkeys() { clear(); }

    void init(Net *net, abi::RelayCounters *counters)
    {
        net_      = net;
        counters_ = counters;
    }

    /* Makes the entries of every rkey index `snapshot` uses current (read
     * from the lane's table in `block`), noting `route` as their last
     * route; returns the bitmask of valid ones. */
    uint64_t   refresh(const LaneBlock &block, const DescriptorSnapshot &snapshot,
                       uint32_t route);
    void       hold(uint64_t bits);
    void       drop(uint64_t bits);
    uct_rkey_t rkey(uint32_t index) const { return entries_[index].bundle.rkey; }
    /* Releases the entries not in use whose last route is `route`. */
    void       release_route(uint32_t route);
    /* Releases every entry (their pieces have ended). */
    void       clear();

private:
    struct Entry {
        uint64_t          gen   = 0;
        uct_rkey_bundle_t bundle{};
        bool              valid = false;
        unsigned          users = 0;  /* pieces in flight using it */
        uint32_t          route = 0;  /* last used with */
    };

    void release(Entry &entry);

    Net                 *net_      = nullptr;
    abi::RelayCounters  *counters_ = nullptr;
    Entry                entries_[abi::kMaxRkeys];
    uint8_t              buf_[abi::kRkeyMax];
};

} // namespace uct
} // namespace pxn

#endif
