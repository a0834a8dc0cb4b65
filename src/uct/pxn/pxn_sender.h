/*
 * The sending side of one UCT worker: its lanes into the relays of the
 * other rails of this node, shared by every pxn iface of that worker (so a
 * worker with pxn on several devices still takes one lane per relay).
 *
 * A sender has an identity of its own (pid, start time, a random epoch):
 * the relays tell its lanes apart from those of the process's other
 * workers and from the process's own relays.
 *
 * Lanes open in the background (pxn_lane_control.h): lane_for() returns
 * at once. A lane whose relay failed is replaced by the next lane_for();
 * endpoints still on the old one keep it until they move, and progress()
 * keeps driving it until it delivered the completions of its requests.
 *
 * Threading: the worker's thread only (UCT's thread model).
 */
#ifndef PXN_UCT_PXN_SENDER_H_
#define PXN_UCT_PXN_SENDER_H_

#include "pxn_send_lane.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace pxn {
namespace uct {

class Node;

class Sender {
public:
    explicit Sender(std::shared_ptr<Node> node);
    ~Sender();
    Sender(const Sender&) = delete;
    Sender &operator=(const Sender&) = delete;

    static ucs_status_t create(std::shared_ptr<Node> node,
                               std::unique_ptr<Sender> *sender);

    /* The lane into this node's relay of `rail` whose inner transport is
     * `inner_tl`, opened on first use (in the background) and replaced when
     * it failed; the oldest relay of the rail first (two relays of one
     * rail: a misconfigured rail map, warned once). UCS_ERR_UNREACHABLE: no
     * healthy relay for that rail. */
    ucs_status_t lane_for(uint32_t rail, const std::string &inner_tl,
                          std::shared_ptr<SendLane> *lane);
    /* Lanes into every healthy relay of another rail than `own_rail`. */
    std::vector<std::shared_ptr<SendLane>> all_lanes(uint32_t own_rail,
                                                     const std::string &inner_tl);
    /* Is there a healthy relay of `rail` (registry, cached 100 ms)? */
    bool relay_exists(uint32_t rail, const std::string &inner_tl);

    /* Opens, reaps, stages and publishes on every lane. */
    unsigned progress();
    bool     idle() const;
    /* Lanes of this sender that failed so far: endpoints on them must
     * route again. */
    uint64_t lane_failures() const { return lane_failures_; }

private:
    struct Key {
        uint32_t    rail;
        std::string tl;
        bool operator<(const Key &o) const
        {
            return (rail != o.rail) ? (rail < o.rail) : (tl < o.tl);
        }
    };

    void refresh_peers(bool force);
    void warn_if_crowded(uint32_t rail, const std::string &inner_tl);

    std::shared_ptr<Node>                  node_;
    ProcessIdentity                        self_;
    std::map<Key, std::shared_ptr<SendLane>> lanes_;
    std::vector<std::shared_ptr<SendLane>> retired_; /* failed, replaced, not
                                                        spent yet */
    std::vector<PeerInfo>                  peers_;
    uint64_t                               peers_time_ns_ = 0;
    std::set<uint32_t>                     crowded_rails_; /* warned: >1 relay */
    uint64_t                               lane_failures_ = 0;
};

} // namespace uct
} // namespace pxn

#endif
