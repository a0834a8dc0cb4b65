#include "pxn_hub.h"

#include "pxn_cuda.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/rail_map.h>

#include <algorithm>

namespace pxn {
namespace uct {

namespace {

constexpr uint64_t kGpuCheckNs = 100000000; /* 100 ms */

/* A target iface's inbox (am_inbox.h): the credit it gives out in all,
 * and what each route may have on its way. */
constexpr uint64_t kAmInboxBytes  = 4ull << 20;
constexpr uint64_t kAmWindowBytes = 256ull << 10;
constexpr uint32_t kAmSources     = 1024;

} // namespace

ucs_status_t Hub::open(const Settings &settings, const InnerMd &md,
                       const std::string &dev_name, const void *worker,
                       std::unique_ptr<Hub> *hub_p)
{
    std::unique_ptr<Hub> hub(new Hub());
    bool is_home        = true;
    ucs_status_t status = Node::acquire(settings, &hub->node_);
    if (status == UCS_OK) {
        status = hub->node_->attach(md, dev_name, &hub->port_, &hub->home_rail_,
                                    &is_home);
    }
    if (status == UCS_OK) {
        status = hub->node_->sender_for(worker, &hub->sender_);
    }
    if (status != UCS_OK) {
        return status;
    }
    RailMap map;
    std::string error;
    RailMap::parse(settings.rail_map, &map, &error); /* validated by the md */
    hub->device_          = dev_name;
    hub->rail_            = map.rail_of(hub->port_->device()); /* where it receives */
    hub->home_rail_hash_  = pxn::rail_hash(hub->home_rail_.empty() ? hub->rail_ :
                                           hub->home_rail_);
    hub->dev_addr_.node_hash = hub->node_->node_hash();
    hub->dev_addr_.rail_hash = pxn::rail_hash(hub->rail_);
    hub->dev_addr_.home      = is_home;
    hub->dev_addr_.inner     = hub->port_->device_address();
    hub->iface_addr_      = hub->port_->iface_address();
    hub->sender_counters_ = hub->node_->sender_counters();
    if ((hub->dev_addr_.packed_size() == 0) ||
        (iface_address_size(hub->iface_addr_.size()) == 0)) {
        ucs_error("pxn: inner %s addresses of %zu/%zu bytes do not fit UCX's "
                  "address limits", hub->port_->tl_name().c_str(),
                  hub->dev_addr_.inner.size(), hub->iface_addr_.size());
        return UCS_ERR_UNSUPPORTED;
    }
    if (hub->port_->mode() == Net::ConnectMode::kEp) {
        hub->stock_spares(kSpareRoutes); /* ready before the first ep */
    }
    hub->am_max_ = hub->port_->am_payload_max(settings.geometry.slot_size);
    if ((hub->am_max_ != 0) && is_home) {
        status = hub->open_inbox();
        if (status != UCS_OK) {
            return status;
        }
    }
    *hub_p = std::move(hub);
    return UCS_OK;
}

ucs_status_t Hub::open_inbox()
{
    auto inbox = std::make_unique<AmInbox>();
    ucs_status_t status = inbox->init(kAmInboxBytes, uint32_t(am_max_),
                                      std::max(kAmWindowBytes, am_cost(am_max_)),
                                      kAmSources);
    if (status == UCS_OK) {
        status = node_->attach_inbox(port_.get(), inbox.get(), &am_cookie_,
                                     &am_port_);
    }
    if (status != UCS_OK) {
        ucs_error("pxn: no inbox for active messages on %s: %s",
                  device_.c_str(), ucs_status_string(status));
        return status;
    }
    inbox_ = std::move(inbox);
    return UCS_OK;
}

/* While this thread keeps receiving, the engine leaves the port to it
 * (Node::left_to_app), so that a message wakes no engine thread on the
 * application's core; this thread's first poll after a pause wakes the
 * engine once, to let it know. A frame this thread took is one the engine
 * will not see: what only the engine does after one -- a new source's
 * grant, a relay's grant or wiring (AmPort::pump), a relay's next step
 * after an inner completion of its own on this port, an ep failure --
 * needs it woken; a message for an inbox does not (the room its drain
 * gives back this thread grants itself: grant_here). */
void Hub::receive_here()
{
    if (am_port_->note_polled()) { /* even when the engine is at it now */
        node_->wake_engine();
    }
    std::unique_lock<std::mutex> guard(port_->lock(), std::try_to_lock);
    if (!guard.owns_lock()) {
        return; /* the engine is at it */
    }
    const unsigned work = port_->progress();
    const bool     wake = (work != 0) &&
                          (port_->take_engine_work() || am_port_->frames_pending());
    guard.unlock();
    if (wake) {
        node_->wake_engine();
    }
}

void Hub::grant_here()
{
    {
        std::unique_lock<std::mutex> guard(port_->lock(), std::try_to_lock);
        if (guard.owns_lock()) {
            am_port_->give_grants();
            if (!am_port_->frames_pending()) {
                return; /* every grant went */
            }
        }
    }
    node_->wake_engine();
}

Hub::~Hub()
{
    if (inbox_ != nullptr) {
        node_->detach_inbox(port_.get(), am_cookie_);
    }
}

uint32_t Hub::home_rail_hash()
{
    if (home_rail_.empty()) {
        home_rail_ = node_->home_rail(device_);
        if (!home_rail_.empty()) {
            home_rail_hash_ = pxn::rail_hash(home_rail_);
        }
    }
    return home_rail_hash_;
}

bool Hub::is_reachable(const DeviceAddress &peer)
{
    return is_target(peer) &&
           sender_->relay_exists(peer.rail_hash, port_->tl_name());
}

void Hub::stock_spares(unsigned spares)
{
    for (const auto &lane : all_lanes()) {
        lane->control().want_spares(spares);
    }
}

unsigned Hub::progress()
{
    if (inherited()) {
        return 0; /* the parent's lanes: never written from here */
    }
    /* A process that opened pxn before choosing its GPU: the relay that
     * waits for it starts once a context is current here. */
    if ((node_->gpu() < 0) && cuda_available()) {
        const uint64_t now = monotonic_ns();
        if (now >= next_gpu_check_ns_) {
            next_gpu_check_ns_ = now + kGpuCheckNs;
            node_->notice_gpu(current_gpu());
        }
    }
    return sender_->progress();
}

} // namespace uct
} // namespace pxn
