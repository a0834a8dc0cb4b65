#include "fake_net.h"

extern "C" {
#include <uct/base/uct_iface.h>
}

#include <algorithm>
#include <cstring>

namespace pxn_test {

namespace {

constexpr size_t kAddrLen = 8;
/* A packed key: magic | region index. */
constexpr uint32_t kKeyMagic = 0x4b46414b; /* "KAFK" */

pxn::Bytes u64_bytes(uint64_t v)
{
    pxn::Bytes b(kAddrLen);
    memcpy(b.data(), &v, kAddrLen);
    return b;
}

} // namespace

FakeNet::FakeNet(ConnectMode mode, uint64_t id) : id_(id)
{
    tl_name_ = "fake";
    device_  = "fake0";
    mode_    = mode;
    attr_.cap.flags = UCT_IFACE_FLAG_PUT_ZCOPY | UCT_IFACE_FLAG_GET_ZCOPY |
                      ((mode == ConnectMode::kIface) ?
                       UCT_IFACE_FLAG_CONNECT_TO_IFACE : UCT_IFACE_FLAG_CONNECT_TO_EP);
    attr_.cap.put.max_zcopy       = 1ul << 30;
    attr_.cap.put.max_iov         = 1;
    attr_.cap.put.opt_zcopy_align = 1;
    attr_.cap.get.max_zcopy       = 1ul << 30;
    attr_.cap.get.max_iov         = 1;
    attr_.device_addr_len         = kAddrLen;
    attr_.iface_addr_len          = (mode == ConnectMode::kIface) ? kAddrLen : 0;
    attr_.ep_addr_len             = (mode != ConnectMode::kIface) ? kAddrLen : 0;
    if (mode == ConnectMode::kWired) {
        /* the wiring iface: to-iface, active messages */
        wire_tl_                    = "fake";
        wire_attr_.cap.flags        = UCT_IFACE_FLAG_CONNECT_TO_IFACE |
                                      UCT_IFACE_FLAG_AM_BCOPY;
        wire_attr_.cap.am.max_bcopy = 4096;
        wire_attr_.device_addr_len  = kAddrLen;
        wire_attr_.iface_addr_len   = kAddrLen;
    }
}

ucs_status_t FakeNet::am_send(uct_ep_h, const void *header,
                              size_t header_length, const void *payload,
                              size_t length)
{
    if (am_send_status_ != UCS_OK) {
        return am_send_status_;
    }
    const auto *h = static_cast<const uint8_t*>(header);
    const auto *p = static_cast<const uint8_t*>(payload);
    pxn::Bytes frame(h, h + header_length);
    if (length != 0) {
        frame.insert(frame.end(), p, p + length);
    }
    frames_.push_back(std::move(frame));
    return UCS_OK;
}

pxn::Bytes FakeNet::register_remote(void *base, size_t length)
{
    regions_.push_back({static_cast<uint8_t*>(base), length});
    pxn::Bytes key(8);
    const uint32_t index = static_cast<uint32_t>(regions_.size() - 1);
    memcpy(key.data(), &kKeyMagic, 4);
    memcpy(key.data() + 4, &index, 4);
    return key;
}

pxn::Bytes FakeNet::target_iface(uint64_t index)
{
    return u64_bytes(0x7a00000000000000ull | index);
}

pxn::Bytes FakeNet::device_address() const
{
    return u64_bytes(0xde00000000000000ull | id_);
}

pxn::Bytes FakeNet::iface_address() const
{
    return u64_bytes(0x1f00000000000000ull | id_);
}

ucs_status_t FakeNet::ep_create_to_iface(const uint8_t *, const uint8_t *,
                                         uct_ep_h *ep)
{
    if (ep_create_status_ != UCS_OK) {
        return ep_create_status_;
    }
    eps_.emplace_back(new FakeEp());
    eps_.back()->connected = true;
    ++stats_.eps_created;
    *ep = reinterpret_cast<uct_ep_h>(eps_.back().get());
    return UCS_OK;
}

ucs_status_t FakeNet::ep_create_unconnected(uct_ep_h *ep, pxn::Bytes *addr)
{
    if (ep_create_status_ != UCS_OK) {
        return ep_create_status_;
    }
    eps_.emplace_back(new FakeEp());
    ++stats_.eps_created;
    *ep   = reinterpret_cast<uct_ep_h>(eps_.back().get());
    *addr = u64_bytes(reinterpret_cast<uint64_t>(*ep));
    return UCS_OK;
}

ucs_status_t FakeNet::ep_connect(uct_ep_h ep, const uint8_t *, const uint8_t *)
{
    reinterpret_cast<FakeEp*>(ep)->connected = true;
    return UCS_OK;
}

void FakeNet::ep_destroy(uct_ep_h tl_ep)
{
    FakeEp *ep = reinterpret_cast<FakeEp*>(tl_ep);
    /* what is still in flight on it ends as canceled, in order */
    for (Pending &p : pending_) {
        if (p.ep == ep) {
            p.ep     = nullptr;
            p.status = UCS_ERR_CANCELED;
        }
    }
    eps_.erase(std::remove_if(eps_.begin(), eps_.end(),
                              [&](const auto &e) { return e.get() == ep; }),
               eps_.end());
    ++stats_.eps_destroyed;
}

ucs_status_t FakeNet::copy(void *buffer, size_t length, uint64_t remote_addr,
                           uct_rkey_t rkey, bool put)
{
    const uint64_t index = rkey;
    uint8_t *remote      = reinterpret_cast<uint8_t*>(remote_addr);
    if ((index >= regions_.size()) || (remote < regions_[index].base) ||
        (remote + length > regions_[index].base + regions_[index].length)) {
        ++stats_.protection_errors;
        return UCS_ERR_IO_ERROR;
    }
    if (put) {
        memcpy(remote, buffer, length);
        ++stats_.puts;
    } else {
        memcpy(buffer, remote, length);
        ++stats_.gets;
    }
    stats_.bytes += length;
    return UCS_OK;
}

ucs_status_t FakeNet::transfer(uct_ep_h tl_ep, const uct_iov_t *iov,
                               uint64_t remote_addr, uct_rkey_t rkey,
                               uct_completion_t *comp, bool put)
{
    FakeEp *ep = reinterpret_cast<FakeEp*>(tl_ep);
    if (!ep->connected) {
        return UCS_ERR_NOT_CONNECTED;
    }
    const ucs_status_t status = (fail_status_ != UCS_OK) ? fail_status_ :
                                copy(iov->buffer, iov->length, remote_addr,
                                     rkey, put);
    pending_.push_back({comp, ep, status});
    return UCS_INPROGRESS;
}

ucs_status_t FakeNet::sgl_zcopy(bool get, uct_ep_h tl_ep, const Sgl &sgl,
                                uct_completion_t *comp)
{
    FakeEp *ep = reinterpret_cast<FakeEp*>(tl_ep);
    if ((sgl.count == 0) || (sgl.count > max_sgl(get))) {
        return UCS_ERR_INVALID_PARAM;
    }
    if (!ep->connected) {
        return UCS_ERR_NOT_CONNECTED;
    }
    ucs_status_t status = fail_status_;
    for (size_t i = 0; (i < sgl.count) && (status == UCS_OK); ++i) {
        status = copy(sgl.buffers[i], sgl.lengths[i], sgl.remote_addrs[i],
                      sgl.rkeys[i], !get);
    }
    ++stats_.sgl_ops;
    pending_.push_back({comp, ep, status});
    return UCS_INPROGRESS;
}

ucs_status_t FakeNet::put_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                                uint64_t remote_addr, uct_rkey_t rkey,
                                uct_completion_t *comp)
{
    return transfer(ep, iov, remote_addr, rkey, comp, true);
}

ucs_status_t FakeNet::get_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                                uint64_t remote_addr, uct_rkey_t rkey,
                                uct_completion_t *comp)
{
    return transfer(ep, iov, remote_addr, rkey, comp, false);
}

ucs_status_t FakeNet::rkey_unpack(const uint8_t *packed, size_t length,
                                  uct_rkey_bundle_t *rkey)
{
    uint32_t magic, index;
    if (length < 8) {
        return UCS_ERR_INVALID_PARAM;
    }
    memcpy(&magic, packed, 4);
    memcpy(&index, packed + 4, 4);
    if ((magic != kKeyMagic) || (index >= regions_.size())) {
        return UCS_ERR_INVALID_PARAM;
    }
    rkey->rkey   = index;
    rkey->handle = nullptr;
    rkey->type   = nullptr;
    ++stats_.rkeys_unpacked;
    return UCS_OK;
}

void FakeNet::rkey_release(uct_rkey_bundle_t *)
{
    ++stats_.rkeys_released;
}

ucs_status_t FakeNet::mem_reg(void *, size_t, uct_mem_h *memh)
{
    *memh = reinterpret_cast<uct_mem_h>(this);
    return UCS_OK;
}

void FakeNet::mem_dereg(uct_mem_h)
{
}

void FakeNet::release_all()
{
    const bool held = hold_;
    hold_           = false;
    progress();
    hold_ = held;
}

unsigned FakeNet::progress()
{
    if (hold_) {
        return 0;
    }
    unsigned done = 0;
    while (!pending_.empty()) {
        const Pending p = pending_.front();
        pending_.pop_front();
        uct_invoke_completion(p.comp, p.status);
        ++done;
    }
    return done;
}

} // namespace pxn_test
