#include "peer_am.h"

#include <chrono>
#include <cstring>
#include <deque>
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
/* the next message's number per AM id: it goes on across "am send"s */
uint64_t g_next_number[UCT_AM_ID_MAX] = {};

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

/* An am_zcopy's buffers and completion: kept until the send's flush (UCT:
 * the buffers stay valid until the completion). */
struct Zcopy {
    uct_completion_t comp;
    uint64_t         header;
    std::vector<uint8_t> payload;
    PeerBuffer       gpu; /* zcopy-cuda: the payload in GPU memory */
    bool             posted;
    bool             completed;
    ucs_status_t     status;
};

void zcopy_completed(uct_completion_t *comp)
{
    Zcopy *z     = ucs_container_of(comp, Zcopy, comp);
    z->completed = true;
    z->status    = comp->status;
}

/* What "am send" does when a message gets UCS_ERR_NO_RESOURCE. */
enum class OnBusy { kRetry, kStop, kPending, kFlushPending };

struct Waiter {
    uct_pending_req_t req;
    bool              dispatched;
    uct_ep_h          ep; /* a flush request's */
};

ucs_status_t dispatched(uct_pending_req_t *req)
{
    ucs_container_of(req, Waiter, req)->dispatched = true;
    return UCS_OK; /* done with it: the sender posts again itself */
}

/* A pending request that flushes the ep when dispatched, as UCP's ep
 * flush does: not now (UCS_ERR_NO_RESOURCE) keeps it pending. */
ucs_status_t flush_dispatched(uct_pending_req_t *req)
{
    Waiter *w                 = ucs_container_of(req, Waiter, req);
    const ucs_status_t status = uct_ep_flush(w->ep, 0, nullptr);
    if (status == UCS_ERR_NO_RESOURCE) {
        return status;
    }
    w->dispatched = true;
    return UCS_OK;
}

std::string send(Peer &p, const std::string &kind, unsigned id, uint64_t count,
                 size_t bytes, OnBusy on_busy, uint64_t max_busy)
{
    if ((p.ep == nullptr) || (bytes < sizeof(uint64_t)) || (id >= UCT_AM_ID_MAX) ||
        ((kind != "short") && (kind != "iov") && (kind != "bcopy") &&
         (kind != "zcopy") && (kind != "zcopy-cuda"))) {
        return "err " + std::to_string(int(UCS_ERR_INVALID_PARAM));
    }
    std::vector<uint8_t> payload(bytes);
    const auto start    = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::seconds(
                                  (on_busy != OnBusy::kRetry) ? 30 : 10);
    ucs_status_t status = UCS_OK;
    uint64_t sent       = 0;
    uint64_t dispatches = 0;
    Waiter waiter{};
    const unsigned errors = p.ep_errors; /* the handler's calls before */
    uint64_t &number    = g_next_number[id];
    std::deque<Zcopy> zcopies;
    while ((sent < count) && (status == UCS_OK)) {
        fill(payload.data(), number, bytes);
        uint64_t header;
        std::memcpy(&header, payload.data(), sizeof(header));
        Pack arg{number, bytes};
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
        } else if (kind.rfind("zcopy", 0) == 0) {
            /* the number as the header, the pattern in two elements */
            if (zcopies.empty() || zcopies.back().posted) {
                zcopies.emplace_back(); /* else a retry of the last one */
            }
            Zcopy &z = zcopies.back();
            z.comp   = {zcopy_completed, 1, UCS_OK};
            z.header = header;
            z.payload.assign(payload.begin() + sizeof(header), payload.end());
            z.completed   = false;
            z.status      = UCS_OK;
            uint8_t *data = z.payload.data();
            if (kind == "zcopy-cuda") {
                const std::string alloc = z.gpu.alloc(p.md, p.md_attr,
                                                      z.payload.size(), true);
                if (alloc.rfind("alloc", 0) != 0) {
                    status = UCS_ERR_NO_MEMORY;
                    break;
                }
                z.gpu.load(z.payload.data(), z.payload.size());
                data = z.gpu.data();
            }
            const size_t half = z.payload.size() / 2;
            uct_iov_t iov[2]  = {{data, half, z.gpu.memh(), 0, 1},
                                 {data + half, z.payload.size() - half,
                                  z.gpu.memh(), 0, 1}};
            posted = post_op([&] {
                return uct_ep_am_zcopy(p.ep, uint8_t(id), &z.header,
                                       sizeof(z.header), iov, 2, 0, &z.comp);
            });
            z.posted = (posted == UCS_INPROGRESS) || (posted == UCS_OK);
            z.completed |= (posted == UCS_OK); /* UCT: done, no callback */
            posted       = z.posted ? UCS_OK : posted;
        } else {
            const ssize_t packed = post_op([&] {
                return uct_ep_am_bcopy(p.ep, uint8_t(id), pack, &arg, 0);
            });
            posted = (packed >= 0) ? UCS_OK : ucs_status_t(packed);
        }
        if (posted == UCS_OK) {
            ++sent;
            ++number;
        } else if ((posted == UCS_ERR_NO_RESOURCE) && (on_busy == OnBusy::kStop)) {
            status = posted;
        } else if ((posted == UCS_ERR_NO_RESOURCE) &&
                   ((on_busy == OnBusy::kPending) ||
                    (on_busy == OnBusy::kFlushPending))) {
            /* flushpending: a flush request first, the message's behind it */
            Waiter flusher{{}, false, p.ep};
            flusher.req.func = flush_dispatched;
            if (on_busy == OnBusy::kFlushPending) {
                const ucs_status_t added = uct_ep_pending_add(p.ep, &flusher.req, 0);
                if (added == UCS_ERR_BUSY) {
                    continue;
                }
                if (added != UCS_OK) {
                    status = added;
                    break;
                }
            } else {
                flusher.dispatched = true;
            }
            waiter.req.func    = dispatched;
            waiter.dispatched  = false;
            const ucs_status_t added = uct_ep_pending_add(p.ep, &waiter.req, 0);
            if (added == UCS_ERR_BUSY) {
                continue; /* room came meanwhile: post again */
            }
            if (added != UCS_OK) {
                status = added;
                break;
            }
            while ((!waiter.dispatched || !flusher.dispatched) &&
                   (p.ep_errors == errors) &&
                   (std::chrono::steady_clock::now() < deadline)) {
                progress(p);
            }
            if (!waiter.dispatched || !flusher.dispatched) {
                uct_ep_pending_purge(p.ep, nullptr, nullptr);
                status = (p.ep_errors != errors) ? p.last_ep_error :
                                                   UCS_ERR_TIMED_OUT;
            }
            dispatches += waiter.dispatched;
        } else if (posted == UCS_ERR_NO_RESOURCE) {
            if (std::chrono::steady_clock::now() > deadline) {
                status = UCS_ERR_TIMED_OUT;
            } else if (max_busy-- == 0) {
                status = UCS_ERR_NO_RESOURCE;
                break;
            }
            progress(p);
        } else {
            status = posted;
        }
    }
    if ((status == UCS_OK) && (on_busy != OnBusy::kStop)) {
        status = wait_connected(p); /* flushes until the ep is idle */
    }
    for (Zcopy &z : zcopies) { /* each completed, once, after a flush */
        if ((status == UCS_OK) && z.posted &&
            (!z.completed || (z.status != UCS_OK))) {
            status = z.completed ? z.status : UCS_ERR_NO_PROGRESS;
        }
        z.gpu.release(p.md);
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start).count();
    return "done " + std::to_string(int(status)) + " " + std::to_string(ns) +
           " " + std::to_string(sent) +
           ((on_busy == OnBusy::kPending) || (on_busy == OnBusy::kFlushPending) ?
            " " + std::to_string(dispatches) : "");
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
    if (what == "close") { /* the process lives on without its iface */
        std::string keep;
        in >> keep;
        if (keep == "keep") { /* another iface of the process stays */
            const ucs_status_t status = open_iface(p, &p.spare);
            if (status != UCS_OK) {
                return "err " + std::to_string(int(status));
            }
        }
        destroy_ep(p);
        uct_iface_close(p.iface);
        p.iface = nullptr;
        return "ok";
    }
    if (what == "send") {
        std::string kind;
        unsigned id = 0;
        uint64_t count = 0;
        size_t bytes = 0;
        std::string mode;
        uint64_t max_busy = UINT64_MAX;
        in >> kind >> id >> count >> bytes >> mode;
        if ((mode == "busy") && !(in >> max_busy)) {
            return "err busy needs a count";
        }
        if (!mode.empty() && (mode != "nopending") && (mode != "pending") &&
            (mode != "flushpending") && (mode != "busy")) {
            return "err unknown am send mode " + mode;
        }
        return send(p, kind, id, count, bytes,
                    (mode == "nopending") ? OnBusy::kStop :
                    (mode == "pending")   ? OnBusy::kPending :
                    (mode == "flushpending") ? OnBusy::kFlushPending : OnBusy::kRetry,
                    max_busy);
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
                                      ((f & UCT_IFACE_FLAG_AM_BCOPY) ? 2 : 0) |
                                      ((f & UCT_IFACE_FLAG_AM_ZCOPY) ? 4 : 0)) +
               " " + std::to_string(p.attr.cap.am.max_short) + " " +
               std::to_string(p.attr.cap.am.max_bcopy) + " " +
               std::to_string(p.attr.cap.am.max_zcopy) + " " +
               std::to_string(p.attr.cap.am.max_hdr) + " " +
               std::to_string(p.attr.cap.am.max_iov);
    }
    return "err unknown am command";
}

} // namespace pxn_tools
