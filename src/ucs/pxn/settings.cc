#include "settings.h"

#include "control_file.h"
#include "cpu_list.h"
#include "rail_map.h"
#include "seq.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <strings.h>

namespace pxn {

bool is_valid_group_name(const std::string &group)
{
    if (group.empty() || (group.size() > kMaxGroupLength) || (group == ".") ||
        (group == "..")) {
        return false;
    }
    for (char c : group) {
        const bool ok = ((c >= 'a') && (c <= 'z')) || ((c >= 'A') && (c <= 'Z')) ||
                        ((c >= '0') && (c <= '9')) || (c == '_') || (c == '.') ||
                        (c == '-');
        if (!ok) {
            return false;
        }
    }
    return true;
}

bool tls_names(const std::string &ucx_tls, const std::string &tl)
{
    std::string list = ucx_tls;
    list.erase(0, list.find_first_not_of(" \t"));
    if (list.empty() || (list[0] == '^')) {
        return false;
    }
    size_t start = 0;
    while (start <= list.size()) {
        size_t end = list.find(',', start);
        end        = (end == std::string::npos) ? list.size() : end;
        std::string entry = list.substr(start, end - start);
        entry.erase(0, entry.find_first_not_of(" \t"));
        entry.erase(entry.find_last_not_of(" \t") + 1);
        if ((entry == tl) || (entry.rfind(tl + ":", 0) == 0)) {
            return true;
        }
        start = end + 1;
    }
    return false;
}

bool pxn_requested(const Settings &settings, const char *ucx_tls)
{
    switch (settings.enable) {
    case EnableChoice::kYes:
        return true;
    case EnableChoice::kNo:
        return false;
    case EnableChoice::kAuto:
        return (ucx_tls != nullptr) && tls_names(ucx_tls, "pxn");
    }
    return false;
}

bool pxn_asked(const char *enable, const char *ucx_tls)
{
    if ((enable == nullptr) || (*enable == '\0') ||
        (strcasecmp(enable, "auto") == 0)) {
        return (ucx_tls != nullptr) && tls_names(ucx_tls, "pxn");
    }
    return strcasecmp(enable, "n") != 0;
}

namespace {

template<typename T>
ucs_status_t out_of_range(std::string *error, const char *var, T value,
                          const std::string &rule)
{
    std::ostringstream os;
    os << "UCX_PXN_" << var << "=" << value << ": " << rule;
    *error = os.str();
    return UCS_ERR_INVALID_PARAM;
}

bool is_node_id_char(char c)
{
    return (c > ' ') && (c < 127) && (c != '/');
}

} // namespace

ucs_status_t validate(const Settings &s, std::string *error)
{
    if (s.registry_dir.empty() || (s.registry_dir[0] != '/')) {
        return out_of_range(error, "REGISTRY_DIR", "'" + s.registry_dir + "'",
                            "must be an absolute path");
    }
    if (!is_valid_group_name(s.group)) {
        return out_of_range(error, "GROUP", "'" + s.group + "'",
                            "must be 1-64 characters of [A-Za-z0-9_.-], not '.' "
                            "or '..'");
    }
    if (s.node_id.size() > kMaxNodeIdLength) {
        return out_of_range(error, "NODE_ID", "'" + s.node_id + "'",
                            "must be at most 63 characters");
    }
    for (char c : s.node_id) {
        if (!is_node_id_char(c)) {
            return out_of_range(error, "NODE_ID", "'" + s.node_id + "'",
                                "must be printable, without spaces or '/'");
        }
    }

    RailMap   map;
    std::string why;
    if (RailMap::parse(s.rail_map, &map, &why) != UCS_OK) {
        return out_of_range(error, "RAIL_MAP", "'" + s.rail_map + "'", why);
    }
    if (s.net_tls.empty()) {
        return out_of_range(error, "NET_TLS", "''",
                            "must name at least one inner transport");
    }

    const Geometry &g = s.geometry;
    if ((g.lanes < 1) || (g.lanes > kMaxLanes)) {
        return out_of_range(error, "LANES", g.lanes, "must be 1..64");
    }
    if ((g.slots < 1) || (g.slots > kMaxSlots)) {
        return out_of_range(error, "SLOTS", g.slots, "must be 1..4096");
    }
    if ((g.slot_size < kMinSlotSize) || (g.slot_size > kMaxSlotSize) ||
        (g.slot_size % 64)) {
        return out_of_range(error, "SLOT_SIZE", g.slot_size,
                            "must be 4096..1073741824 bytes, a multiple of 64");
    }
    if ((g.max_plan < 1) || (g.max_plan > kMaxPlan)) {
        return out_of_range(error, "MAX_PLAN", g.max_plan, "must be 1..65536");
    }
    if (g.arena_size() > kMaxArenaSize) {
        return out_of_range(error, "SLOT_SIZE", g.slot_size,
                            "LANES x SLOTS x SLOT_SIZE = " +
                            std::to_string(g.arena_size()) +
                            " bytes exceeds the 64 GiB arena limit");
    }
    if ((s.inflight_depth < 1) || (s.inflight_depth > kMaxInflightDepth)) {
        return out_of_range(error, "INFLIGHT_DEPTH", s.inflight_depth,
                            "must be 1..64");
    }
    if (s.piece_ops > kMaxPlan) {
        return out_of_range(error, "PIECE_OPS", s.piece_ops, "must be 0..65536");
    }
    if ((s.piece_bytes != kPieceBytesAuto) && (s.piece_bytes != kPieceBytesInf) &&
        (s.piece_bytes != 0) &&
        ((s.piece_bytes < kMinSlotSize) || (s.piece_bytes > kMaxSlotSize))) {
        return out_of_range(error, "PIECE_BYTES", s.piece_bytes,
                            "must be auto, 0 or inf (off), or 4096..1073741824 bytes");
    }
    if ((s.routes < 1) || (s.routes > kMaxRoutes)) {
        return out_of_range(error, "ROUTES", s.routes, "must be 1..65536");
    }
    if ((s.gather_ctas < 1) || (s.gather_ctas > kMaxGatherCtas)) {
        return out_of_range(error, "GATHER_CTAS", s.gather_ctas,
                            "must be 1..1024");
    }
    if (s.initial_seq >= kDefaultSeqLimit) {
        return out_of_range(error, "INITIAL_SEQ", s.initial_seq,
                            "must be below " + std::to_string(kDefaultSeqLimit));
    }
    if (!std::isfinite(s.credit_timeout) || (s.credit_timeout <= 0)) {
        return out_of_range(error, "CREDIT_TIMEOUT", s.credit_timeout,
                            "must be a positive time");
    }
    if (!std::isfinite(s.heartbeat_timeout) || (s.heartbeat_timeout <= 0)) {
        return out_of_range(error, "HEARTBEAT_TIMEOUT", s.heartbeat_timeout,
                            "must be a positive time");
    }
    if (s.warm_lanes > kMaxLanes) {
        return out_of_range(error, "WARM_LANES", s.warm_lanes, "must be 0..64");
    }
    if (!std::isfinite(s.lane_linger) || (s.lane_linger < 0)) {
        return out_of_range(error, "LANE_LINGER", s.lane_linger,
                            "must be a time, 0 or more");
    }
    if (s.cuda_device < -1) {
        return out_of_range(error, "CUDA_DEVICE", s.cuda_device,
                            "must be a GPU index, or -1 for the current one");
    }
    if ((s.relay_slice != 0) &&
        ((s.relay_slice < 64) || (s.relay_slice > g.slot_size))) {
        return out_of_range(error, "RELAY_SLICE", s.relay_slice,
                            "must be 0 (no slicing) or 64..SLOT_SIZE bytes");
    }
    if ((s.relay_slice != 0) && (s.relay_slice_merge >= s.relay_slice)) {
        return out_of_range(error, "RELAY_SLICE_MERGE", s.relay_slice_merge,
                            "must be smaller than UCX_PXN_RELAY_SLICE");
    }
    if (!std::isfinite(s.engine_spin) || (s.engine_spin < 0) || (s.engine_spin > 10e-3)) {
        return out_of_range(error, "ENGINE_SPIN", s.engine_spin,
                            "must be a time of 0..10ms");
    }
    if (!std::isfinite(s.engine_poll) || (s.engine_poll < 1e-6) ||
        (s.engine_poll > 10e-3)) {
        return out_of_range(error, "ENGINE_POLL", s.engine_poll,
                            "must be a time of 1us..10ms");
    }
    std::vector<int> cpus;
    std::string bad_cpus;
    if ((s.engine_cpus != "auto") && (s.engine_cpus != "inherit") &&
        !parse_cpu_list(s.engine_cpus, &cpus, &bad_cpus)) {
        return out_of_range(error, "ENGINE_CPUS", "'" + s.engine_cpus + "'",
                            "must be auto, inherit or a CPU list such as 0-3,8 (" +
                            bad_cpus + ")");
    }
    int nice;
    if ((s.engine_nice != "inherit") && !engine_nice_value(s, &nice)) {
        return out_of_range(error, "ENGINE_NICE", "'" + s.engine_nice + "'",
                            "must be inherit or a nice value of -20..19");
    }
    return UCS_OK;
}

/* auto: only where the sender's copy is the CPU's (a host arena), which
 * takes about as long as the relay's network hop, so that overlapping the
 * two matters; a GPU arena's copy engine is several times faster than the
 * network, and each piece costs it a copy and a doorbell (not measured). */
uint64_t piece_bytes_for(const Settings &s, bool host_arena)
{
    if (s.piece_bytes == kPieceBytesAuto) {
        return host_arena ? kHostPieceBytes : 0;
    }
    return (s.piece_bytes == kPieceBytesInf) ? 0 : s.piece_bytes;
}

bool engine_nice_value(const Settings &s, int *nice)
{
    const std::string &t = s.engine_nice;
    size_t at = ((t.size() > 1) && (t[0] == '-')) ? 1 : 0;
    if ((t.size() - at < 1) || (t.size() - at > 2) ||
        !std::all_of(t.begin() + at, t.end(), [](char c) { return isdigit(c); })) {
        return false;
    }
    *nice = std::stoi(t);
    return (*nice >= -20) && (*nice <= 19);
}

uint64_t relay_footprint(const Geometry &g, bool host_arena)
{
    return control_file_size(g) + (host_arena ? g.arena_size() : 0);
}

bool fit_geometry(Settings *s, uint64_t fs_bytes, bool host_arena,
                  bool *changed)
{
    constexpr uint64_t kMinFitSlotSize = 256ull << 10;
    constexpr uint32_t kMinFitSlots    = 2;
    Geometry &g   = s->geometry;
    const bool dfl = (g == Geometry());
    *changed       = false;
    if (!dfl) {
        return relay_footprint(g, host_arena) <= fs_bytes / 4;
    }
    while (relay_footprint(g, true) > fs_bytes / 4) {
        if (g.slot_size > kMinFitSlotSize) {
            g.slot_size /= 2;
        } else if (g.slots > kMinFitSlots) {
            g.slots = std::max(kMinFitSlots, g.slots / 2);
        } else {
            return false;
        }
        *changed = true;
    }
    return true;
}

} // namespace pxn
