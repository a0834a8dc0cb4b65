/*
 * The UCT side of ucx_pxn_peer: one md, worker, iface and (at most) one ep,
 * the buffers, the unpacked rkeys, and what every command needs of them
 * (progress, completions that count themselves, connection waits).
 *
 * Completions and posting calls: every operation the peer posts goes
 * through post_op(), which notes that a posting call is under way; a
 * completion callback that runs inside one counts as a breach of UCT's
 * rule (completions come from progress only), reported by `contract`.
 *
 * Threading: the peer's one command thread.
 */
#ifndef PXN_TOOLS_PEER_UCT_H_
#define PXN_TOOLS_PEER_UCT_H_

#include "peer_buffer.h"

#include <uct/api/uct.h>

#include <map>
#include <string>

namespace pxn_tools {

struct Peer {
    ucs_async_context_t *async  = nullptr;
    uct_worker_h         worker = nullptr;
    uct_component_h      component = nullptr;
    uct_md_h             md     = nullptr;
    uct_md_attr_t        md_attr{};
    uct_iface_h          iface  = nullptr;
    uct_iface_h          spare  = nullptr; /* "am close keep": another iface
                                              of the process on its device */
    uct_iface_attr_t     attr{};
    uct_ep_h             ep     = nullptr;
    std::map<unsigned, PeerBuffer> buffers{{0, PeerBuffer()}};
    PeerBuffer          *cur    = &buffers[0]; /* selected by "buffer" */
    /* unpacked once per packed rkey, released at close_peer() */
    std::map<std::string, uct_rkey_bundle_t> rkeys;
    std::string          md_name, tl_name, dev; /* as opened */
    /* calls of the iface's error handler, and the last status it gave */
    unsigned             ep_errors     = 0;
    ucs_status_t         last_ep_error = UCS_OK;
};

/* PXN_PEER_YIELD=1: give the CPU away whenever progress finds nothing to
 * do (a polite application; on small machines the relay and the target
 * then get the cores that a spinning sender would take); 2: sleep 20 us
 * instead. 0 (default): spin. */
extern int g_yield;

void progress(Peer &p);
/* A new connection replaces the ep (a failed one stays failed). */
void destroy_ep(Peer &p);
/* 0, or 1 with the reason on stderr. */
int  open_peer(Peer &p, const char *md_name, const char *tl_name, const char *dev);
/* Another iface like the peer's own (its md, worker, tl and device). */
ucs_status_t open_iface(Peer &p, uct_iface_h *iface);
/* Releases everything open_peer() and the commands made, in UCT's order. */
void close_peer(Peer &p);

/* A completion that counts itself into *done. */
struct Op {
    uct_completion_t comp;
    size_t          *done;
};
void op_done(uct_completion_t *comp);

/* Runs `post` (one UCT posting call) marked as a posting call. */
template<typename Post> auto post_op(Post &&post)
{
    extern bool g_posting;
    g_posting   = true;
    auto result = post();
    g_posting   = false;
    return result;
}
/* Completions that ran inside a posting call so far. */
size_t completions_inside_posting_calls();

/* The rkey of packed (hex) `text`, unpacked once; UCT_INVALID_RKEY when
 * the unpack failed (*status, if given). */
uct_rkey_t unpack_rkey(Peer &p, const std::string &text,
                       ucs_status_t *status = nullptr);

/* Connection establishment of an ep that connects in the background
 * (pxn): flush answers UCS_ERR_NO_RESOURCE until its route is there, then
 * the outcome. */
ucs_status_t wait_connected(Peer &p);

} // namespace pxn_tools

#endif
