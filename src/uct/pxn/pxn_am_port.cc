#include "pxn_am_port.h"

#include <ucs/pxn/am_frame.h>

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <iterator>

namespace pxn {
namespace uct {

std::atomic<uint32_t> AmPort::next_cookie_{1};

namespace {

/* A relay port's key: u8 device length | device | iface. */
Bytes relay_key(const Bytes &dev, const Bytes &iface)
{
    Bytes key;
    key.reserve(1 + dev.size() + iface.size());
    key.push_back(uint8_t(dev.size()));
    key.insert(key.end(), dev.begin(), dev.end());
    key.insert(key.end(), iface.begin(), iface.end());
    return key;
}

} // namespace

AmPort::AmPort(Net *net) : net_(net)
{
    /* inside the port's progress or an inner call, the Net lock held (as
     * pump()): may run in a send that pump() makes with mutex_ held, so it
     * takes no lock of its own */
    net_->set_port_ep_failure([this](uct_ep_h ep, ucs_status_t) {
        try {
            failed_.push_back(ep);
        } catch (const std::bad_alloc&) {
            /* the ep stays until the port closes */
        }
    });
}

AmPort::~AmPort()
{
    net_->set_port_ep_failure(nullptr);
    for (auto &entry : wired_) {
        net_->ep_destroy(entry.second.ep);
    }
    for (auto &entry : eps_) {
        net_->ep_destroy(entry.second);
    }
}

uint32_t AmPort::attach(AmInbox *inbox)
{
    uint32_t cookie;
    do {
        cookie = next_cookie_.fetch_add(1, std::memory_order_relaxed);
    } while (cookie == 0);
    std::lock_guard<std::mutex> guard(mutex_);
    sinks_.emplace(cookie, Sink{inbox, {}});
    return cookie;
}

void AmPort::detach(uint32_t cookie)
{
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = sinks_.find(cookie);
    if (it == sinks_.end()) {
        return;
    }
    /* its sources' flows end at their relays (kAmGrantGone): a sender
     * whose messages wait for credit from this iface fails instead of
     * waiting for ever; the next pump() sends it */
    for (const auto &source : it->second.relays) {
        try {
            owed_[source.first] = Owed{kAmGrantGone, source.second};
        } catch (const std::bad_alloc&) {
            owed_.erase(source.first); /* its senders wait: logged once */
            ucs_error("pxn: no memory to end an AM flow of a closed iface");
        }
    }
    sinks_.erase(it);
}

void AmPort::receive(const void *data, size_t length)
{
    AmFrame frame;
    if (read_am_frame(data, length, &frame) != UCS_OK) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const AmFrameHeader &h = frame.header;
    std::lock_guard<std::mutex> guard(mutex_);
    if ((h.kind == kAmWire) || (h.kind == kAmUnwire) || (h.kind == kAmWired)) {
        if (net_->mode() != Net::ConnectMode::kWired) {
            refused_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        /* eps are made and destroyed in pump(), not inside the inner
         * transport's callback */
        try {
            if (h.kind == kAmWired) {
                answers_.push_back({h.cookie - 1, h.source, frame.ep});
            } else {
                (h.kind == kAmWire ? wires_ : unwires_).push_back(
                        {relay_key(frame.relay_dev, frame.relay_iface),
                         frame.ep, h.cookie - 1, h.source});
            }
        } catch (const std::bad_alloc&) {
            refused_.fetch_add(1, std::memory_order_relaxed);
        }
        return;
    }
    if (h.kind == kAmGrant) {
        try {
            granted_.emplace_back(h.source, frame.grant.granted);
        } catch (const std::bad_alloc&) {
            /* a later grant (cumulative) carries this one too */
            refused_.fetch_add(1, std::memory_order_relaxed);
        }
        return;
    }
    auto it = sinks_.find(h.cookie);
    if (it == sinks_.end()) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    Sink &sink = it->second;
    if (h.kind == kAmHello) {
        if (sink.inbox->hello(h.source) != UCS_OK) {
            refused_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        owed_.erase(h.source); /* its credit starts over */
        try {
            sink.relays[h.source] = relay_key(frame.relay_dev,
                                              frame.relay_iface);
        } catch (const std::bad_alloc&) {
            refused_.fetch_add(1, std::memory_order_relaxed);
        }
        return;
    }
    if (h.kind == kAmBye) {
        /* the route ended: its credit is room for the others again */
        if (sink.inbox->bye(h.source) != UCS_OK) {
            refused_.fetch_add(1, std::memory_order_relaxed);
        }
        sink.relays.erase(h.source);
        owed_.erase(h.source);
        return;
    }
    if (sink.inbox->push(h.source, h.am_id, frame.payload,
                         uint32_t(frame.payload_length)) != UCS_OK) {
        refused_.fetch_add(1, std::memory_order_relaxed);
    }
}

bool AmPort::send_to_relay(const Bytes &relay, const void *frame,
                           size_t length)
{
    auto it = eps_.find(relay);
    if (it == eps_.end()) {
        const size_t dev_len = relay[0];
        uct_ep_h ep;
        /* the relay port's addresses as its hello (or wire request) gave
         * them */
        if (net_->ep_create_to_iface(&relay[1], &relay[1 + dev_len], &ep) !=
            UCS_OK) {
            return false;
        }
        it = eps_.emplace(relay, ep).first;
    }
    return net_->am_send(it->second, frame, length, nullptr, 0) == UCS_OK;
}

bool AmPort::send_grant(uint64_t source, const Owed &owed)
{
    uint8_t frame[sizeof(AmFrameHeader) + sizeof(AmGrant)];
    const size_t length = write_am_grant(frame, sizeof(frame), source,
                                         owed.granted);
    return send_to_relay(owed.relay, frame, length);
}

bool AmPort::answer_wire(const Wire &wire, const WiredEp &ep)
{
    uint8_t frame[sizeof(AmFrameHeader) + 1 + UINT8_MAX];
    const size_t length = write_am_wired(frame, sizeof(frame), wire.gen,
                                         wire.id + 1, ep.address);
    return (length != 0) && send_to_relay(wire.relay, frame, length);
}

unsigned AmPort::pump_wiring(const OnWired &wired)
{
    unsigned work = 0;
    for (const Answer &answer : answers_) {
        wired(answer.id, answer.gen, answer.ep);
        ++work;
    }
    answers_.clear();
    const auto drop = [&](std::map<Wire, WiredEp>::iterator it, const char *why) {
        ucs_debug("pxn: port: ep %p of relay route %u (gen %lu) %s",
                  it->second.ep, it->first.id, it->first.gen, why);
        unanswered_ -= !it->second.answered;
        net_->ep_destroy(it->second.ep);
        wired_.erase(it);
        ++work;
    };
    for (const Wire &unwire : unwires_) {
        auto it = wired_.find(unwire);
        if (it != wired_.end()) {
            drop(it, "unwired");
        }
    }
    unwires_.clear();
    if (!failed_.empty()) {
        for (auto it = wired_.begin(); it != wired_.end();) {
            auto next = std::next(it);
            if (std::find(failed_.begin(), failed_.end(), it->second.ep) !=
                failed_.end()) {
                drop(it, "failed");
            }
            it = next;
        }
        failed_.clear();
    }
    for (const Wire &wire : wires_) {
        if (wired_.count(wire) != 0) {
            continue; /* a repeated request: answered as the first */
        }
        const Bytes &key = wire.relay;
        WiredEp ep{nullptr, {}, false};
        if ((key[0] != net_->attr().device_addr_len) ||
            (wire.relay_ep.size() != net_->attr().ep_addr_len) ||
            (net_->ep_create_unconnected(&ep.ep, &ep.address) != UCS_OK)) {
            refused_.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        if (net_->ep_connect(ep.ep, &key[1], wire.relay_ep.data()) != UCS_OK) {
            net_->ep_destroy(ep.ep);
            refused_.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        try {
            wired_.emplace(wire, std::move(ep));
            ++unanswered_;
        } catch (const std::bad_alloc&) {
            net_->ep_destroy(ep.ep); /* its relay's wiring times out */
        }
        ++work;
    }
    wires_.clear();
    for (auto it = wired_.begin(); (unanswered_ != 0) && (it != wired_.end()); ++it) {
        if (!it->second.answered && answer_wire(it->first, it->second)) {
            it->second.answered = true; /* else again at the next pump() */
            --unanswered_;
            ++work;
        }
    }
    return work;
}

bool AmPort::pending()
{
    return inboxes_pending(&AmInbox::grant_pending);
}

bool AmPort::frames_pending()
{
    return inboxes_pending(&AmInbox::grant_due);
}

bool AmPort::inboxes_pending(bool (AmInbox::*grant)() const)
{
    std::lock_guard<std::mutex> guard(mutex_);
    if (!granted_.empty() || !owed_.empty() || !answers_.empty() ||
        !wires_.empty() || !unwires_.empty() || (unanswered_ != 0)) {
        return true;
    }
    for (const auto &entry : sinks_) {
        if ((entry.second.inbox->*grant)()) {
            return true;
        }
    }
    return false;
}

unsigned AmPort::pump(const OnGrant &granted, const OnWired &wired)
{
    std::lock_guard<std::mutex> guard(mutex_);
    unsigned sent = pump_wiring(wired);
    for (const auto &grant : granted_) {
        granted(grant.first, grant.second);
        ++sent;
    }
    granted_.clear();
    return sent + grant_room();
}

unsigned AmPort::give_grants()
{
    std::lock_guard<std::mutex> guard(mutex_);
    return grant_room();
}

unsigned AmPort::grant_room()
{
    for (auto &entry : sinks_) {
        Sink &sink = entry.second;
        sink.inbox->grants([&](uint64_t source, uint64_t granted) {
            auto relay = sink.relays.find(source);
            if (relay != sink.relays.end()) {
                owed_[source] = Owed{granted, relay->second};
            }
        });
    }
    unsigned sent = 0;
    for (auto it = owed_.begin(); it != owed_.end();) {
        if (!send_grant(it->first, it->second)) {
            ++it; /* again in a later round */
            continue;
        }
        it = owed_.erase(it);
        ++sent;
    }
    return sent;
}

} // namespace uct
} // namespace pxn
