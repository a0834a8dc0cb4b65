/*
 * ucx_pxn_peer: one UCT process driven line by line over stdin/stdout, for
 * the multi-process tests and the benchmark. It opens one transport (pxn or
 * any other, for baselines) and does what it is told; between commands it
 * makes no UCT calls at all, like an application busy elsewhere.
 *
 *   ucx_pxn_peer <md name> <tl name> <device>
 *
 * Commands (one line each, answers one line; blobs in hex):
 *   info                          -> info <dev addr> <iface addr> <to_ep 0|1>
 *   buffer <id>                   -> ok
 *         selects buffer <id> (0 until told otherwise; a new id starts
 *         unallocated) for alloc, fill, check, put and get
 *   alloc <bytes> [cuda]          -> alloc <address> <packed rkey>
 *         (re)allocates the selected buffer, with 4 KiB canaries before
 *         and after it; "cuda": in GPU memory (fill/check copy through the
 *         host)
 *   fill <seed>                   -> ok            pattern over the buffer
 *   check <seed> <offset> <len>   -> ok | bad <first bad byte> | canary
 *   reachable <dev> <iface>       -> 1 | 0
 *   reachable_v2 <device|network> <dev> <iface>
 *                                 -> 1 | 0 | unsupported
 *         uct_iface_is_reachable_v2 with that scope (UCX 1.15 on)
 *   inter_node                    -> 1 | 0 | unsupported
 *         the iface's UCT_IFACE_FLAG_INTER_NODE (UCX 1.18 on)
 *   connect <dev> <iface>         -> ok | err <status>        (to-iface)
 *         waits (flushing) until the ep is connected or refused
 *         replaces (destroys) the ep of an earlier connect: after a failed
 *         operation pxn's ep stays failed, a new one routes again
 *   ep_addr                       -> ep_addr <addr> | err     (to-ep)
 *   connect_ep <dev> <ep>         -> ok | err <status>
 *   put <short|bcopy|zcopy|sgl> <raddr> <rkey> <bytes> <chunk> <offset>
 *   get <zcopy|bcopy|sgl> <raddr> <rkey> <bytes> <chunk> <offset>
 *         moves [offset, offset+bytes) of the local buffer to/from raddr +
 *         offset, in operations of chunk bytes (chunk "<min>-<max>":
 *         sizes drawn uniformly from [min, max], the same sequence every
 *         time; sgl: put/get_sgl_zcopy of 512 such elements each, in a
 *         shuffled order: "Unsupported" where UCX has no such operation),
 *         then flushes:
 *                                 -> done <status> <ns> <ops>
 *         (the rkey is unpacked once and kept, by its text)
 *   rkey <rkey>                   -> rkey <ns> | err <status>
 *         unpacks the rkey now unless kept already (put and get use the
 *         kept one) and says how long that took (cuda_ipc maps the first
 *         buffer of a peer's GPU in its unpack)
 *   caps                          -> caps <put short> <put bcopy> <put zcopy>
 *                                         <get bcopy> <get zcopy>
 *         largest operation of each kind, 0: not supported
 *   counters                      -> counters <name>=<value> ...   (pxn)
 *   ep_errors                     -> ep_errors <calls> <last status string>
 *         the iface's error handler (set at open; it leaves the ep to the
 *         next connect): how often it was called, with which status last
 *   progress <ms>                 -> ok
 *   serve                         progresses until the next line, which
 *                                 must be "stop"   -> ok
 *         (a target of a plain inner transport such as tcp needs this)
 *   contract, fork, put_cancel, pending, zero, oversize, iface_flush
 *         UCT's rules and a process's life: peer_lifecycle.h
 *   nomem put_zcopy|pending|iface ...
 *         an allocation that fails inside a UCT call: peer_nomem.h
 *   am listen|send|stats|caps ...
 *         active messages, sent numbered and checked: peer_am.h
 *   exit                          exit(0) at once, UCT still open (as an
 *                                 application that never cleans up)
 *   quit                          closes UCT, then returns from main
 *
 * PXN_PEER_SIGTERM=own|after: the program installs a SIGTERM handler of its
 * own before opening UCT (own) or after (after); it writes the line
 * "sigterm" and the program goes on. Unset: SIGTERM left at its default.
 */
#include "peer_am.h"
#include "peer_lifecycle.h"
#include "peer_nomem.h"
#include "peer_process.h"
#include "peer_uct.h"

#include <ucs/pxn/abi.h>
#include <uct/api/uct.h>
#ifdef PXN_UCX_IFACE_IS_REACHABLE_V2
#include <uct/api/v2/uct_v2.h>
#endif

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <random>
#include <sched.h>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using pxn_tools::g_yield;
using pxn_tools::hex;
using pxn_tools::Op;
using pxn_tools::op_done;
using pxn_tools::Peer;
using pxn_tools::PeerBuffer;
using pxn_tools::post_op;
using pxn_tools::unhex;
using pxn_tools::unpack_rkey;

namespace {

std::string cmd_info(Peer &p)
{
    std::vector<uint8_t> dev(p.attr.device_addr_len), iface(p.attr.iface_addr_len);
    uct_iface_get_device_address(p.iface, (uct_device_addr_t*)dev.data());
    if (!iface.empty()) {
        uct_iface_get_address(p.iface, (uct_iface_addr_t*)iface.data());
    }
    const bool to_ep = !(p.attr.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE);
    return "info " + hex(dev.data(), dev.size()) + " " +
           hex(iface.data(), iface.size()) + " " + (to_ep ? "1" : "0");
}

std::string cmd_caps(const Peer &p)
{
    const uint64_t flags = p.attr.cap.flags;
    auto cap = [flags](uint64_t flag, size_t max) {
        return " " + std::to_string((flags & flag) ? max : 0);
    };
    return "caps" + cap(UCT_IFACE_FLAG_PUT_SHORT, p.attr.cap.put.max_short) +
           cap(UCT_IFACE_FLAG_PUT_BCOPY, p.attr.cap.put.max_bcopy) +
           cap(UCT_IFACE_FLAG_PUT_ZCOPY, p.attr.cap.put.max_zcopy) +
           cap(UCT_IFACE_FLAG_GET_BCOPY, p.attr.cap.get.max_bcopy) +
           cap(UCT_IFACE_FLAG_GET_ZCOPY, p.attr.cap.get.max_zcopy);
}

std::string cmd_reachable_v2(const Peer &p, const std::string &scope,
                             const std::vector<uint8_t> &dev,
                             const std::vector<uint8_t> &iface)
{
#ifdef PXN_UCX_IFACE_IS_REACHABLE_V2
    uct_iface_is_reachable_params_t params = {};
    params.field_mask  = UCT_IFACE_IS_REACHABLE_FIELD_DEVICE_ADDR |
                         UCT_IFACE_IS_REACHABLE_FIELD_IFACE_ADDR |
                         UCT_IFACE_IS_REACHABLE_FIELD_SCOPE;
    params.device_addr = (const uct_device_addr_t*)dev.data();
    params.iface_addr  = (const uct_iface_addr_t*)iface.data();
    params.scope       = (scope == "device") ? UCT_IFACE_REACHABILITY_SCOPE_DEVICE :
                                               UCT_IFACE_REACHABILITY_SCOPE_NETWORK;
    return uct_iface_is_reachable_v2(p.iface, &params) ? "1" : "0";
#else
    (void)p; (void)scope; (void)dev; (void)iface;
    return "unsupported";
#endif
}

struct PackArg {
    const uint8_t *src;
    size_t         length;
};

void unpack_bytes(void *arg, const void *data, size_t length)
{
    memcpy(arg, data, length);
}

size_t pack_bytes(void *dest, void *arg)
{
    auto *a = static_cast<PackArg*>(arg);
    memcpy(dest, a->src, a->length);
    return a->length;
}

/* Operation sizes covering `bytes`: `chunk` each, or, with max_chunk >
 * chunk, drawn from [chunk, max_chunk] by a fixed-seed generator. */
std::vector<size_t> op_sizes(size_t bytes, size_t chunk, size_t max_chunk)
{
    std::vector<size_t> sizes;
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<size_t> pick(chunk, std::max(chunk, max_chunk));
    for (size_t moved = 0; moved < bytes;) {
        const size_t len = std::min(bytes - moved,
                                    (max_chunk > chunk) ? pick(rng) : chunk);
        sizes.push_back(len);
        moved += len;
    }
    return sizes;
}

/* One operation of cmd_move(): `len` bytes at offset `off`. */
ucs_status_t post_one(Peer &p, const std::string &kind, PeerBuffer &b,
                      size_t off, size_t len, uint64_t raddr, uct_rkey_t rkey,
                      uct_completion_t *comp)
{
    uct_iov_t iov = {b.data() + off, len, b.memh(), 0, 1};
    if (kind == "short") {
        return uct_ep_put_short(p.ep, b.data() + off, len, raddr + off, rkey);
    } else if (kind == "bcopy") {
        PackArg arg{b.data() + off, len};
        ssize_t n = uct_ep_put_bcopy(p.ep, pack_bytes, &arg, raddr + off, rkey);
        return (n >= 0) ? UCS_OK : static_cast<ucs_status_t>(n);
    } else if (kind == "zcopy") {
        return uct_ep_put_zcopy(p.ep, &iov, 1, raddr + off, rkey, comp);
    } else if (kind == "get_bcopy") {
        return uct_ep_get_bcopy(p.ep, unpack_bytes, b.data() + off, len,
                                raddr + off, rkey, comp);
    }
    return uct_ep_get_zcopy(p.ep, &iov, 1, raddr + off, rkey, comp);
}

/* put sgl / get sgl: elements per SGL operation */
constexpr size_t kSglBatch = 512;

bool is_sgl(const std::string &kind)
{
    return (kind == "sgl") || (kind == "get_sgl");
}

/* One SGL operation of `n` elements of `sizes` from offset `off` on, each
 * to the same offset of the remote buffer, posted in a shuffled order
 * (the remote side of an SGL is no contiguous range). */
ucs_status_t post_sgl(Peer &p, const std::string &kind, PeerBuffer &b, size_t off,
                      const size_t *sizes, size_t n, uint64_t raddr,
                      uct_rkey_t rkey, uct_completion_t *comp)
{
#if defined(PXN_UCX_EP_PUT_SGL_ZCOPY)
    std::vector<size_t> order(n), at(n);
    for (size_t k = 0, o = off; k < n; o += sizes[k++]) {
        order[k] = k;
        at[k]    = o;
    }
    std::shuffle(order.begin(), order.end(), std::mt19937_64(n));
    std::vector<void*> buffers(n);
    std::vector<size_t> lengths(n);
    std::vector<uct_mem_h> memhs(n, b.memh());
    std::vector<uint64_t> remote(n);
    std::vector<uct_rkey_t> rkeys(n, rkey);
    for (size_t k = 0; k < n; ++k) {
        buffers[k] = b.data() + at[order[k]];
        lengths[k] = sizes[order[k]];
        remote[k]  = raddr + at[order[k]];
    }
    if (kind == "sgl") {
        return uct_ep_put_sgl_zcopy(p.ep, buffers.data(), lengths.data(),
                                    memhs.data(), remote.data(), rkeys.data(),
                                    nullptr, nullptr, n, comp);
    }
#if defined(PXN_UCX_EP_GET_SGL_ZCOPY)
    return uct_ep_get_sgl_zcopy(p.ep, buffers.data(), lengths.data(),
                                memhs.data(), remote.data(), rkeys.data(),
                                nullptr, nullptr, n, comp);
#endif
#endif
    (void)p; (void)kind; (void)b; (void)off; (void)sizes; (void)n;
    (void)raddr; (void)rkey; (void)comp;
    return UCS_ERR_UNSUPPORTED; /* this UCX has no such SGL operation */
}

std::string cmd_move(Peer &p, const std::string &kind, uint64_t raddr,
                     uct_rkey_t rkey, size_t bytes, size_t chunk,
                     size_t max_chunk, size_t offset)
{
    const std::vector<size_t> sizes = op_sizes(bytes, chunk, max_chunk);
    const auto start = std::chrono::steady_clock::now();
    PeerBuffer &b    = *p.cur;
    const size_t ops = sizes.size();
    std::vector<Op> comps(ops);
    size_t done = 0, expected = 0;
    ucs_status_t status = UCS_OK;
    /* an SGL operation carries kSglBatch of the sizes: the elements */
    const size_t batch = is_sgl(kind) ? kSglBatch : 1;

    size_t off = offset;
    for (size_t i = 0; (i < ops) && !UCS_STATUS_IS_ERR(status); i += batch) {
        const size_t n = std::min(batch, ops - i);
        comps[i].comp  = {op_done, 1, UCS_OK};
        comps[i].done  = &done;
        for (;;) {
            status = post_op([&] {
                return is_sgl(kind) ?
                       post_sgl(p, kind, b, off, &sizes[i], n, raddr, rkey,
                                &comps[i].comp) :
                       post_one(p, kind, b, off, sizes[i], raddr, rkey,
                                &comps[i].comp);
            });
            if (status != UCS_ERR_NO_RESOURCE) {
                break;
            }
            progress(p);
        }
        expected += (status == UCS_INPROGRESS);
        for (size_t k = 0; k < n; ++k) {
            off += sizes[i + k];
        }
    }
    ucs_status_t first_error = UCS_STATUS_IS_ERR(status) ? status : UCS_OK;

    uct_completion_t flush = {nullptr, 1, UCS_OK};
    flush.func = [](uct_completion_t *c) { c->count = -1; };
    do {
        status = uct_ep_flush(p.ep, 0, &flush);
        progress(p);
    } while (status == UCS_ERR_NO_RESOURCE);
    if (status == UCS_INPROGRESS) {
        while (flush.count != -1) {
            progress(p);
        }
        status = flush.status;
    }
    while (done < expected) {
        progress(p);
    }
    for (size_t i = 0; i < ops; ++i) {
        if ((first_error == UCS_OK) && (comps[i].comp.status != UCS_OK)) {
            first_error = comps[i].comp.status;
        }
    }
    if (first_error == UCS_OK) {
        first_error = status;
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now() - start).count();
    return std::string("done ") + ucs_status_string(first_error) + " " +
           std::to_string(ns) + " " + std::to_string(ops);
}

/* This process's pxn counters, from its registry entry. */
std::string cmd_counters()
{
    const char *group = getenv("UCX_PXN_GROUP");
    pxn::abi::ProcessCounters c;
    if (!pxn_tools::read_counters(group ? group : "default", getpid(), &c)) {
        return "err no entry";
    }
    std::ostringstream os;
    os << "counters relayed_pieces=" << c.relay.pieces
       << " relayed_bytes=" << c.relay.bytes
       << " relay_failed=" << c.relay.failed_pieces
       << " rejected=" << c.relay.rejected << " routes=" << c.relay.routes
       << " sent_pieces=" << c.sender.pieces << " sent_bytes=" << c.sender.bytes
       << " credit_stalls=" << c.sender.credit_stalls
       << " failed_ops=" << c.sender.failed_ops
       << " fallback_bytes=" << c.sender.fallback_bytes
       << " gather_pieces=" << c.sender.gather_pieces
       << " am_messages=" << c.relay.am_messages
       << " am_bytes=" << c.relay.am_bytes << " am_sent=" << c.sender.am_sent
       << " am_received=" << c.sender.am_received
       << " am_refused=" << c.sender.am_refused;
    return os.str();
}

int g_answers_fd = -1;

void on_sigterm(int)
{
    (void)!write(g_answers_fd, "sigterm\n", 8);
}

void own_sigterm()
{
    struct sigaction sa = {};
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, nullptr);
}

} // namespace

int main(int argc, char **argv)
{
    /* A UCT program that opens pxn by name asks for it (UCX_PXN_ENABLE=auto
     * would only enable it where UCX_TLS names pxn); an explicit 'n' stays. */
    setenv("UCX_PXN_ENABLE", "y", 0);
    if (argc != 4) {
        fprintf(stderr, "usage: ucx_pxn_peer <md name> <tl name> <device>\n");
        return 2;
    }
    g_yield = (getenv("PXN_PEER_YIELD") != nullptr) ?
              atoi(getenv("PXN_PEER_YIELD")) : 0;
    /* Answers go to the original stdout; anything else printed there (UCX
     * logs to stdout by default) goes to stderr instead. */
    FILE *answers = fdopen(dup(1), "w");
    if ((answers == nullptr) || (dup2(2, 1) < 0)) {
        perror("ucx_pxn_peer: stdout");
        return 1;
    }
    setvbuf(answers, nullptr, _IOLBF, 0);
    g_answers_fd = fileno(answers);
    const char *sigterm = getenv("PXN_PEER_SIGTERM");
    const std::string sigterm_mode = (sigterm != nullptr) ? sigterm : "";
    if (sigterm_mode == "own") {
        own_sigterm();
    }

    Peer p;
    if (open_peer(p, argv[1], argv[2], argv[3]) != 0) {
        return 1;
    }
    if (sigterm_mode == "after") {
        own_sigterm();
    }
    fprintf(answers, "ready\n");

    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string cmd, reply;
        in >> cmd;
        if (cmd == "quit") {
            break;
        } else if (cmd == "exit") {
            exit(0);
        } else if (cmd == "info") {
            reply = cmd_info(p);
        } else if (cmd == "buffer") {
            unsigned id;
            if (in >> id) {
                p.cur = &p.buffers[id];
                reply = "ok";
            } else {
                reply = "err bad arguments";
            }
        } else if (cmd == "alloc") {
            size_t size = 0;
            std::string where;
            in >> size >> where;
            reply = p.cur->alloc(p.md, p.md_attr, size, where == "cuda");
        } else if (cmd == "fill") {
            uint64_t seed = 0;
            in >> seed;
            p.cur->fill(seed);
            reply = "ok";
        } else if (cmd == "check") {
            uint64_t seed = 0;
            size_t offset = 0, length = 0;
            in >> seed >> offset >> length;
            reply = p.cur->check(seed, offset, length);
        } else if (cmd == "reachable") {
            std::string dev, iface;
            in >> dev >> iface;
            auto d = unhex(dev), i = unhex(iface);
            reply = uct_iface_is_reachable(p.iface,
                                           (const uct_device_addr_t*)d.data(),
                                           (const uct_iface_addr_t*)i.data()) ?
                    "1" : "0";
        } else if (cmd == "reachable_v2") {
            std::string scope, dev, iface;
            in >> scope >> dev >> iface;
            reply = cmd_reachable_v2(p, scope, unhex(dev), unhex(iface));
        } else if (cmd == "inter_node") {
#ifdef PXN_UCX_IFACE_FLAG_INTER_NODE
            reply = (p.attr.cap.flags & UCT_IFACE_FLAG_INTER_NODE) ? "1" : "0";
#else
            reply = "unsupported";
#endif
        } else if (cmd == "connect") {
            std::string dev, iface;
            in >> dev >> iface;
            auto d = unhex(dev), i = unhex(iface);
            uct_ep_params_t params = {};
            params.field_mask = UCT_EP_PARAM_FIELD_IFACE |
                                UCT_EP_PARAM_FIELD_DEV_ADDR |
                                UCT_EP_PARAM_FIELD_IFACE_ADDR;
            params.iface      = p.iface;
            params.dev_addr   = (const uct_device_addr_t*)d.data();
            params.iface_addr = (const uct_iface_addr_t*)i.data();
            destroy_ep(p);
            ucs_status_t status = uct_ep_create(&params, &p.ep);
            if (status == UCS_OK) {
                status = wait_connected(p);
            }
            reply = (status == UCS_OK) ? "ok" :
                    std::string("err ") + ucs_status_string(status);
        } else if (cmd == "ep_addr") {
            uct_ep_params_t params = {};
            params.field_mask = UCT_EP_PARAM_FIELD_IFACE;
            params.iface      = p.iface;
            destroy_ep(p);
            ucs_status_t status = uct_ep_create(&params, &p.ep);
            std::vector<uint8_t> addr(p.attr.ep_addr_len);
            if (status == UCS_OK) {
                status = uct_ep_get_address(p.ep, (uct_ep_addr_t*)addr.data());
            }
            reply = (status == UCS_OK) ? "ep_addr " + hex(addr.data(), addr.size()) :
                    std::string("err ") + ucs_status_string(status);
        } else if (cmd == "connect_ep") {
            std::string dev, ep;
            in >> dev >> ep;
            auto d = unhex(dev), e = unhex(ep);
            ucs_status_t status = uct_ep_connect_to_ep(
                    p.ep, (const uct_device_addr_t*)d.data(),
                    (const uct_ep_addr_t*)e.data());
            if (status == UCS_OK) {
                status = wait_connected(p);
            }
            reply = (status == UCS_OK) ? "ok" :
                    std::string("err ") + ucs_status_string(status);
        } else if (cmd == "rkey") {
            std::string rkey;
            in >> rkey;
            ucs_status_t status = UCS_OK;
            const auto start    = std::chrono::steady_clock::now();
            unpack_rkey(p, rkey, &status);
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - start).count();
            reply = (status == UCS_OK) ? "rkey " + std::to_string(ns) :
                    std::string("err ") + ucs_status_string(status);
        } else if ((cmd == "put") || (cmd == "get")) {
            std::string kind, rkey;
            uint64_t raddr = 0;
            size_t bytes = 0, chunk = 0, offset = 0;
            in >> kind;
            if (cmd == "get") {
                kind = "get_" + kind;
            }
            std::string chunks;
            in >> raddr >> rkey >> bytes >> chunks >> offset;
            size_t max_chunk = 0;
            if (sscanf(chunks.c_str(), "%zu-%zu", &chunk, &max_chunk) < 1) {
                chunk = 0;
            }
            if ((p.ep == nullptr) || (chunk == 0) || (offset > p.cur->size()) ||
                (bytes > p.cur->size() - offset)) {
                reply = "err bad arguments";
            } else {
                reply = cmd_move(p, kind, raddr, unpack_rkey(p, rkey), bytes,
                                 chunk, max_chunk, offset);
            }
        } else if (cmd == "caps") {
            reply = cmd_caps(p);
        } else if (cmd == "counters") {
            reply = cmd_counters();
        } else if (cmd == "ep_errors") {
            reply = "ep_errors " + std::to_string(p.ep_errors) + " " +
                    ucs_status_string(p.last_ep_error);
        } else if (cmd == "serve") {
            pollfd pfd{0, POLLIN, 0};
            for (unsigned i = 0;; ++i) {
                progress(p);
                if (((i % 256) == 0) && (poll(&pfd, 1, 0) > 0)) {
                    break;
                }
            }
            std::getline(std::cin, line);
            reply = (line == "stop") ? "ok" : "err expected stop";
        } else if (cmd == "progress") {
            int ms;
            in >> ms;
            const auto end = std::chrono::steady_clock::now() +
                             std::chrono::milliseconds(ms);
            while (std::chrono::steady_clock::now() < end) {
                uct_worker_progress(p.worker);
            }
            reply = "ok";
        } else if (cmd == "nomem") {
            reply = pxn_tools::nomem_command(p, in);
        } else if (cmd == "am") {
            reply = pxn_tools::am_command(p, in);
        } else if ((reply = pxn_tools::lifecycle_command(p, cmd, in)).empty()) {
            reply = "err unknown command " + cmd;
        }
        fprintf(answers, "%s\n", reply.c_str());
    }

    close_peer(p);
    return 0;
}
