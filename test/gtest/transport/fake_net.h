/*
 * An inner transport without a network, for the in-process tests of the
 * relay and the sender (pxn_net.h's Net): "remote" memory is this
 * process's memory, reached through remote keys that name registered
 * ranges, so a put or get outside them fails like a real transport's
 * protection error would.
 *
 * Behaviour a test can set: completions held until release() (pieces in
 * flight), a status every operation fails with, ep creation failing, the
 * connection model (kWired: eps of both kinds, active-message frames kept
 * for the test to read, as the wiring iface would send them). Counters tell what the relay did (eps created and
 * destroyed, keys unpacked and released, operations posted).
 *
 * Completions are delivered by progress(), in posting order, like a real
 * transport's; ep_destroy() completes what is still in flight on the ep
 * with UCS_ERR_CANCELED.
 */
#ifndef PXN_TEST_TRANSPORT_FAKE_NET_H_
#define PXN_TEST_TRANSPORT_FAKE_NET_H_

#include <uct/pxn/pxn_net.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

namespace pxn_test {

class FakeNet final : public pxn::uct::Net {
public:
    struct Stats {
        unsigned eps_created    = 0;
        unsigned eps_destroyed  = 0;
        unsigned rkeys_unpacked = 0;
        unsigned rkeys_released = 0;
        uint64_t puts = 0, gets = 0, bytes = 0; /* per element of an SGL */
        uint64_t sgl_ops = 0;  /* scatter-gather operations */
        unsigned protection_errors = 0; /* an op outside its rkey's range */
    };

    explicit FakeNet(ConnectMode mode = ConnectMode::kIface, uint64_t id = 1);

    /* --- the test's controls ------------------------------------------- */
    /* A remote key over [base, base + length): its packed form. */
    pxn::Bytes register_remote(void *base, size_t length);
    /* Completions wait for release() while held. */
    void hold(bool held) { hold_ = held; }
    void release_all();
    void fail_ops(ucs_status_t status) { fail_status_ = status; }
    void fail_ep_create(ucs_status_t status) { ep_create_status_ = status; }
    /* Scatter-gather operations of up to this many elements (0: none). */
    void offer_sgl(size_t max_put, size_t max_get)
    {
        max_put_sgl_ = max_put;
        max_get_sgl_ = max_get;
    }
    /* The inner transport declares its newest live ep failed, as its
     * iface's error handler would (Net::ep_failed). */
    void fail_newest_ep(ucs_status_t status)
    {
        ep_failed(reinterpret_cast<uct_ep_h>(eps_.back().get()), status);
    }
    size_t inflight() const { return pending_.size(); }
    /* Frames am_send() took, oldest first; am_send() answers `status`
     * instead while it is not UCS_OK (nothing taken). */
    const std::vector<pxn::Bytes> &frames() const { return frames_; }
    void fail_am_send(ucs_status_t status) { am_send_status_ = status; }
    /* Whether `ep` (one of this net's) was connected (ep_connect). */
    static bool connected(uct_ep_h ep)
    {
        return reinterpret_cast<const FakeEp*>(ep)->connected;
    }
    const Stats &stats() const { return stats_; }
    /* An (iface) address of a fake target, distinct per index. */
    static pxn::Bytes target_iface(uint64_t index);
    pxn::Bytes device_addr() const { return device_address(); }

    /* --- Net ------------------------------------------------------------ */
    pxn::Bytes device_address() const override;
    pxn::Bytes iface_address() const override;
    bool is_reachable(const uint8_t *, const uint8_t *) const override
    {
        return true;
    }
    ucs_status_t ep_create_to_iface(const uint8_t *dev_addr,
                                    const uint8_t *iface_addr,
                                    uct_ep_h *ep) override;
    ucs_status_t ep_create_unconnected(uct_ep_h *ep, pxn::Bytes *addr) override;
    ucs_status_t ep_connect(uct_ep_h ep, const uint8_t *dev_addr,
                            const uint8_t *ep_addr) override;
    void         ep_destroy(uct_ep_h ep) override;
    ucs_status_t am_send(uct_ep_h ep, const void *header, size_t header_length,
                         const void *payload, size_t length) override;
    ucs_status_t put_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                           uint64_t remote_addr, uct_rkey_t rkey,
                           uct_completion_t *comp) override;
    ucs_status_t get_zcopy(uct_ep_h ep, const uct_iov_t *iov,
                           uint64_t remote_addr, uct_rkey_t rkey,
                           uct_completion_t *comp) override;
    ucs_status_t sgl_zcopy(bool get, uct_ep_h ep, const Sgl &sgl,
                           uct_completion_t *comp) override;
    ucs_status_t rkey_unpack(const uint8_t *packed, size_t length,
                             uct_rkey_bundle_t *rkey) override;
    void         rkey_release(uct_rkey_bundle_t *rkey) override;
    ucs_status_t mem_reg(void *address, size_t length, uct_mem_h *memh) override;
    void         mem_dereg(uct_mem_h memh) override;
    unsigned     progress() override;

private:
    struct Region {
        uint8_t *base;
        size_t   length;
    };
    struct FakeEp {
        bool connected = false;
    };
    struct Pending {
        uct_completion_t *comp;
        FakeEp           *ep;
        ucs_status_t      status;
    };

    /* One element: its status (the copy is done at once). */
    ucs_status_t copy(void *buffer, size_t length, uint64_t remote_addr,
                      uct_rkey_t rkey, bool put);
    ucs_status_t transfer(uct_ep_h ep, const uct_iov_t *iov,
                          uint64_t remote_addr, uct_rkey_t rkey,
                          uct_completion_t *comp, bool put);

    uint64_t                             id_;
    std::vector<Region>                  regions_;     /* index = key id */
    std::vector<std::unique_ptr<FakeEp>> eps_;
    std::deque<Pending>                  pending_;
    bool                                 hold_ = false;
    ucs_status_t                         fail_status_ = UCS_OK;
    ucs_status_t                         ep_create_status_ = UCS_OK;
    ucs_status_t                         am_send_status_ = UCS_OK;
    std::vector<pxn::Bytes>              frames_;
    Stats                                stats_;
};

} // namespace pxn_test

#endif
