#include "registry_fixture.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <unistd.h>

namespace pxn_test {

using pxn::abi::store_relaxed;

namespace {

std::string hex(uint64_t value)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%016" PRIx64, value);
    return buf;
}

} // namespace

int pxn_process(const pxn::Settings &settings, const std::string &base,
                ChildChannel &channel)
{
    std::unique_ptr<pxn::Registry> registry;
    if (pxn::Registry::open(settings, base, &registry) != UCS_OK) {
        channel.send("error open");
        return 1;
    }
    std::unique_ptr<pxn::RegistryEntry> entry;
    pxn::UniqueFd                       arena;
    pxn::RelayWakeup                    wakeup;
    const pxn::EntryParams params{"rail" + std::to_string(getpid()), "dev0", "tcp"};
    if ((registry->create_entry(params, &entry) != UCS_OK) ||
        (entry->create_host_arena(&arena) != UCS_OK) ||
        (entry->create_wakeup(&wakeup) != UCS_OK) || (entry->publish() != UCS_OK)) {
        channel.send("error entry");
        return 1;
    }
    channel.send("ready " + hex(entry->identity().epoch));

    std::vector<std::unique_ptr<pxn::PeerMapping>> mappings;
    std::vector<std::pair<pxn::PeerMapping*, pxn::LaneClaim>> claims;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        entry->heartbeat();
        std::string command;
        if (!channel.receive(&command, 50)) {
            continue;
        }
        if ((command == "discover") || (command == "claim")) {
            std::vector<pxn::PeerInfo> peers;
            if (registry->discover(&entry->identity(), &peers) != UCS_OK) {
                channel.send("error discover");
                continue;
            }
            std::string reply = (command == "discover") ? "peers" : "claimed";
            unsigned    count = 0;
            for (const auto &peer : peers) {
                if (command == "discover") {
                    reply += " " + std::to_string(peer.identity.pid);
                    continue;
                }
                std::unique_ptr<pxn::PeerMapping> mapping;
                pxn::LaneClaim                    claim;
                ucs_status_t status = registry->map_peer(peer, &mapping);
                if (status == UCS_OK) {
                    status = mapping->claim_lane(entry->identity(), &claim);
                }
                if (status != UCS_OK) {
                    reply += " fail:" + std::to_string(peer.identity.pid) + ":" +
                             ucs_status_string(status);
                    continue;
                }
                ++count;
                claims.emplace_back(mapping.get(), claim);
                mappings.push_back(std::move(mapping));
            }
            if (command == "claim") {
                reply = "claimed " + std::to_string(count) + reply.substr(7);
            }
            channel.send(reply);
        } else if (command == "scribble") {
            for (const auto &held : claims) {
                const pxn::LaneBlock lane = held.first->lane(held.second.index);
                store_relaxed(lane.producer().head, uint64_t(7));
                store_relaxed(lane.producer().doorbell, uint64_t(7));
                store_relaxed(lane.producer().reaped, uint64_t(5));
                store_relaxed(lane.consumer().completed, uint64_t(6));
                store_relaxed(lane.descriptor(0).seq, uint64_t(5));
                store_relaxed(lane.completion(0).seq, uint64_t(5));
                store_relaxed(lane.rkey(3).gen, uint64_t(9));
            }
            channel.send("scribbled");
        } else if (command == "exit") {
            claims.clear();
            mappings.clear();
            entry.reset();
            channel.send("bye");
            return 0;
        }
    }
    return 3;
}

} // namespace pxn_test
