#include "pxn_net.h"

#include "pxn_compat.h"

extern "C" {
#include <ucs/sys/compiler.h> /* UCX's config.h first: ENABLE_STATS */
}

#include <ucs/async/async_fwd.h>
#include <ucs/debug/log_def.h>
#include <ucs/stats/stats_fwd.h>

#include <cstring>
#include <sys/epoll.h>
#include <unistd.h>

namespace pxn {
namespace uct {

namespace {

ucs_status_t net_error_handler(void *arg, uct_ep_h ep, ucs_status_t status)
{
    /* Failed inner operations complete with an error status; the relay
     * reports them to the sender. But an ep with nothing in flight (a
     * relay's AM flow waiting for credit from a target that died) has no
     * operation to fail: the relay hears of it here. Keep the iface
     * alive. */
    ucs_debug("pxn: inner ep %p failed: %s", ep, ucs_status_string(status));
    static_cast<UctNet*>(arg)->ep_failed(ep, status);
    return UCS_OK;
}

/* pxn's one inner AM id: the private worker carries nothing else */
constexpr uint8_t kInnerAmId = 0;

struct AmPack {
    const void *header;
    size_t      header_length;
    const void *payload;
    size_t      length;
};

size_t am_pack(void *dest, void *arg)
{
    const auto *pack = static_cast<const AmPack*>(arg);
    auto *out = static_cast<uint8_t*>(dest);
    std::memcpy(out, pack->header, pack->header_length);
    if (pack->length != 0) {
        std::memcpy(out + pack->header_length, pack->payload, pack->length);
    }
    return pack->header_length + pack->length;
}

} // namespace

UctNet::~UctNet()
{
    close_event_fd();
    for (uct_iface_h iface : {iface_, wire_iface_}) {
        if (iface != nullptr) {
            uct_iface_close(iface);
        }
    }
    if (worker_ != nullptr) {
        uct_worker_destroy(worker_);
    }
    if (async_ != nullptr) {
        ucs_async_context_destroy(async_);
    }
}

ucs_status_t UctNet::open_iface(const std::string &tl_name, uct_iface_h *iface,
                                uct_iface_attr_t *attr)
{
    uct_iface_config_t *config;
    ucs_status_t status = uct_md_iface_config_read(md_, tl_name.c_str(), NULL,
                                                   NULL, &config);
    if (status != UCS_OK) {
        ucs_error("pxn: failed to read %s configuration: %s", tl_name.c_str(),
                  ucs_status_string(status));
        return status;
    }
    /* tcp connects blocking by default: a relay must never wait on the
     * network inside its engine's lock. Other transports have no such
     * setting, and the error is the answer. */
    uct_config_modify(config, "CONN_NB", "y");
    /* tcp's active messages are at most a send segment (8 KiB by default),
     * less than UCP's 8 KiB eager messages with their headers: pxn's frames
     * would split them in two through the relay. Unless the user sized it,
     * a send segment as large as a receive segment (64 KiB by default), the
     * largest a peer with the same settings takes. */
    char rx_seg[32];
    if ((tl_name == "tcp") && (getenv("UCX_TCP_TX_SEG_SIZE") == nullptr) &&
        (uct_config_get(config, "RX_SEG_SIZE", rx_seg, sizeof(rx_seg)) == UCS_OK)) {
        uct_config_modify(config, "TX_SEG_SIZE", rx_seg);
    }
    uct_iface_params_t params   = {};
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_ARG |
                                  UCT_IFACE_PARAM_FIELD_ERR_HANDLER_FLAGS;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = tl_name.c_str();
    params.mode.device.dev_name = device_.c_str();
    params.err_handler          = net_error_handler;
    params.err_handler_arg      = this;
    params.err_handler_flags    = 0;
#ifdef ENABLE_STATS
    /* With statistics on, an iface without a parent node fails to open. */
    params.field_mask          |= UCT_IFACE_PARAM_FIELD_STATS_ROOT;
    params.stats_root           = ucs_stats_get_root();
#endif
    status = uct_iface_open(md_, worker_, &params, config, iface);
    uct_config_release(config);
    if (status != UCS_OK) {
        ucs_error("pxn: failed to open inner %s on %s: %s", tl_name.c_str(),
                  device_.c_str(), ucs_status_string(status));
        return status;
    }
    status = uct_iface_query(*iface, attr);
    if (status != UCS_OK) {
        ucs_error("pxn: failed to query inner %s/%s: %s", tl_name.c_str(),
                  device_.c_str(), ucs_status_string(status));
    }
    return status;
}

ucs_status_t UctNet::open_events(uct_iface_h iface, const uct_iface_attr_t &attr,
                                 unsigned *events)
{
    *events = 0;
    int fd  = -1;
    /* cuda_ipc's arm puts a host function into each copy stream with work
     * in flight (cuLaunchHostFunc): every later copy on that stream waits
     * for the host thread to run it, so a relay that slept on that fd
     * between pieces would hold back its own next copies. Its completions
     * are polled instead (the engine naps, relay-engine.md). */
    if (!(attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_FD) ||
        (tl_name_ == "cuda_ipc") ||
        (uct_iface_event_fd_get(iface, &fd) != UCS_OK)) {
        return UCS_ERR_UNSUPPORTED;
    }
    *events = ((attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_RECV) ?
               UCT_EVENT_RECV : 0) |
              ((attr.cap.event_flags & UCT_IFACE_FLAG_EVENT_SEND_COMP) ?
               UCT_EVENT_SEND_COMP : 0);
    if (wire_iface_ == nullptr) {
        event_fd_ = fd;
        return UCS_OK;
    }
    /* two ifaces: one fd for both */
    if ((event_fd_ < 0) && ((event_fd_ = epoll_create1(EPOLL_CLOEXEC)) < 0)) {
        return UCS_ERR_IO_ERROR;
    }
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    return (epoll_ctl(event_fd_, EPOLL_CTL_ADD, fd, &ev) == 0) ?
           UCS_OK : UCS_ERR_IO_ERROR;
}

ucs_status_t UctNet::open_wire(const std::string &tl_name, std::string *why)
{
    /* the to-iface transports with active messages beside each connect-to-ep
     * one, on the same device: what reaches a peer that the ep-to-ep one
     * reaches too */
    std::vector<std::string> candidates;
    if (tl_name == "tcp") {
        candidates = {"tcp"};
    } else if (tl_name == "rc_mlx5") {
        candidates = {"dc_mlx5", "ud_mlx5", "ud_verbs"};
    } else if (tl_name == "rc_verbs") {
        candidates = {"ud_verbs"};
    }
    const Bytes dev = device_address();
    std::string tried; /* "tl: why not", for the log */
    for (const std::string &wire : candidates) {
        uct_iface_h iface;
        uct_iface_attr_t attr;
        if (!md_offers(md_, wire, device_)) {
            tried += " " + wire + ": not offered;";
            continue;
        }
        if (open_iface(wire, &iface, &attr) != UCS_OK) {
            tried += " " + wire + ": did not open;";
            continue;
        }
        Bytes wire_dev(attr.device_addr_len);
        uct_iface_get_device_address(iface, reinterpret_cast<uct_device_addr_t*>(
                                                    wire_dev.data()));
        const char *reason = !(attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) ||
                             !(attr.cap.flags & UCT_IFACE_FLAG_AM_BCOPY) ?
                             "no to-iface active messages" :
                             (wire_dev != dev) ?
                             "another device address (e.g. another path MTU)" :
                             nullptr;
        if (reason != nullptr) {
            tried += " " + wire + ": " + reason + ";";
            uct_iface_close(iface);
            continue;
        }
        wire_iface_ = iface;
        wire_attr_  = attr;
        wire_tl_    = wire;
        return UCS_OK;
    }
    if (tried.empty()) {
        tried = " none known;";
    }
    tried.pop_back();
    *why = "no transport can wire inner " + tl_name + " on " + device_ +
           " (tried:" + tried + ")";
    return UCS_ERR_UNSUPPORTED;
}

ucs_status_t UctNet::open(const InnerMd &md, const std::string &tl_name,
                          const std::string &device, ConnectModel model,
                          std::unique_ptr<Net> *net_p, std::string *error)
{
    std::unique_ptr<UctNet> net(new UctNet());
    net->tl_name_   = tl_name;
    net->device_    = device;
    net->md_        = md.md();
    net->md_name_   = md.info().md_name;
    net->component_ = md.component();
    net->md_flags_  = md.attr().cap.flags;

    ucs_status_t status = ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK,
                                                   &net->async_);
    if (status != UCS_OK) {
        ucs_error("pxn: failed to create async context: %s",
                  ucs_status_string(status));
        return status;
    }
    status = uct_worker_create(net->async_, UCS_THREAD_MODE_SERIALIZED,
                               &net->worker_);
    if (status != UCS_OK) {
        ucs_error("pxn: failed to create inner worker: %s",
                  ucs_status_string(status));
        return status;
    }
    status = net->open_iface(tl_name, &net->iface_, &net->attr_);
    if (status != UCS_OK) {
        return status;
    }

    const uint64_t flags = net->attr_.cap.flags;
    const bool to_iface  = flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE;
    const bool to_ep     = flags & UCT_IFACE_FLAG_CONNECT_TO_EP;
    if (!(flags & UCT_IFACE_FLAG_PUT_ZCOPY) || !(to_iface || to_ep)) {
        ucs_error("pxn: inner %s/%s has no put_zcopy or no connection model",
                  tl_name.c_str(), device.c_str());
        return UCS_ERR_UNSUPPORTED;
    }
    /* wired where asked, and by default where the inner transport connects
     * only ep to ep (rc): UCP then reaches a cross-rail peer through pxn
     * alone, wireup included; without a wiring iface, auto is ep-to-ep.
     * An inner transport that connects to ifaces needs no wiring: asked to
     * wire, it is to-iface (what wired gives UCP too). */
    const bool asked = (model == ConnectModel::kWired) && to_ep;
    const bool wire  = asked || ((model == ConnectModel::kAuto) && to_ep && !to_iface);
    std::string why;
    if (wire && (net->open_wire(tl_name, &why) == UCS_OK)) {
        net->mode_ = ConnectMode::kWired;
    } else if (asked) {
        *error = "pxn: UCX_PXN_NET_CONNECT=wired: " + why;
        return UCS_ERR_UNSUPPORTED;
    } else {
        if (wire) {
            ucs_debug("pxn: %s: ep to ep", why.c_str());
        }
        net->mode_ = (to_ep && ((model == ConnectModel::kEp) || !to_iface)) ?
                     ConnectMode::kEp : ConnectMode::kIface;
    }

    if (net->open_events(net->iface_, net->attr_, &net->events_) != UCS_OK) {
        net->close_event_fd();
    } else if ((net->wire_iface_ != nullptr) &&
               (net->open_events(net->wire_iface_, net->wire_attr_,
                                 &net->wire_events_) != UCS_OK)) {
        net->close_event_fd(); /* both ifaces are polled */
    }
    uct_pxn_compat_sgl_limits(net->iface_, &net->max_put_sgl_,
                              &net->max_get_sgl_);
    if (!net->has_get()) {
        net->max_get_sgl_ = 0;
    }
    if (net->max_am() > 0) {
        /* frames arrive where targets are reached (wired: the wiring iface) */
        status = uct_iface_set_am_handler(net->to_iface_iface(), kInnerAmId,
                                          am_handler, net.get(), 0 /* sync */);
        if (status != UCS_OK) {
            ucs_error("pxn: inner %s/%s refused an AM handler: %s",
                      tl_name.c_str(), device.c_str(),
                      ucs_status_string(status));
            return status;
        }
    }
    for (uct_iface_h iface : {net->iface_, net->wire_iface_}) {
        if (iface != nullptr) {
            uct_iface_progress_enable(iface, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
        }
    }
    *net_p = std::move(net);
    return UCS_OK;
}

ucs_status_t UctNet::sgl_zcopy(bool get, uct_ep_h ep, const Sgl &sgl,
                               uct_completion_t *comp)
{
    return uct_pxn_compat_sgl_zcopy(get, ep, sgl.buffers, sgl.lengths,
                                    sgl.memhs, sgl.remote_addrs, sgl.rkeys,
                                    sgl.count, comp);
}

ucs_status_t UctNet::am_handler(void *arg, void *data, size_t length,
                                unsigned)
{
    static_cast<UctNet*>(arg)->deliver_am(data, length);
    return UCS_OK; /* the receiver copied what it keeps */
}

ucs_status_t UctNet::am_send(uct_ep_h ep, const void *header,
                             size_t header_length, const void *payload,
                             size_t length)
{
    if (header_length + length > max_am()) {
        return UCS_ERR_EXCEEDS_LIMIT;
    }
    AmPack pack{header, header_length, payload, length};
    const ssize_t sent = uct_ep_am_bcopy(ep, kInnerAmId, am_pack, &pack, 0);
    return (sent >= 0) ? UCS_OK : static_cast<ucs_status_t>(sent);
}

Bytes UctNet::device_address() const
{
    Bytes addr(attr_.device_addr_len);
    uct_iface_get_device_address(iface_,
                                 reinterpret_cast<uct_device_addr_t*>(addr.data()));
    return addr;
}

Bytes UctNet::iface_address() const
{
    Bytes addr(iface_addr_len());
    if (!addr.empty()) {
        uct_iface_get_address(to_iface_iface(),
                              reinterpret_cast<uct_iface_addr_t*>(addr.data()));
    }
    return addr;
}

ucs_status_t UctNet::ep_create_to_iface(const uint8_t *dev_addr,
                                     const uint8_t *iface_addr, uct_ep_h *ep)
{
    uct_ep_params_t params = {};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR;
    params.iface      = to_iface_iface();
    params.dev_addr   = reinterpret_cast<const uct_device_addr_t*>(dev_addr);
    params.iface_addr = reinterpret_cast<const uct_iface_addr_t*>(iface_addr);
    return uct_ep_create(&params, ep);
}

ucs_status_t UctNet::ep_create_unconnected(uct_ep_h *ep, Bytes *addr)
{
    uct_ep_params_t params = {};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
    params.iface      = iface_;
    ucs_status_t status = uct_ep_create(&params, ep);
    if (status != UCS_OK) {
        return status;
    }
    addr->resize(attr_.ep_addr_len);
    status = uct_ep_get_address(*ep, reinterpret_cast<uct_ep_addr_t*>(addr->data()));
    if (status != UCS_OK) {
        uct_ep_destroy(*ep);
        *ep = nullptr;
    }
    return status;
}

ucs_status_t UctNet::ep_connect(uct_ep_h ep, const uint8_t *dev_addr,
                             const uint8_t *ep_addr)
{
    return uct_ep_connect_to_ep(ep,
                                reinterpret_cast<const uct_device_addr_t*>(dev_addr),
                                reinterpret_cast<const uct_ep_addr_t*>(ep_addr));
}

bool UctNet::is_reachable(const uint8_t *dev_addr, const uint8_t *iface_addr) const
{
    return uct_iface_is_reachable(
            to_iface_iface(), reinterpret_cast<const uct_device_addr_t*>(dev_addr),
            reinterpret_cast<const uct_iface_addr_t*>(iface_addr));
}

ucs_status_t UctNet::arm()
{
    if (event_fd_ < 0) {
        return UCS_ERR_UNSUPPORTED;
    }
    ucs_status_t status = uct_iface_event_arm(iface_, events_);
    if ((status == UCS_OK) && (wire_iface_ != nullptr)) {
        status = uct_iface_event_arm(wire_iface_, wire_events_);
    }
    return status;
}

void UctNet::close_event_fd()
{
    if ((wire_iface_ != nullptr) && (event_fd_ >= 0)) {
        close(event_fd_); /* the epoll fd; the ifaces' own are theirs */
    }
    event_fd_ = -1;
}

ucs_status_t UctNet::rkey_unpack(const uint8_t *packed, size_t length,
                                 uct_rkey_bundle_t *rkey)
{
    if ((length == 0) && !(md_flags_ & UCT_MD_FLAG_NEED_RKEY)) {
        /* Such a component may not unpack at all (UCX 1.22's tcp, cma). */
        rkey->rkey   = UCT_INVALID_RKEY;
        rkey->handle = nullptr;
        rkey->type   = nullptr;
        return UCS_OK;
    }
    return uct_rkey_unpack(component_, packed, rkey);
}

void UctNet::rkey_release(uct_rkey_bundle_t *rkey)
{
    if (rkey->type != nullptr) { /* uct_rkey_unpack() sets it */
        uct_rkey_release(component_, rkey);
    }
}

ucs_status_t UctNet::mem_reg(void *address, size_t length, uct_mem_h *memh)
{
    if (!(md_flags_ & UCT_MD_FLAG_REG)) {
        *memh = UCT_MEM_HANDLE_NULL; /* it reaches the memory without one */
        return UCS_OK;
    }
    ucs_status_t status = uct_md_mem_reg(md_, address, length,
                                         UCT_MD_MEM_ACCESS_ALL, memh);
    if (status != UCS_OK) {
        ucs_error("pxn: failed to register %zu bytes at %p with inner md %s: %s",
                  length, address, md_name_.c_str(), ucs_status_string(status));
        *memh = UCT_MEM_HANDLE_NULL;
    }
    return status;
}

void UctNet::mem_dereg(uct_mem_h memh)
{
    if (memh != UCT_MEM_HANDLE_NULL) {
        uct_md_mem_dereg(md_, memh);
    }
}

} // namespace uct
} // namespace pxn
