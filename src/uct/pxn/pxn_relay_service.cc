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
    ucs_status_t status = params.registry->create_entry(
            {params.rail, params.device, params.net->tl_name()}, &r->entry_);
    if (status == UCS_OK) {
        status = r->create_arena(settings, gpu);
    }
    if (status == UCS_OK) {
        status = r->entry_->create_wakeup(&r->wakeup_);
    }
    if (status == UCS_OK) {
        RelayService *self = r.get();
        const Relay::Params relay{params.net.get(), r->entry_.get(),
                                  params.registry, r->arena_base_,
                                  r->arena_memh_, params.is_local,
                                  [self](uint32_t lane) {
                                      return self->commit_lane(lane);
                                  },
                                  [self](uint32_t lane) {
                                      self->release_lane(lane);
                                  }};
        status = Relay::create(relay, settings, &r->relay_);
    }
    if (status == UCS_OK) {
        status = r->entry_->publish();
    }
    if (status != UCS_OK) {
        return status;
    }
    ucs_info("pxn: relaying on %s (rail %s, inner %s, node %s) for up to %u "
             "senders through a %s arena", params.device.c_str(),
             params.rail.c_str(), params.net->tl_name().c_str(),
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
    free_arena();
    entry_.reset();
}

void RelayService::heartbeat(uint64_t now_ns)
{
    if (now_ns >= next_heartbeat_ns_) {
        entry_->heartbeat();
        next_heartbeat_ns_ = now_ns + registry_->heartbeat_timeout_ns() / 10;
    }
}

/* The staging arena: GPU memory exported by CUDA IPC, or a shared-memory
 * file; registered with the inner md either way. */
ucs_status_t RelayService::create_arena(const Settings &settings, bool gpu)
{
    arena_size_ = settings.geometry.arena_size();
    geometry_   = settings.geometry;
    ucs_status_t status;
    if (gpu) {
        if (gpu_ < 0) {
            ucs_error("pxn: a GPU arena needs the process's GPU, which is not "
                      "known (set UCX_PXN_CUDA_DEVICE)");
            return UCS_ERR_NO_DEVICE;
        }
        status = gpu_arena_.allocate(gpu_, arena_size_);
        if (status == UCS_OK) {
            arena_base_ = gpu_arena_.base();
            status      = entry_->set_arena(abi::kArenaCudaIpc, gpu_arena_.handle(),
                                            GpuArena::kHandleSize);
        }
    } else {
        status = entry_->create_host_arena(&arena_fd_);
        if (status == UCS_OK) {
            status = arena_.map(arena_fd_.get(), arena_size_, "staging arena");
        }
        arena_base_ = arena_.data();
    }
    if (status != UCS_OK) {
        return status;
    }
    return net_->mem_reg(arena_base_, arena_size_, &arena_memh_);
}

ucs_status_t RelayService::commit_lane(uint32_t lane)
{
    if (!arena_fd_.valid()) {
        return UCS_OK; /* a GPU arena is allocated whole */
    }
    const uint64_t bytes  = uint64_t(geometry_.slots) * geometry_.slot_size;
    const uint64_t offset = slot_offset(lane, 0, geometry_.slots,
                                        geometry_.slot_size);
    const int rc = posix_fallocate(arena_fd_.get(), off_t(offset), off_t(bytes));
    if (rc != 0) {
        ucs_warn("pxn: no room in %s for lane %u's slots (%lu MiB): %s",
                 registry_->path().c_str(), lane, bytes >> 20, strerror(rc));
        return UCS_ERR_NO_MEMORY;
    }
    return UCS_OK;
}

void RelayService::release_lane(uint32_t lane)
{
    if (!arena_fd_.valid()) {
        return;
    }
    const uint64_t bytes  = uint64_t(geometry_.slots) * geometry_.slot_size;
    const uint64_t offset = slot_offset(lane, 0, geometry_.slots,
                                        geometry_.slot_size);
    /* the pages go back to the file system; the file keeps its size */
    if (fallocate(arena_fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  off_t(offset), off_t(bytes)) != 0) {
        ucs_debug("pxn: freeing lane %u's slots failed: %m", lane);
    }
}

void RelayService::free_arena()
{
    if (arena_memh_ != UCT_MEM_HANDLE_NULL) {
        net_->mem_dereg(arena_memh_);
        arena_memh_ = UCT_MEM_HANDLE_NULL;
    }
    arena_.reset();
}

} // namespace uct
} // namespace pxn
