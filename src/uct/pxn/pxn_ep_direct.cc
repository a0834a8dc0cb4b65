/*
 * Ep's direct path (pxn_ep.h, "Direct path"): operations that can no longer
 * go through a relay, sent with this process's own inner transport straight
 * to the target, posted and completed on the application thread.
 */
#include "pxn_ep.h"

#include "pxn_md.h"

#include <algorithm>

namespace pxn {
namespace uct {

bool Ep::fall_back(const SendRequest &req, const uint8_t *rkey,
                   uint16_t rkey_length)
{
    if (!can_go_direct()) {
        return false;
    }
    Net &net = hub_->net();
    std::lock_guard<std::mutex> guard(net.lock());
    if (direct_ep_ == nullptr) {
        if (!net.is_reachable(peer_.inner.data(), peer_iface_.data()) ||
            (net.ep_create_to_iface(peer_.inner.data(), peer_iface_.data(),
                                    &direct_ep_) != UCS_OK)) {
            direct_ep_     = nullptr;
            direct_failed_ = true;
            ucs_debug("pxn: no direct path to the target of ep %p", self_);
            return false;
        }
    }
    const Bytes packed(rkey, rkey + rkey_length);
    auto it = std::find_if(direct_rkeys_.begin(), direct_rkeys_.end(),
                           [&](const auto &r) { return r.first == packed; });
    if (it == direct_rkeys_.end()) {
        uct_rkey_bundle_t bundle;
        if (net.rkey_unpack(packed.data(), packed.size(), &bundle) != UCS_OK) {
            return false;
        }
        direct_rkeys_.emplace_back(packed, bundle);
        it = direct_rkeys_.end() - 1;
    }

    auto op         = std::make_unique<DirectOp>();
    op->req         = req;
    op->rkey        = it->second.rkey;
    op->inner.op          = op.get();
    op->inner.comp.func   = direct_done;
    op->inner.comp.count  = static_cast<int>(req.nsegs) + 1; /* + posting guard */
    op->inner.comp.status = UCS_OK;
    post_direct(*op);
    direct_ops_.push_back(std::move(op));
    want_progress(); /* iface progress finishes it */
    abi::SenderCounters &counters = hub_->sender_counters();
    __atomic_fetch_add(&counters.fallback_ops, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&counters.fallback_bytes, req.bytes(), __ATOMIC_RELAXED);
    return true;
}

/* Caller holds the Net lock. Returns true once every segment is posted. */
bool Ep::post_direct(DirectOp &op)
{
    uint64_t remote = op.req.remote_addr;
    for (uint32_t i = 0; i < op.posted; ++i) {
        remote += op.req.segs[i].length;
    }
    while (op.posted < op.req.nsegs) {
        const IoSegment &seg = op.req.segs[op.posted];
        /* pxn's memh is the inner md's, or none where that md registers
         * nothing */
        const uct_mem_h memh = (op.req.memh[op.posted] == kPxnMemhNoInner) ?
                               UCT_MEM_HANDLE_NULL : op.req.memh[op.posted];
        uct_iov_t iov = {reinterpret_cast<void*>(seg.addr), seg.length, memh,
                         0, 1};
        Net &net = hub_->net();
        const ucs_status_t status =
                (op.req.op == abi::kOpGet) ?
                net.get_zcopy(direct_ep_, &iov, remote, op.rkey, &op.inner.comp) :
                net.put_zcopy(direct_ep_, &iov, remote, op.rkey, &op.inner.comp);
        if (status == UCS_ERR_NO_RESOURCE) {
            return false;
        }
        if (status != UCS_INPROGRESS) {
            if (UCS_STATUS_IS_ERR(status) && (op.inner.comp.status == UCS_OK)) {
                op.inner.comp.status = status;
            }
            --op.inner.comp.count;
        }
        remote += seg.length;
        ++op.posted;
    }
    if (--op.inner.comp.count == 0) {
        op.done.store(true, std::memory_order_release);
    }
    return true;
}

void Ep::direct_done(uct_completion_t *comp)
{
    ucs_container_of(comp, DirectCompletion, comp)->op->done.store(
            true, std::memory_order_release);
}

unsigned Ep::progress_direct()
{
    unsigned work = 0;
    for (auto it = direct_ops_.begin(); it != direct_ops_.end();) {
        DirectOp &op = **it;
        if (op.posted < op.req.nsegs) {
            std::lock_guard<std::mutex> guard(hub_->net().lock());
            work += post_direct(op);
        }
        if (!op.done.load(std::memory_order_acquire)) {
            ++it;
            continue;
        }
        const ucs_status_t status = op.inner.comp.status;
        uct_completion_t *user    = op.req.comp;
        if (user != nullptr) {
            uct_invoke_completion(user, status);
        }
        it = direct_ops_.erase(it);
        op_done(status);
        ++work;
    }
    return work;
}

bool Ep::can_go_direct() const
{
    return to_iface_ && !direct_failed_ && hub_->settings().direct_fallback;
}

ucs_status_t Ep::zcopy_direct(abi::Op op, const uct_iov_t *iov, size_t iovcnt,
                              uint64_t remote_addr, uct_rkey_t rkey,
                              uct_completion_t *comp)
{
    SendRequest req = {};
    req.comp        = comp;
    req.owner       = this;
    req.op          = op;
    req.remote_addr = remote_addr;
    if (!req.add_iov(iov, iovcnt)) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (req.nsegs == 0) {
        return UCS_OK;
    }
    const auto *key = reinterpret_cast<const uct_pxn_rkey_t*>(rkey);
    if (!fall_back(req, key->packed, key->length)) {
        transition(Event::kFailed, UCS_ERR_UNREACHABLE);
        return error_;
    }
    ++issued_;
    return UCS_INPROGRESS;
}

} // namespace uct
} // namespace pxn
