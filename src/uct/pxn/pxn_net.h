/*
 * pxn's network hop: one inner UCT iface (e.g. rc_mlx5, tcp) on one device,
 * opened on a private worker that only pxn drives. Net is what the relay,
 * the target side (a port) and the direct path see of it; UctNet is the
 * real one, tests bring a fake (test/gtest/transport/fake_net.h) to run the relay
 * and senders in one process without any transport.
 *
 * Threading contract: the inner worker is UCS_THREAD_MODE_SERIALIZED. Every
 * call into a Net (but the accessors of immutable state) happens with
 * lock() held; the engine thread holds it while it progresses, the
 * application thread for connection setup and the direct path. Completion
 * callbacks of inner operations run inside progress(), on whichever thread
 * called it, with the lock held.
 *
 * Inner ep creation never blocks on the network: tcp connects
 * non-blockingly (CONN_NB=y is set for pxn's inner tcp), rc creates and
 * moves QPs with local verbs calls only.
 */
#ifndef PXN_UCT_PXN_NET_H_
#define PXN_UCT_PXN_NET_H_

#include "pxn_net_md.h"

#include <ucs/pxn/address.h>
#include <ucs/pxn/settings.h>

#include <uct/api/uct.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace pxn {
namespace uct {

class Net {
public:
    /* kIface: the relay connects to a target's iface address; kEp: to the
     * ep a target made for one sender ep (UCP exchanges their addresses);
     * kWired: to-iface towards UCP, but the relay wires its own ep-to-ep
     * inner connection to the target's port over a second, to-iface inner
     * iface of the same device (the wiring iface: ud or dc beside rc, tcp
     * beside tcp), which also carries the active-message frames. */
    enum class ConnectMode { kIface, kEp, kWired };

    virtual ~Net() = default;
    Net(const Net&) = delete;
    Net &operator=(const Net&) = delete;

    std::mutex             &lock() { return lock_; }
    const std::string      &tl_name() const { return tl_name_; }
    const std::string      &device() const { return device_; }
    /* The inner iface's attributes (limits, address lengths, performance). */
    const uct_iface_attr_t &attr() const { return attr_; }
    ConnectMode             mode() const { return mode_; }
    /* kWired: the wiring iface's transport; else empty. */
    const std::string      &wire_tl_name() const { return wire_tl_; }
    /* Targets are reached by their iface address (kIface, kWired). */
    bool to_iface() const { return mode_ != ConnectMode::kEp; }
    /* Length of what iface_address() returns. */
    size_t iface_addr_len() const
    {
        return (mode_ == ConnectMode::kWired) ? wire_attr_.iface_addr_len :
                                                attr_.iface_addr_len;
    }
    /* get_zcopy usable: cuda_ipc keeps the flag but sets max_zcopy 0 when
     * it disables gets. */
    bool has_get() const
    {
        return (attr_.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY) &&
               (attr_.cap.get.max_zcopy > 0);
    }

    /* kWired: iface_address(), is_reachable() and ep_create_to_iface() are
     * the wiring iface's, ep_create_unconnected() and ep_connect() the
     * inner transport's; both ifaces have the same device address. */
    virtual Bytes device_address() const = 0;
    virtual Bytes iface_address() const = 0;
    virtual bool  is_reachable(const uint8_t *dev_addr,
                               const uint8_t *iface_addr) const = 0;

    virtual ucs_status_t ep_create_to_iface(const uint8_t *dev_addr,
                                            const uint8_t *iface_addr,
                                            uct_ep_h *ep) = 0;
    virtual ucs_status_t ep_create_unconnected(uct_ep_h *ep, Bytes *addr) = 0;
    virtual ucs_status_t ep_connect(uct_ep_h ep, const uint8_t *dev_addr,
                                    const uint8_t *ep_addr) = 0;
    /* Cancels what is still in flight on it. */
    virtual void         ep_destroy(uct_ep_h ep) = 0;

    virtual ucs_status_t put_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                                   uint64_t remote_addr, uct_rkey_t rkey,
                                   uct_completion_t *comp) = 0;
    virtual ucs_status_t get_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                                   uint64_t remote_addr, uct_rkey_t rkey,
                                   uct_completion_t *comp) = 0;

    /* One inner scatter-gather operation (UCX's put/get_sgl_zcopy):
     * element i moves lengths[i] bytes between buffers[i] (registered as
     * memhs[i]) and remote_addrs[i] (rkeys[i]). */
    struct Sgl {
        void *const      *buffers;
        const size_t     *lengths;
        const uct_mem_h  *memhs;
        const uint64_t   *remote_addrs;
        const uct_rkey_t *rkeys;
        size_t            count;
    };
    /* Most elements of one such operation; 0 where the inner transport, or
     * the UCX pxn was built against, has none. */
    size_t max_sgl(bool get) const { return get ? max_get_sgl_ : max_put_sgl_; }
    virtual ucs_status_t sgl_zcopy(bool /* get */, uct_ep_h, const Sgl &,
                                   uct_completion_t *)
    {
        return UCS_ERR_UNSUPPORTED;
    }

    /* A packed inner rkey of `length` bytes (as a peer's md packed it).
     * Where the inner md needs no key (tcp and cma from UCX 1.14/1.15 on)
     * the key is empty and unpacks to UCT_INVALID_RKEY, as UCP passes to
     * such a transport. */
    virtual ucs_status_t rkey_unpack(const uint8_t *packed, size_t length,
                                     uct_rkey_bundle_t *rkey) = 0;
    virtual void         rkey_release(uct_rkey_bundle_t *rkey) = 0;

    /* Registration of local memory (the relay's staging memory); a memh of
     * UCT_MEM_HANDLE_NULL where the inner md registers nothing. */
    virtual ucs_status_t mem_reg(void *address, size_t length,
                                 uct_mem_h *memh) = 0;
    virtual void         mem_dereg(uct_mem_h memh) = 0;

    /* --- active messages between relays and target ports (am_frame.h) ---
     * pxn sends them as inner am_bcopy of one AM id on its private worker.
     * max_am(): the largest frame, 0 where the inner transport has no
     * am_bcopy (cma, cuda_ipc). */
    size_t max_am() const
    {
        const uct_iface_attr_t &attr = (mode_ == ConnectMode::kWired) ?
                                       wire_attr_ : attr_;
        return (attr.cap.flags & UCT_IFACE_FLAG_AM_BCOPY) ?
               attr.cap.am.max_bcopy : 0;
    }
    /* The longest AM message pxn carries over this port: what a frame holds
     * after its header (am_frame.h), at most `slot_size`; 0 without AM, or
     * in the ep-to-ep model (a target sends grants back on eps to the
     * relay's iface). The same on both ends of a hop when their inner
     * transports are configured alike. */
    size_t am_payload_max(uint64_t slot_size) const
    {
        const size_t header = 16; /* sizeof(AmFrameHeader) */
        if (!to_iface() || (max_am() <= header)) {
            return 0;
        }
        return std::min<uint64_t>(max_am() - header, slot_size);
    }
    /* Sends one frame: `header` then `payload`, as one inner message of at
     * most max_am() bytes. UCS_OK, UCS_ERR_NO_RESOURCE (post it again
     * later: nothing was sent), or the error that failed it. */
    virtual ucs_status_t am_send(uct_ep_h /* ep */, const void * /* header */,
                                 size_t /* header_length */,
                                 const void * /* payload */,
                                 size_t /* length */)
    {
        return UCS_ERR_UNSUPPORTED;
    }
    /* Frames that arrive go to `receiver`, inside progress() on the thread
     * that called it (the lock held); the bytes are valid for the call. */
    using AmReceiver = std::function<void(const void *data, size_t length)>;
    void set_am_receiver(AmReceiver receiver) { am_receiver_ = std::move(receiver); }
    /* Inner eps that the inner transport declares failed (its iface's
     * error handler: tcp when the peer's connection closes) go to the
     * observers, inside progress() with the lock held; an observer must
     * not destroy the ep there. Two observers: the relay's route table
     * (set_ep_failure) and the port's AM side (set_port_ep_failure); each
     * ignores eps it does not know. */
    using EpFailure = std::function<void(uct_ep_h ep, ucs_status_t status)>;
    void set_ep_failure(EpFailure observer) { ep_failure_ = std::move(observer); }
    void set_port_ep_failure(EpFailure observer)
    {
        port_ep_failure_ = std::move(observer);
    }
    /* What the inner iface's error handler calls (and fakes in tests). */
    void ep_failed(uct_ep_h ep, ucs_status_t status)
    {
        for (const EpFailure *observer : {&ep_failure_, &port_ep_failure_}) {
            if (*observer) {
                (*observer)(ep, status);
            }
        }
        note_engine_work();
    }
    /* Whatever progress() did that only the engine thread follows up: a
     * relay's inner operation completed (Relay::finish), an ep failed. A
     * thread other than the engine that progressed the port wakes the
     * engine for it (Hub::receive_here). Lock held. */
    void note_engine_work() { engine_work_ = true; }
    bool take_engine_work() { return std::exchange(engine_work_, false); }

    virtual unsigned progress() = 0;
    /* An fd that becomes readable when progress() may have work, after
     * arm() returned UCS_OK; -1 when the inner iface has none (then the
     * caller must poll). arm() returns UCS_ERR_BUSY if events are already
     * pending. */
    virtual int          event_fd() const { return -1; }
    virtual ucs_status_t arm() { return UCS_ERR_UNSUPPORTED; }

protected:
    Net() = default;

    void deliver_am(const void *data, size_t length)
    {
        if (am_receiver_) {
            am_receiver_(data, length);
        }
    }

    std::string      tl_name_;
    std::string      device_;
    uct_iface_attr_t attr_{};
    ConnectMode      mode_ = ConnectMode::kIface;
    uct_iface_attr_t wire_attr_{}; /* kWired: the wiring iface's */
    std::string      wire_tl_;     /* kWired: its transport */
    size_t           max_put_sgl_ = 0;
    size_t           max_get_sgl_ = 0;

private:
    std::mutex       lock_;
    AmReceiver       am_receiver_;
    EpFailure        ep_failure_;
    EpFailure        port_ep_failure_;
    bool             engine_work_ = false; /* note_engine_work() */
};

class UctNet final : public Net {
public:
    ~UctNet() override;

    /* Opens `tl_name` on `device` of `md` on a new private worker.
     * `model` kEp forces the ep-to-ep model when both are supported;
     * kWired opens the wiring iface beside an inner transport that
     * connects ep to ep (UCS_ERR_UNSUPPORTED and `*error`, for the caller
     * to log once, when none opens); kAuto: to-iface where the inner
     * transport can, else wired where a wiring iface opens, else ep-to-ep.
     * Other failures are logged here. */
    static ucs_status_t open(const InnerMd &md, const std::string &tl_name,
                             const std::string &device, ConnectModel model,
                             std::unique_ptr<Net> *net, std::string *error);

    Bytes device_address() const override;
    Bytes iface_address() const override;
    bool  is_reachable(const uint8_t *dev_addr,
                       const uint8_t *iface_addr) const override;
    ucs_status_t ep_create_to_iface(const uint8_t *dev_addr,
                                    const uint8_t *iface_addr,
                                    uct_ep_h *ep) override;
    ucs_status_t ep_create_unconnected(uct_ep_h *ep, Bytes *addr) override;
    ucs_status_t ep_connect(uct_ep_h ep, const uint8_t *dev_addr,
                            const uint8_t *ep_addr) override;
    void         ep_destroy(uct_ep_h ep) override { uct_ep_destroy(ep); }
    ucs_status_t put_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                           uint64_t remote_addr, uct_rkey_t rkey,
                           uct_completion_t *comp) override
    {
        return uct_ep_put_zcopy(ep, iov, 1, remote_addr, rkey, comp);
    }
    ucs_status_t get_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                           uint64_t remote_addr, uct_rkey_t rkey,
                           uct_completion_t *comp) override
    {
        return uct_ep_get_zcopy(ep, iov, 1, remote_addr, rkey, comp);
    }
    ucs_status_t sgl_zcopy(bool get, uct_ep_h ep, const Sgl &sgl,
                           uct_completion_t *comp) override;
    ucs_status_t am_send(uct_ep_h ep, const void *header, size_t header_length,
                         const void *payload, size_t length) override;
    ucs_status_t rkey_unpack(const uint8_t *packed, size_t length,
                             uct_rkey_bundle_t *rkey) override;
    void         rkey_release(uct_rkey_bundle_t *rkey) override;
    ucs_status_t mem_reg(void *address, size_t length, uct_mem_h *memh) override;
    void         mem_dereg(uct_mem_h memh) override;
    unsigned     progress() override { return uct_worker_progress(worker_); }
    int          event_fd() const override { return event_fd_; }
    ucs_status_t arm() override;

private:
    UctNet() = default;

    ucs_status_t open_iface(const std::string &tl_name, uct_iface_h *iface,
                            uct_iface_attr_t *attr);
    /* The wiring iface beside `tl_name`; UCS_ERR_UNSUPPORTED and `*why`
     * (what was tried, and why not) when none opens. */
    ucs_status_t open_wire(const std::string &tl_name, std::string *why);
    /* The iface's event fd into event_fd_ (an epoll fd over both ifaces in
     * kWired); UCS_ERR_UNSUPPORTED where it has none. */
    ucs_status_t open_events(uct_iface_h iface, const uct_iface_attr_t &attr,
                             unsigned *events);
    void         close_event_fd();
    uct_iface_h  to_iface_iface() const
    {
        return (wire_iface_ != nullptr) ? wire_iface_ : iface_;
    }

    static ucs_status_t am_handler(void *arg, void *data, size_t length,
                                   unsigned flags);

    ucs_async_context_t *async_     = nullptr;
    uct_worker_h         worker_    = nullptr;
    uct_iface_h          iface_     = nullptr;
    uct_iface_h          wire_iface_ = nullptr; /* kWired */
    uct_md_h             md_        = nullptr;
    std::string          md_name_;
    uct_component_h      component_ = nullptr;
    uint64_t             md_flags_  = 0; /* UCT_MD_FLAG_REG, _NEED_RKEY */
    int                  event_fd_  = -1;
    unsigned             events_    = 0;
    unsigned             wire_events_ = 0;
};

} // namespace uct
} // namespace pxn

#endif
