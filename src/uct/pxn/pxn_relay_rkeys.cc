#include "pxn_relay_rkeys.h"

#include <atomic>

namespace pxn {
namespace uct {

void LaneRkeys::release(Entry &entry)
{
    if (entry.valid) {
        net_->rkey_release(&entry.bundle);
        entry.valid = false;
        abi::store_relaxed(counters_->rkeys_held,
                           abi::load_relaxed(counters_->rkeys_held) - 1);
    }
}

uint64_t LaneRkeys::refresh(const LaneBlock &block,
                            const DescriptorSnapshot &snapshot, uint32_t route)
{
    uint64_t valid = 0;
    for (uint32_t i = 0; i < snapshot.plans_loaded(); ++i) {
        const uint32_t index = snapshot.plans()[i].rkey_index;
        if ((index >= abi::kMaxRkeys) || (valid & (1ull << index))) {
            continue;
        }
        abi::RkeyEntry &shared = block.rkey(index);
        Entry &entry           = entries_[index];
        const uint64_t gen     = abi::load_acquire(shared.gen);
        if ((gen != entry.gen) || !entry.valid) {
            if (entry.users != 0) {
                continue;
            }
            release(entry);
            entry.gen             = gen;
            const uint32_t length = abi::load_relaxed(shared.length);
            if ((gen == 0) || (length > abi::kRkeyMax)) {
                continue;
            }
            for (uint32_t b = 0; b < length; ++b) {
                buf_[b] = abi::load_relaxed(shared.packed[b]);
            }
            std::atomic_thread_fence(std::memory_order_acquire);
            if (abi::load_relaxed(shared.gen) != gen) {
                continue; /* rewritten while copied */
            }
            entry.valid = (net_->rkey_unpack(buf_, length, &entry.bundle) == UCS_OK);
            abi::bump(counters_->rkeys_held, entry.valid);
        }
        if (entry.valid) {
            entry.route = route;
            valid      |= 1ull << index;
        }
    }
    return valid;
}

void LaneRkeys::hold(uint64_t bits)
{
    for (; bits != 0; bits &= bits - 1) {
        ++entries_[__builtin_ctzll(bits)].users;
    }
}

void LaneRkeys::drop(uint64_t bits)
{
    for (; bits != 0; bits &= bits - 1) {
        --entries_[__builtin_ctzll(bits)].users;
    }
}

void LaneRkeys::release_route(uint32_t route)
{
    for (Entry &entry : entries_) {
        if (entry.valid && (entry.users == 0) && (entry.route == route)) {
            release(entry);
            entry.gen = 0; /* unpacked again if asked for */
        }
    }
}

void LaneRkeys::clear()
{
    for (Entry &entry : entries_) {
        release(entry);
        entry = Entry();
    }
}

} // namespace uct
} // namespace pxn
