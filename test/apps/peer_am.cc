#include "peer_am.h"

#include <chrono>
#include <cstring>
#include <vector>

namespace pxn_tools {

namespace {

struct Received {
    uint64_t messages     = 0;
    uint64_t bad          = 0;
    uint64_t out_of_order = 0;
    uint64_t bytes        = 0;
    uint64_t next[UCT_AM_ID_MAX] = {};
};
Received g_received;

uint8_t pattern(uint64_t number, size_t i)
{
    return uint8_t(number * 131 + i * 7 + 1);
}

void fill(uint8_t *dest, uint64_t number, size_t bytes)
{
    std::memcpy(dest, &number, sizeof(number));
    for (size_t i = sizeof(number); i < bytes; ++i) {
        dest[i] = pattern(number, i);
    }
}

ucs_status_t handler(void *arg, void *data, size_t length, unsigned)
{
    const auto id = uint8_t(reinterpret_cast<uintptr_t>(arg));
    Received &r   = g_received;
    const auto *bytes = static_cast<const uint8_t*>(data);
    ++r.messages;
    r.bytes += length;
    uint64_t number = UINT64_MAX;
    if (length >= sizeof(number)) {
        std::memcpy(&number, bytes, sizeof(number));
    }
    bool good = (length >= sizeof(number));
    for (size_t i = sizeof(number); good && (i < length); ++i) {
        good = (bytes[i] == pattern(number, i));
    }
    r.bad += !good;
    r.out_of_order += good && (number != r.next[id]);
    if (good) {
        r.next[id] = number + 1;
    }
    return UCS_OK;
}

struct Pack {
    uint64_t number;
    size_t   bytes;
};

size_t pack(void *dest, void *arg)
{
    const auto *p = static_cast<const Pack*>(arg);
    fill(static_cast<uint8_t*>(dest), p->number, p->bytes);
    return p->bytes;
}

std::string send(Peer &p, const std::string &kind, unsigned id, uint64_t count,
                 size_t bytes)
{
    if ((p.ep == nullptr) || (bytes < sizeof(uint64_t)) ||
        ((kind != "short") && (kind != "iov") && (kind != "bcopy"))) {
        return "err " + std::to_string(int(UCS_ERR_INVALID_PARAM));
    }
    std::vector<uint8_t> payload(bytes);
    const auto start    = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::seconds(10);
    ucs_status_t status = UCS_OK;
    uint64_t sent       = 0;
    while ((sent < count) && (status == UCS_OK)) {
        fill(payload.data(), sent, bytes);
        uint64_t header;
        std::memcpy(&header, payload.data(), sizeof(header));
        Pack arg{sent, bytes};
        ucs_status_t posted;
        if (kind == "short") {
            posted = post_op([&] {
                return uct_ep_am_short(p.ep, uint8_t(id), header,
                                       payload.data() + sizeof(header),
                                       unsigned(bytes - sizeof(header)));
            });
        } else if (kind == "iov") {
            /* the number and the pattern in two elements */
            uct_iov_t iov[2] = {{payload.data(), sizeof(header), nullptr, 0, 1},
                                {payload.data() + sizeof(header),
                                 bytes - sizeof(header), nullptr, 0, 1}};
            posted = post_op([&] {
                return uct_ep_am_short_iov(p.ep, uint8_t(id), iov, 2);
            });
        } else {
            const ssize_t packed = post_op([&] {
                return uct_ep_am_bcopy(p.ep, uint8_t(id), pack, &arg, 0);
            });
            posted = (packed >= 0) ? UCS_OK : ucs_status_t(packed);
        }
        if (posted == UCS_OK) {
            ++sent;
        } else if (posted == UCS_ERR_NO_RESOURCE) {
            if (std::chrono::steady_clock::now() > deadline) {
                status = UCS_ERR_TIMED_OUT;
            }
            progress(p);
        } else {
            status = posted;
        }
    }
    if (status == UCS_OK) {
        status = wait_connected(p); /* flushes until the ep is idle */
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start).count();
    return "done " + std::to_string(int(status)) + " " + std::to_string(ns) +
           " " + std::to_string(sent);
}

} // namespace

std::string am_command(Peer &p, std::istringstream &in)
{
    std::string what;
    in >> what;
    if (what == "listen") {
        for (unsigned id = 0; id < UCT_AM_ID_MAX; ++id) {
            const ucs_status_t status = uct_iface_set_am_handler(
                    p.iface, uint8_t(id), handler,
                    reinterpret_cast<void*>(uintptr_t(id)), 0);
            if (status != UCS_OK) {
                return "err " + std::to_string(int(status));
            }
        }
        return "ok";
    }
    if (what == "send") {
        std::string kind;
        unsigned id = 0;
        uint64_t count = 0;
        size_t bytes = 0;
        in >> kind >> id >> count >> bytes;
        return send(p, kind, id, count, bytes);
    }
    if (what == "stats") {
        const Received &r = g_received;
        return "am " + std::to_string(r.messages) + " " + std::to_string(r.bad) +
               " " + std::to_string(r.out_of_order) + " " +
               std::to_string(r.bytes);
    }
    if (what == "caps") {
        const uint64_t f = p.attr.cap.flags;
        return "am " + std::to_string(((f & UCT_IFACE_FLAG_AM_SHORT) ? 1 : 0) |
                                      ((f & UCT_IFACE_FLAG_AM_BCOPY) ? 2 : 0)) +
               " " + std::to_string(p.attr.cap.am.max_short) + " " +
               std::to_string(p.attr.cap.am.max_bcopy);
    }
    return "err unknown am command";
}

} // namespace pxn_tools
