#include "pxn_relay_service.h"

#include "pxn_log.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/seq.h>

#include <cstring>
#include <fcntl.h>

namespace pxn {
namespace uct {

namespace {

constexpr uint64_t kDrainTimeoutNs = 2000000000;

} // namespace

bool RelayService::wants_gpu_arena(const Settings &settings, bool md_registers_cuda)
{
    switch (settings.arena) {
    case ArenaChoice::kCuda:
        return true;
    case ArenaChoice::kHost:
        return false;
    case ArenaChoice::kAuto:
        return md_registers_cuda && cuda_available();
    }
    return false;
}

ucs_status_t RelayService::open(const Params &params, const Settings &settings,
                                std::unique_ptr<RelayService> *relay_p)
{
    std::unique_ptr<RelayService> r(new RelayService());
    r->rail_     = params.rail;
    r->device_   = params.device;
    r->net_      = params.net;
    r->registry_ = params.registry;
    r->gpu_      = params.gpu;

    const bool gpu = wants_gpu_arena(settings, params.md_registers_cuda);
    if (gpu && (!cuda_available() || !params.md_registers_cuda)) {
        error_once(strformat("pxn: UCX_PXN_ARENA=cuda but %s", !cuda_available() ?
                             "no GPU is usable" :
                             "the inner md cannot register GPU memory"));
        return UCS_ERR_UNSUPPORTED;
    }
    if (!gpu && !params.md_reaches_host) {
        error_once(strformat("pxn: a host arena (UCX_PXN_ARENA=%s) but the inner "
                             "md of %s cannot register host memory",
                             (settings.arena == ArenaChoice::kHost) ? "host" : "auto",
                             params.net->tl_name().c_str()));
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_status_t status = params.registry->create_entry(
            {params.rail, params.device, params.net->tl_name()}, &r->entry_);
    if (status == UCS_OK) {
        const RelayArena::Params arena{params.net.get(), r->entry_.get(), gpu,
                                       params.gpu,
                                       uint64_t(settings.lane_linger * 1e9),
                                       settings.warm_lanes};
        status = RelayArena::open(arena, &r->arena_);
    }
    if (status == UCS_OK) {
        status = r->entry_->create_wakeup(&r->wakeup_);
    }
    if (status == UCS_OK) {
        RelayArena *arena = r->arena_.get();
        const Relay::Params relay{params.net.get(), r->entry_.get(),
                                  params.registry, params.is_local,
                                  [arena](uint32_t lane, LaneSlots *slots) {
                                      return arena->acquire(lane, slots);
                                  },
                                  [arena](uint32_t lane) {
                                      arena->release(lane, monotonic_ns());
                                  },
                                  gpu ? params.gpu : -1};
        status = Relay::create(relay, settings, &r->relay_);
    }
    if (status == UCS_OK) {
        status = r->entry_->publish();
    }
    if (status != UCS_OK) {
        return status;
    }
    const std::string &wire = params.net->wire_tl_name();
    ucs_info("pxn: relaying on %s (rail %s, inner %s%s%s, node %s) for up to %u "
             "senders through a %s arena", params.device.c_str(),
             params.rail.c_str(), params.net->tl_name().c_str(),
             wire.empty() ? "" : " wired over ", wire.c_str(),
             params.registry->node_id().c_str(), settings.geometry.lanes,
             gpu ? "GPU" : "host");
    *relay_p = std::move(r);
    return UCS_OK;
}

RelayService::~RelayService()
{
    if (entry_ != nullptr) {
        entry_->begin_close();
    }
    if (relay_ != nullptr) {
        /* In-flight inner operations reference the arena: let them end. */
        const uint64_t deadline = monotonic_ns() + kDrainTimeoutNs;
        std::lock_guard<std::mutex> guard(net_->lock());
        while ((relay_->inflight() != 0) && (monotonic_ns() < deadline)) {
            net_->progress();
        }
        relay_.reset();
    }
    if (arena_ != nullptr) {
        std::lock_guard<std::mutex> guard(net_->lock());
        arena_.reset();
    }
    entry_.reset();
}

void RelayService::heartbeat(uint64_t now_ns)
{
    if (now_ns >= next_heartbeat_ns_) {
        entry_->heartbeat();
        next_heartbeat_ns_ = now_ns + registry_->heartbeat_timeout_ns() / 10;
    }
}

} // namespace uct
} // namespace pxn
