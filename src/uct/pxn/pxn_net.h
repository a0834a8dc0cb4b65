/*
 * pxn's network hop: one inner UCT iface (e.g. rc_mlx5, tcp) on the home
 * device, opened on a private worker that only pxn drives.
 *
 * Threading contract: the inner worker is UCS_THREAD_MODE_SERIALIZED. Every
 * call into the inner iface, its eps and its worker happens with lock()
 * held; the relay engine thread holds it while it progresses, the
 * application thread holds it for connection setup and direct fallback.
 * Completion callbacks of inner operations run inside progress(), on
 * whichever thread called it, with the lock held.
 */
#ifndef PXN_UCT_PXN_NET_H_
#define PXN_UCT_PXN_NET_H_

#include "pxn_net_md.h"

#include <uct/api/uct.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pxn {
namespace uct {

class Net {
public:
    enum class ConnectMode { kIface, kEp };

    ~Net();
    Net(const Net&) = delete;
    Net &operator=(const Net&) = delete;

    /* Opens `tl_name` on `device` of `md` on a new private worker.
     * `prefer_ep` forces the ep-to-ep model when both are supported. */
    static ucs_status_t open(const InnerMd &md, const std::string &tl_name,
                             const std::string &device, bool prefer_ep,
                             std::unique_ptr<Net> *net);

    std::mutex             &lock() { return lock_; }
    const std::string      &tl_name() const { return tl_name_; }
    const std::string      &device() const { return device_; }
    const uct_iface_attr_t &attr() const { return attr_; }
    ConnectMode             mode() const { return mode_; }
    uct_iface_h             iface() const { return iface_; }
    uct_md_h                md() const { return md_; }
    uct_component_h         component() const { return component_; }
    bool                    has_get() const;

    /* Local addresses; sizes from attr(). */
    std::vector<uint8_t> device_address() const;
    std::vector<uint8_t> iface_address() const;

    /* Caller holds lock(). */
    ucs_status_t ep_create_to_iface(const uint8_t *dev_addr,
                                    const uint8_t *iface_addr, uct_ep_h *ep);
    ucs_status_t ep_create_unconnected(uct_ep_h *ep, std::vector<uint8_t> *addr);
    ucs_status_t ep_connect(uct_ep_h ep, const uint8_t *dev_addr,
                            const uint8_t *ep_addr);
    bool         is_reachable(const uint8_t *dev_addr,
                              const uint8_t *iface_addr) const;
    unsigned     progress();

    /* An fd that becomes readable when progress() may have work, after
     * arm() returned UCS_OK; -1 when the inner iface has no event fd (then
     * the caller must poll). arm() returns UCS_ERR_BUSY if events are
     * already pending. Caller holds lock(). */
    int          event_fd() const { return event_fd_; }
    ucs_status_t arm();

private:
    Net() = default;

    std::mutex           lock_;
    std::string          tl_name_;
    std::string          device_;
    ucs_async_context_t *async_     = nullptr;
    uct_worker_h         worker_    = nullptr;
    uct_iface_h          iface_     = nullptr;
    uct_md_h             md_        = nullptr;
    uct_component_h      component_ = nullptr;
    uct_iface_attr_t     attr_{};
    ConnectMode          mode_      = ConnectMode::kIface;
    int                  event_fd_  = -1;
    unsigned             events_    = 0;
};

} // namespace uct
} // namespace pxn

#endif
