#include "peer_lifecycle.h"

#include "peer_process.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace pxn_tools {

namespace {

std::string status_text(ucs_status_t status)
{
    return ucs_status_string(status);
}

/* In the child of `fork`: what its mode asks, then _exit. */
[[noreturn]] void forked_child(Peer &p, const std::string &mode)
{
    if (mode == "exit") {
        _exit(0);
    }
    const std::string md = p.md_name, tl = p.tl_name, dev = p.dev;
    close_peer(p);
    if (mode == "cleanup") {
        _exit(0);
    }
    Peer fresh;
    if (open_peer(fresh, md.c_str(), tl.c_str(), dev.c_str()) != 0) {
        _exit(1);
    }
    const char *group = getenv("UCX_PXN_GROUP");
    pxn::abi::ProcessCounters c;
    bool found = false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!found && (std::chrono::steady_clock::now() < end)) {
        found = read_counters(group ? group : "default", getpid(), &c);
        progress(fresh);
    }
    close_peer(fresh);
    _exit(found ? 0 : 2);
}

std::string cmd_fork(Peer &p, const std::string &mode)
{
    if ((mode != "exit") && (mode != "cleanup") && (mode != "fresh")) {
        return "err bad arguments";
    }
    const pid_t pid = fork();
    if (pid < 0) {
        return "err fork failed";
    }
    if (pid == 0) {
        forked_child(p, mode);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        return "err waitpid failed";
    }
    return "fork " + std::to_string(pid) + " " +
           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) :
                                              128 + WTERMSIG(status));
}

struct Counted {
    uct_completion_t comp;
    size_t          *canceled, *ok, *failed;
};

void counted_done(uct_completion_t *comp)
{
    auto *c = ucs_container_of(comp, Counted, comp);
    ++*((comp->status == UCS_ERR_CANCELED) ? c->canceled :
        (comp->status == UCS_OK) ? c->ok : c->failed);
}

std::string cmd_put_cancel(Peer &p, uint64_t raddr, uct_rkey_t rkey,
                           size_t bytes, size_t chunk)
{
    if ((p.ep == nullptr) || (chunk == 0) || (bytes > p.cur->size())) {
        return "err bad arguments";
    }
    size_t canceled = 0, ok = 0, failed = 0, posted = 0;
    std::vector<Counted> comps((bytes + chunk - 1) / chunk);
    ucs_status_t status = UCS_OK;
    for (size_t off = 0, i = 0; (off < bytes) && (status != UCS_ERR_CANCELED);
         off += chunk, ++i) {
        comps[i] = {{counted_done, 1, UCS_OK}, &canceled, &ok, &failed};
        uct_iov_t iov = {p.cur->data() + off, std::min(chunk, bytes - off),
                         p.cur->memh(), 0, 1};
        do {
            status = post_op([&] {
                return uct_ep_put_zcopy(p.ep, &iov, 1, raddr + off, rkey,
                                        &comps[i].comp);
            });
        } while ((status == UCS_ERR_NO_RESOURCE) && (progress(p), true));
        posted += (status == UCS_INPROGRESS);
        ok     += (status == UCS_OK);
        failed += UCS_STATUS_IS_ERR(status);
    }
    bool flushed = false;
    uct_completion_t flush = {[](uct_completion_t *c) { c->count = -1; }, 1,
                              UCS_OK};
    status = post_op([&] {
        return uct_ep_flush(p.ep, UCT_FLUSH_FLAG_CANCEL, &flush);
    });
    flushed = (status != UCS_INPROGRESS);
    while (!flushed || (canceled + failed + ok < posted)) {
        progress(p);
        flushed = flushed || (flush.count == -1);
    }
    uct_iov_t iov = {p.cur->data(), 1, p.cur->memh(), 0, 1};
    Counted after = {{counted_done, 1, UCS_OK}, &canceled, &ok, &failed};
    const ucs_status_t again = post_op([&] {
        return uct_ep_put_zcopy(p.ep, &iov, 1, raddr, rkey, &after.comp);
    });
    return "canceled " + std::to_string(canceled) + " ok " + std::to_string(ok) +
           " failed " + std::to_string(failed) + " after " + status_text(again);
}

std::string cmd_pending(Peer &p)
{
    if (p.ep == nullptr) {
        return "err no ep";
    }
    uct_pending_req_t req = {};
    req.func = [](uct_pending_req_t *) { return UCS_OK; };
    const ucs_status_t status = uct_ep_pending_add(p.ep, &req, 0);
    if (status == UCS_ERR_BUSY) {
        return "busy";
    }
    uct_ep_pending_purge(p.ep, nullptr, nullptr);
    return (status == UCS_OK) ? "added" : "err " + status_text(status);
}

size_t pack_nothing(void *, void *)
{
    return 0;
}

void unpack_nothing(void *, const void *, size_t)
{
}

std::string cmd_zero(Peer &p)
{
    if (p.ep == nullptr) {
        return "err no ep";
    }
    const uct_rkey_t none = UCT_INVALID_RKEY;
    uint8_t *buffer       = p.cur->data();
    uct_iov_t iov         = {buffer, 0, p.cur->memh(), 0, 1};
    size_t done           = 0;
    Op op                 = {{op_done, 1, UCS_OK}, &done};
    const ucs_status_t s1 = post_op([&] {
        return uct_ep_put_short(p.ep, buffer, 0, 0, none);
    });
    const ssize_t s2      = post_op([&] {
        return uct_ep_put_bcopy(p.ep, pack_nothing, nullptr, 0, none);
    });
    const ucs_status_t s3 = post_op([&] {
        return uct_ep_put_zcopy(p.ep, &iov, 1, 0, none, &op.comp);
    });
    const ucs_status_t s4 = post_op([&] {
        return uct_ep_get_bcopy(p.ep, unpack_nothing, nullptr, 0, 0, none,
                                &op.comp);
    });
    const ucs_status_t s5 = post_op([&] {
        return uct_ep_get_zcopy(p.ep, &iov, 1, 0, none, &op.comp);
    });
    return "zero " + status_text(s1) + "|" +
           ((s2 >= 0) ? std::to_string(s2) : status_text(ucs_status_t(s2))) +
           "|" + status_text(s3) + "|" + status_text(s4) + "|" + status_text(s5);
}

/* Lengths beyond what the iface advertises: refused in the call, nothing
 * moves. */
std::string cmd_oversize(Peer &p, uint64_t raddr, uct_rkey_t rkey)
{
    const uct_iface_attr_t &a = p.attr;
    const size_t iovcnt       = a.cap.put.max_iov + 1;
    if ((p.ep == nullptr) || (rkey == UCT_INVALID_RKEY) ||
        (p.cur->size() < std::max(a.cap.put.max_short, a.cap.get.max_bcopy) + 1) ||
        (p.cur->size() < iovcnt)) {
        return "err no ep, key or room";
    }
    uint8_t *buffer = p.cur->data();
    std::vector<uct_iov_t> iov(iovcnt, uct_iov_t{buffer, 1, p.cur->memh(), 0, 1});
    for (size_t i = 0; i < iovcnt; ++i) {
        iov[i].buffer = buffer + i;
    }
    size_t done = 0;
    Op op       = {{op_done, 1, UCS_OK}, &done};
    const ucs_status_t s1 = post_op([&] {
        return uct_ep_put_short(p.ep, buffer, a.cap.put.max_short + 1, raddr, rkey);
    });
    const ucs_status_t s2 = post_op([&] {
        return uct_ep_get_bcopy(p.ep, unpack_nothing, nullptr,
                                a.cap.get.max_bcopy + 1, raddr, rkey, &op.comp);
    });
    const ucs_status_t s3 = post_op([&] {
        return uct_ep_put_zcopy(p.ep, iov.data(), iovcnt, raddr, rkey, &op.comp);
    });
    return "oversize " + status_text(s1) + "|" + status_text(s2) + "|" +
           status_text(s3);
}

std::string cmd_iface_flush(Peer &p, int ms)
{
    uct_completion_t comp = {[](uct_completion_t *c) { c->count = -1; }, 1,
                             UCS_OK};
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(ms);
    ucs_status_t status;
    while ((status = uct_iface_flush(p.iface, 0, &comp)) == UCS_ERR_NO_RESOURCE) {
        progress(p);
        if (std::chrono::steady_clock::now() > end) {
            return "timeout";
        }
    }
    if (status == UCS_INPROGRESS) {
        while (comp.count != -1) {
            progress(p);
            if (std::chrono::steady_clock::now() > end) {
                return "timeout";
            }
        }
        status = comp.status;
    }
    return (status == UCS_OK) ? "ok" : "err " + status_text(status);
}

} // namespace

std::string lifecycle_command(Peer &p, const std::string &cmd,
                              std::istringstream &in)
{
    if (cmd == "contract") {
        return "contract " + std::to_string(completions_inside_posting_calls());
    }
    if (cmd == "fork") {
        std::string mode;
        in >> mode;
        return cmd_fork(p, mode);
    }
    if (cmd == "put_cancel") {
        std::string rkey;
        uint64_t raddr = 0;
        size_t bytes = 0, chunk = 0;
        in >> raddr >> rkey >> bytes >> chunk;
        return cmd_put_cancel(p, raddr, unpack_rkey(p, rkey), bytes, chunk);
    }
    if (cmd == "pending") {
        return cmd_pending(p);
    }
    if (cmd == "zero") {
        return cmd_zero(p);
    }
    if (cmd == "oversize") {
        std::string raddr, rkey;
        in >> raddr >> rkey;
        if (rkey.empty()) {
            return "err bad arguments";
        }
        return cmd_oversize(p, std::stoull(raddr, nullptr, 0), unpack_rkey(p, rkey));
    }
    if (cmd == "iface_flush") {
        int ms = 5000;
        in >> ms;
        return cmd_iface_flush(p, ms);
    }
    return "";
}

} // namespace pxn_tools
