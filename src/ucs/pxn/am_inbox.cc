#include "am_inbox.h"

#include <algorithm>
#include <new>

namespace pxn {

ucs_status_t AmInbox::init(uint64_t capacity, uint32_t max_message,
                           uint64_t window, uint32_t max_sources)
{
    const uint64_t largest = am_cost(max_message);
    capacity = (capacity + 7) / 8 * 8;
    if ((max_message == 0) || (max_message >= kPad) || (window < largest) ||
        (capacity < window) || (max_sources == 0)) {
        return UCS_ERR_INVALID_PARAM;
    }
    try {
        /* a record never straddles the end: the one pad a wrap leaves
         * (less than a record) gets room of its own */
        ring_.assign(capacity + largest, 0);
        sources_.reserve(std::min<uint32_t>(max_sources, 64));
    } catch (const std::bad_alloc&) {
        return UCS_ERR_NO_MEMORY;
    }
    capacity_    = capacity;
    window_      = window;
    max_message_ = max_message;
    max_sources_ = max_sources;
    wake_step_   = std::max(window / 4, largest);
    return UCS_OK;
}

uint64_t AmInbox::room() const
{
    const uint64_t used = queued_ - abi::load_acquire(consumed_) + outstanding_;
    return (used >= capacity_) ? 0 : capacity_ - used;
}

ucs_status_t AmInbox::hello(uint64_t source)
{
    auto it = sources_.find(source);
    if (it == sources_.end()) {
        if (sources_.size() >= max_sources_) {
            ++hellos_refused_;
            return UCS_ERR_EXCEEDS_LIMIT;
        }
        try {
            it = sources_.emplace(source, Source{}).first;
        } catch (const std::bad_alloc&) {
            ++hellos_refused_;
            return UCS_ERR_NO_MEMORY;
        }
    } else {
        outstanding_ -= it->second.granted - it->second.received;
        it->second = Source{};
    }
    ++hellos_;
    abi::store_relaxed(announced_, uint64_t(1));
    grant_due_ = true;
    return UCS_OK;
}

ucs_status_t AmInbox::bye(uint64_t source)
{
    auto it = sources_.find(source);
    if (it == sources_.end()) {
        return UCS_ERR_NO_ELEM;
    }
    outstanding_ -= it->second.granted - it->second.received;
    sources_.erase(it);
    ++byes_;
    grant_due_ = true; /* the room may go to another source */
    return UCS_OK;
}

ucs_status_t AmInbox::push(uint64_t source, uint8_t am_id, const void *data,
                           uint32_t length)
{
    auto it = sources_.find(source);
    if (it == sources_.end()) {
        ++refused_;
        return UCS_ERR_NO_ELEM;
    }
    Source &s = it->second;
    const uint64_t cost = am_cost(length);
    if ((length > max_message_) || (cost > s.granted - s.received)) {
        ++refused_;
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    const uint64_t size = ring_.size();
    uint64_t head = head_;
    const uint64_t left = size - (head % size);
    if (left < cost) {
        /* the record starts over at the ring's start; what is left before
         * the end is a pad (implicit when shorter than a record header) */
        if (left >= sizeof(Record)) {
            Record pad{};
            pad.length = kPad;
            std::memcpy(&ring_[head % size], &pad, sizeof(pad));
        }
        head += left;
    }
    /* credit guarantees the room (init()); a relay within its credit can
     * never make this overwrite what the consumer has not read */
    Record record{};
    record.length = length;
    record.am_id  = am_id;
    record.source = source;
    std::memcpy(&ring_[head % size], &record, sizeof(record));
    if (length != 0) {
        std::memcpy(&ring_[head % size] + sizeof(record), data, length);
    }
    s.received   += cost;
    outstanding_ -= cost;
    queued_      += cost;
    abi::store_release(head_, head + cost);
    return UCS_OK;
}

AmInboxCounters AmInbox::counters() const
{
    AmInboxCounters c{};
    c.messages      = abi::load_acquire(messages_);
    c.bytes         = abi::load_acquire(bytes_);
    c.refused       = refused_;
    c.hellos        = hellos_;
    c.hellos_refused = hellos_refused_;
    c.grants        = grants_;
    c.byes          = byes_;
    return c;
}

} // namespace pxn
