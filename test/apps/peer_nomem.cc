#include "peer_nomem.h"

#include "fail_alloc.h"

#include <chrono>
#include <vector>

namespace pxn_tools {

namespace {

/* A status as its number: one word. */
std::string code(ucs_status_t status)
{
    return std::to_string(static_cast<int>(status));
}

struct Watched {
    uct_completion_t comp;
    bool             done;
};

void watched_done(uct_completion_t *comp)
{
    ucs_container_of(comp, Watched, comp)->done = true;
}

/* Progress until `until()` or `ms` passed. */
template <typename Until> void progress_for(Peer &p, int ms, Until &&until)
{
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(ms);
    while (!until() && (std::chrono::steady_clock::now() < end)) {
        progress(p);
    }
}

/* Runs `call` with the nth allocation armed: its result, and whether the
 * armed allocation was reached. */
template <typename Call> auto armed(unsigned long nth, bool *fired, Call &&call)
{
    fail_alloc_arm(nth);
    auto result = call();
    *fired      = fail_alloc_disarm();
    return result;
}

std::string put_zcopy(Peer &p, unsigned long nth, uint64_t raddr,
                      uct_rkey_t rkey, size_t bytes)
{
    Watched w        = {{watched_done, 1, UCS_OK}, false};
    uct_iov_t iov    = {p.cur->data(), bytes, p.cur->memh(), 0, 1};
    bool fired       = false;
    const auto status = armed(nth, &fired, [&] {
        return uct_ep_put_zcopy(p.ep, &iov, 1, raddr, rkey, &w.comp);
    });
    progress_for(p, (status == UCS_INPROGRESS) ? 10000 : 100,
                 [&] { return w.done; });
    return "nomem " + code(status) + " " +
           (fired ? "1" : "0") + " comp " +
           (w.done ? code(w.comp.status) : "none");
}

std::string pending(Peer &p, uint64_t raddr, uct_rkey_t rkey, unsigned max)
{
    Watched w     = {{watched_done, 1, UCS_OK}, false};
    uct_iov_t iov = {p.cur->data(), 1, p.cur->memh(), 0, 1};
    if (uct_ep_put_zcopy(p.ep, &iov, 1, raddr, rkey, &w.comp) != UCS_INPROGRESS) {
        return "err put";
    }
    uct_ep_fence(p.ep, 0);
    std::vector<uct_pending_req_t> reqs(max + 1);
    unsigned refused        = 0;
    ucs_status_t refusal    = UCS_OK;
    unsigned added          = 0;
    for (unsigned i = 0; (i < max) && (refused == 0); ++i) {
        reqs[i].func = [](uct_pending_req_t*) { return UCS_OK; };
        bool fired   = false;
        const ucs_status_t status = armed(1, &fired, [&] {
            return uct_ep_pending_add(p.ep, &reqs[i], 0);
        });
        if (status == UCS_OK) {
            ++added;
        } else {
            refused = i + 1;
            refusal = status;
        }
    }
    reqs[max].func = [](uct_pending_req_t*) { return UCS_OK; };
    const ucs_status_t again = uct_ep_pending_add(p.ep, &reqs[max], 0);
    added += (again == UCS_OK);
    unsigned purged = 0;
    uct_ep_pending_purge(p.ep, [](uct_pending_req_t*, void *arg) {
        ++*static_cast<unsigned*>(arg);
    }, &purged);
    progress_for(p, 10000, [&] { return w.done; });
    return "pending " + std::to_string(refused) + " " +
           code(refusal) + " added " + std::to_string(added) +
           " purged " + std::to_string(purged) + " again " +
           code(again);
}

ucs_status_t open_close_iface(Peer &p, unsigned long nth, bool *fired)
{
    uct_iface_config_t *config;
    ucs_status_t status = uct_md_iface_config_read(p.md, p.tl_name.c_str(),
                                                   NULL, NULL, &config);
    if (status != UCS_OK) {
        return status;
    }
    uct_iface_params_t params   = {};
    params.field_mask           = UCT_IFACE_PARAM_FIELD_OPEN_MODE |
                                  UCT_IFACE_PARAM_FIELD_DEVICE;
    params.open_mode            = UCT_IFACE_OPEN_MODE_DEVICE;
    params.mode.device.tl_name  = p.tl_name.c_str();
    params.mode.device.dev_name = p.dev.c_str();
    uct_iface_h iface = nullptr;
    status = armed(nth, fired, [&] {
        return uct_iface_open(p.md, p.worker, &params, config, &iface);
    });
    uct_config_release(config);
    if (status == UCS_OK) {
        uct_iface_close(iface);
    }
    return status;
}

} // namespace

std::string nomem_command(Peer &p, std::istringstream &in)
{
    std::string what;
    in >> what;
    if (what == "iface") {
        unsigned long nth = 0;
        bool fired = false, unused = false;
        if (!(in >> nth)) {
            return "err bad arguments";
        }
        const ucs_status_t status = open_close_iface(p, nth, &fired);
        const ucs_status_t again  = open_close_iface(p, 0, &unused);
        return "nomem " + code(status) + " " +
               (fired ? "1" : "0") + " again " + code(again);
    }
    if (p.ep == nullptr) {
        return "err no ep";
    }
    unsigned long nth = 0;
    uint64_t raddr    = 0;
    std::string rkey;
    size_t count      = 0;
    if ((what == "put_zcopy") && (in >> nth >> raddr >> rkey >> count) &&
        (count <= p.cur->size())) {
        return put_zcopy(p, nth, raddr, unpack_rkey(p, rkey), count);
    }
    if ((what == "pending") && (in >> raddr >> rkey >> count)) {
        return pending(p, raddr, unpack_rkey(p, rkey),
                       static_cast<unsigned>(count));
    }
    return "err bad arguments";
}

} // namespace pxn_tools
