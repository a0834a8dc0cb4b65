/*
 * A target iface's inbox: the active messages that relays forwarded to it,
 * kept until the iface's progress hands them to its AM handlers, and the
 * credits that bound them.
 *
 * Threads
 * - One producer: the port's progress (the engine thread) calls hello(),
 *   push() and grants(). The source table and the credit ledger are its
 *   alone.
 * - One consumer: the iface's progress (the application thread) calls
 *   drain(). It reads a record only after load-acquiring head_, and gives
 *   the record back by store-releasing tail_ and consumed_ after the
 *   handler returned (the handler reads the message in place).
 *
 * Credits (am_frame.h): a source (one relay's route to this iface) starts
 * with none. grants() gives each source up to `window` bytes of am_cost()
 * on their way, out of room the inbox has: capacity minus what is queued
 * and not yet consumed minus what is granted and not yet received. So
 * whatever the relays do within their credit fits, and push() refuses
 * (counted, nothing stored) what comes beyond it. A source that ends
 * (bye(): its relay's route to this iface went, the relay lives on) gives
 * back what it held; one that goes away without a word (its relay died)
 * keeps it: at most `window` per source, `max_sources` sources (a hello
 * beyond them is refused and counted).
 *
 * Allocation: init() allocates the ring; hello() grows the source table;
 * push(), drain() and grants() do not allocate.
 */
#ifndef PXN_AM_INBOX_H_
#define PXN_AM_INBOX_H_

#include "abi.h"
#include "am_frame.h"

#include <ucs/type/status.h>

#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace pxn {

struct AmInboxCounters {
    uint64_t messages;      /* delivered by drain() */
    uint64_t bytes;         /* their payload */
    uint64_t refused;       /* push() beyond credit or unknown source */
    uint64_t hellos;        /* sources that announced themselves */
    uint64_t hellos_refused;/* beyond max_sources */
    uint64_t grants;        /* grant frames asked for */
    uint64_t byes;          /* sources that ended (bye()) */
};

class AmInbox {
public:
    struct Message {
        uint64_t    source;
        const void *data;
        uint32_t    length;
        uint8_t     am_id;
    };

    /* capacity: credit the inbox gives out in all (bytes of am_cost());
     * max_message: the largest payload it accepts; window: a source's
     * credit at most (>= am_cost(max_message)). UCS_ERR_INVALID_PARAM for
     * inconsistent sizes, UCS_ERR_NO_MEMORY. */
    ucs_status_t init(uint64_t capacity, uint32_t max_message,
                      uint64_t window, uint32_t max_sources);

    /* --- producer ------------------------------------------------------ */
    /* A source announced itself (again: its credit starts over).
     * UCS_ERR_EXCEEDS_LIMIT beyond max_sources. */
    ucs_status_t hello(uint64_t source);
    /* `source` sends nothing more (its bye came after its last message):
     * it is forgotten and the credit it held and did not use is room again.
     * UCS_ERR_NO_ELEM for an unknown source. */
    ucs_status_t bye(uint64_t source);
    /* Stores one message of `source`. UCS_ERR_NO_ELEM for an unknown
     * source, UCS_ERR_EXCEEDS_LIMIT beyond its credit or max_message. */
    ucs_status_t push(uint64_t source, uint8_t am_id, const void *data,
                      uint32_t length);
    /* Gives out what room there is to sources below half their window;
     * calls send(source, granted) (cumulative, am_frame.h) for each grant.
     * Cheap when nothing was consumed and no source is new. */
    template<class Send> void grants(Send &&send);

    /* --- consumer ------------------------------------------------------ */
    /* Hands at most `max` messages to deliver(const Message&), in the order
     * they were pushed; returns how many. */
    template<class Deliver> unsigned drain(unsigned max, Deliver &&deliver);
    bool empty() const
    {
        return abi::load_acquire(head_) == tail_;
    }
    /* Consumer: true once every window/4 bytes drained: time to grant the
     * room again (grants(), under the producer's lock). */
    bool take_wake()
    {
        if (consumed_ - woke_at_ < wake_step_) {
            return false;
        }
        woke_at_ = consumed_;
        return true;
    }

    /* Consumer: a source has announced itself (hello()), so messages may
     * come: a hint, read relaxed. */
    bool announced() const { return abi::load_relaxed(announced_) != 0; }

    /* Producer: grants() would give something (room came back or a source
     * is new). */
    bool grant_pending() const
    {
        return grant_due() || (abi::load_acquire(consumed_) != seen_consumed_);
    }
    /* Producer: grants() has something to give that no drain announces (a
     * new source, a bye's room, room that lacked at the last grants()):
     * the room drains give back is announced by take_wake(). */
    bool grant_due() const { return grant_due_; }

    /* Written by both threads; a snapshot for counters. */
    AmInboxCounters counters() const;

private:
    struct Source {
        uint64_t granted  = 0; /* since its hello */
        uint64_t received = 0;
    };
    struct Record {
        uint32_t length; /* payload; kPad: skip to the ring's start */
        uint8_t  am_id;
        uint8_t  reserved[3];
        uint64_t source;
    };
    static_assert(sizeof(Record) == kAmRecordHeader, "one record header");
    static constexpr uint32_t kPad = UINT32_MAX;

    uint64_t room() const;

    std::vector<uint8_t> ring_;
    uint64_t             capacity_    = 0;
    uint64_t             window_      = 0;
    uint32_t             max_message_ = 0;
    uint32_t             max_sources_ = 0;

    /* producer */
    std::unordered_map<uint64_t, Source> sources_;
    uint64_t head_            = 0; /* ring position, release */
    uint64_t queued_          = 0; /* cost pushed */
    uint64_t outstanding_     = 0; /* granted - received, all sources */
    uint64_t seen_consumed_   = 0;
    bool     grant_due_       = false;
    uint64_t refused_         = 0;
    uint64_t hellos_          = 0;
    uint64_t announced_       = 0; /* 1 from the first hello on, relaxed */
    uint64_t hellos_refused_  = 0;
    uint64_t grants_          = 0;
    uint64_t byes_            = 0;

    /* consumer */
    alignas(64) uint64_t tail_ = 0;     /* ring position, release */
    uint64_t consumed_         = 0;     /* cost drained, release */
    uint64_t woke_at_          = 0;     /* consumed_ at the last take_wake() */
    uint64_t wake_step_        = 0;
    uint64_t messages_         = 0;
    uint64_t bytes_            = 0;
};

template<class Send> void AmInbox::grants(Send &&send)
{
    const uint64_t consumed = abi::load_acquire(consumed_);
    if (!grant_due_ && (consumed == seen_consumed_)) {
        return;
    }
    seen_consumed_ = consumed;
    grant_due_     = false;
    for (auto &entry : sources_) {
        Source &s = entry.second;
        const uint64_t held = s.granted - s.received;
        if (held > window_ / 2) {
            continue;
        }
        const uint64_t give = std::min(window_ - held, room());
        if (give < am_cost(max_message_)) {
            grant_due_ = true; /* again once something is consumed */
            continue;
        }
        s.granted    += give;
        outstanding_ += give;
        ++grants_;
        send(entry.first, s.granted);
    }
}

template<class Deliver> unsigned AmInbox::drain(unsigned max, Deliver &&deliver)
{
    const uint64_t head = abi::load_acquire(head_);
    const uint64_t size = ring_.size();
    unsigned count = 0;
    uint64_t tail = tail_, consumed = consumed_;
    while ((tail != head) && (count < max)) {
        const uint64_t left = size - (tail % size);
        Record record;
        if (left >= sizeof(record)) {
            std::memcpy(&record, &ring_[tail % size], sizeof(record));
        }
        if ((left < sizeof(record)) || (record.length == kPad)) {
            tail += left;
            continue;
        }
        deliver(Message{record.source, &ring_[tail % size] + sizeof(record),
                        record.length, record.am_id});
        tail     += am_cost(record.length);
        consumed += am_cost(record.length);
        abi::store_release(bytes_, bytes_ + record.length);
        abi::store_release(messages_, messages_ + 1);
        ++count;
        /* each message's room goes back at once: a handler that posts
         * (UCP answers wireup in its handler) may wait for it */
        abi::store_release(tail_, tail);
        abi::store_release(consumed_, consumed);
    }
    abi::store_release(tail_, tail);
    return count;
}

} // namespace pxn

#endif
