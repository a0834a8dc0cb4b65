#include "info_report.h"

#include <ucs/pxn/settings.h>

#include <algorithm>
#include <cinttypes>
#include <unistd.h>

namespace pxn_tools {

using namespace pxn;

namespace {

std::string bytes_text(uint64_t n)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    for (; (u < 4) && (n >= 1024) && (n % 1024 == 0); ++u) {
        n /= 1024;
    }
    return strformat("%" PRIu64 " %s", n, units[u]);
}

const char *process_state_name(uint32_t s)
{
    return (s == abi::kProcessInit) ? "INIT" : (s == abi::kProcessReady) ? "READY" :
           (s == abi::kProcessClosing) ? "CLOSING" : "?";
}

const char *arena_kind_name(uint32_t kind)
{
    return (kind == abi::kArenaHostShm) ? "host_shm" :
           (kind == abi::kArenaCudaIpc) ? "cuda_ipc" : "none";
}

std::string heartbeat_text(uint64_t heartbeat_ns, uint64_t now)
{
    if (heartbeat_ns == 0) {
        return "never";
    } else if (heartbeat_ns > now) {
        return "in the future (not this boot's clock?)";
    }
    const double age = double(now - heartbeat_ns) / 1e9;
    return strformat("%.3f s ago%s", age,
                     (age > Settings().heartbeat_timeout) ?
                     " (older than the default UCX_PXN_HEARTBEAT_TIMEOUT, 3 s)" : "");
}

bool pristine(const LaneSnapshot &l)
{
    return (l.state == abi::kLaneFree) && (l.lane_epoch == 0) && (l.head == 0) &&
           (l.doorbell == 0) && (l.reaped == 0) && (l.consumed == 0) &&
           (l.completed == 0) && (l.acked_epoch == 0) && (l.routes == 0) &&
           (l.rkeys == 0) && !l.owner_torn;
}

std::string entry_kind_text(const EntrySnapshot &e)
{
    if (e.kind == kSuffixInit) {
        return "being created";
    } else if ((e.kind == kSuffixArena) || (e.kind == kSuffixWake)) {
        return "stray " + e.kind + " file (no control file)";
    }
    return (e.kind == "unexpected") ? "unexpected file" : "";
}

void text_lanes(const EntrySnapshot &e, std::string *out)
{
    const uint32_t slots = e.header.slots;
    if (std::all_of(e.lanes.begin(), e.lanes.end(), pristine)) {
        *out += strformat("  lanes: none ever claimed\n");
        return;
    }
    *out += strformat("  %4s %-8s %-18s %-16s %-5s %8s %8s %8s %8s %9s %7s %6s %5s\n",
                      "lane", "state", "owner", "lane_epoch", "acked", "head",
                      "doorbell", "reaped", "consumed", "completed", "credit",
                      "reqs", "rkeys");
    for (size_t i = 0; i < e.lanes.size(); ++i) {
        size_t last = i; /* never-claimed lanes: one line for a run */
        while ((last < e.lanes.size()) && pristine(e.lanes[last])) {
            ++last;
        }
        if (last > i) {
            const std::string range = (last - 1 == i) ? std::to_string(i) :
                                      strformat("%zu-%zu", i, last - 1);
            *out += strformat("  %4s never claimed\n", range.c_str());
            i = last - 1;
            continue;
        }
        const LaneSnapshot &l = e.lanes[i];
        bool garbage = false;
        const uint64_t credit  = credit_in_use(l, slots, &garbage);
        const bool     claimed = (l.state == abi::kLaneClaimed);
        const bool     free    = (l.state == abi::kLaneFree);
        const std::string owner =
                claimed ? strformat("%" PRIu32 " %s", l.owner_pid,
                                    l.owner_liveness.c_str()) :
                free    ? "-" : strformat("state %" PRIu32, l.state);
        const char *acked = (l.lane_epoch == 0) ? "-" :
                            (l.acked_epoch == l.lane_epoch) ? "yes" : "no";
        *out += strformat("  %4zu %-8s %-18s %016" PRIx64 " %-5s %8" PRIu64 " %8"
                          PRIu64 " %8" PRIu64 " %8" PRIu64 " %9" PRIu64 " %3"
                          PRIu64 "/%-3" PRIu32 " %6" PRIu32 " %5" PRIu32 "%s%s\n",
                          i, claimed ? "claimed" : free ? "free" : "?",
                          owner.c_str(), l.lane_epoch, acked, l.head, l.doorbell,
                          l.reaped, l.consumed, l.completed, credit, slots,
                          l.routes, l.rkeys,
                          garbage ? " (credit garbage, clamped)" : "",
                          l.owner_torn ? " (owner changing)" : "");
    }
}


/* 10000 -> "10us", 4000000 -> "4ms". */
std::string us_text(uint64_t ns)
{
    return (ns % 1000000 == 0) ? strformat("%" PRIu64 "ms", ns / 1000000) :
                                 strformat("%" PRIu64 "us", ns / 1000);
}

/* "12 samples, mean 14.2 us, <=10us 3 <=50us 9 ..." (empty buckets left
 * out), or "none". */
std::string latency_text(const pxn::abi::LatencyHistogram &h)
{
    if (h.count == 0) {
        return "none";
    }
    std::string text = strformat("%" PRIu64 " samples, mean %.1f us", h.count,
                                 h.sum_ns / 1e3 / h.count);
    for (uint32_t b = 0; b < pxn::abi::kLatencyBuckets; ++b) {
        if (h.buckets[b] == 0) {
            continue;
        }
        text += (b + 1 < pxn::abi::kLatencyBuckets) ?
                strformat(" <=%s %" PRIu64, us_text(pxn::abi::kLatencyBoundsNs[b]).c_str(),
                          h.buckets[b]) :
                strformat(" >%s %" PRIu64,
                          us_text(pxn::abi::kLatencyBoundsNs[b - 1]).c_str(),
                          h.buckets[b]);
    }
    return text;
}

void text_header(const EntrySnapshot &e, uint64_t now, std::string *out)
{
    const abi::ProcessHeader &h = e.header;
    const std::string liveness = (e.liveness == "pid reused") ?
                                 "reused by another process" : e.liveness;
    *out += strformat(" %s, pid %" PRIu32 " %s%s, epoch %016" PRIx64
                      ", heartbeat %s%s\n", process_state_name(e.state), h.pid,
                      liveness.c_str(), is_stale(e.liveness) ? " (STALE)" : "",
                      h.epoch, heartbeat_text(e.heartbeat_ns, now).c_str(),
                      e.sleeping ? ", relay sleeping" : "");
    *out += "  node " + printable(fixed_string(h.node_id, sizeof(h.node_id))) +
            ", rail " + printable(fixed_string(h.rail, sizeof(h.rail))) +
            ", device " + printable(fixed_string(h.device, sizeof(h.device))) +
            ", inner " + printable(fixed_string(h.inner_tl, sizeof(h.inner_tl))) +
            "\n";
    *out += strformat("  geometry %" PRIu32 " lanes x %" PRIu32 " slots x %s, "
                      "max plan %" PRIu32 ", arena %s %s", h.lanes, h.slots,
                      bytes_text(h.slot_size).c_str(), h.max_plan,
                      arena_kind_name(h.arena_kind),
                      bytes_text(h.arena_size).c_str());
    for (const auto &f : e.files) {
        *out += ", " + f + " file";
    }
    const auto &r = e.counters.relay;
    const auto &s = e.counters.sender;
    const auto age = [now](uint64_t at) {
        return (at == 0) ? std::string("never") :
               strformat("%.3f s ago", (now > at) ? (now - at) / 1e9 : 0.0);
    };
    *out += strformat("\n  relay:  pieces %" PRIu64 " bytes %" PRIu64
                      " failed_pieces %" PRIu64 " rejected %" PRIu64 " routes %"
                      PRIu64 " (%" PRIu64 " active) route_errors %" PRIu64
                      " lane_resets %" PRIu64 " inflight %" PRIu64
                      " inner_ops %" PRIu64 " (%" PRIu64 " sgl)"
                      " gets %" PRIu64 " (%" PRIu64 " bytes)"
                      ", last completion %s\n", r.pieces, r.bytes,
                      r.failed_pieces, r.rejected, r.routes, r.routes_active,
                      r.route_errors, r.lane_resets, r.inflight, r.inner_ops,
                      r.inner_sgl_ops, r.get_pieces, r.get_bytes,
                      age(r.last_completion_ns).c_str());
    *out += strformat("  sender: pieces %" PRIu64 " bytes %" PRIu64
                      " credit_stalls %" PRIu64 " failed_ops %" PRIu64
                      " fallback_ops %" PRIu64 " fallback_bytes %" PRIu64
                      " lanes %" PRIu64 " gather_pieces %" PRIu64
                      " gets %" PRIu64 " (%" PRIu64 " bytes)"
                      ", last completion %s\n", s.pieces, s.bytes, s.credit_stalls,
                      s.failed_ops, s.fallback_ops, s.fallback_bytes, s.lanes,
                      s.gather_pieces, s.get_pieces, s.get_bytes,
                      age(s.last_completion_ns).c_str());
    *out += strformat("  am:     relay pieces %" PRIu64 " messages %" PRIu64
                      " bytes %" PRIu64 " credit_waits %" PRIu64 "; sender sent %"
                      PRIu64 " received %" PRIu64 " refused %" PRIu64 "\n",
                      r.am_pieces, r.am_messages, r.am_bytes, r.am_credit_waits,
                      s.am_sent, s.am_received, s.am_refused);
    *out += strformat("  memory: lanes_backed %" PRIu64 " lane_commits %" PRIu64
                      " (%.1f ms) warm_claims %" PRIu64 "; sender lane_open %.1f ms"
                      " (mapping %.1f ms)\n", r.lanes_backed, r.lane_commits,
                      r.lane_commit_ns / 1e6, r.warm_claims, s.lane_open_ns / 1e6,
                      s.lane_map_ns / 1e6);
    *out += strformat("  held:   rkeys %" PRIu64 "; fenced pieces %" PRIu64
                      "; sender spare_misses %" PRIu64 "\n", r.rkeys_held,
                      r.fenced, s.spare_misses);
    *out += "  waits:  pickup " + latency_text(r.pickup) + "; completion " +
            latency_text(s.completion) + "\n";
}

void text_entry(const EntrySnapshot &e, uint64_t now, std::string *out)
{
    *out += printable(e.name) + ":";
    const std::string kind = entry_kind_text(e);
    if (e.read()) {
        *out += kind.empty() ? "" : " " + kind + ",";
        text_header(e, now, out);
        text_lanes(e, out);
    } else {
        *out += kind.empty() ? "" : " " + kind;
        if (!e.reason.empty()) {
            *out += (kind.empty() ? "" : ",") + std::string(" NOT READ: ") +
                    printable(e.reason);
        }
        if (e.parsed) {
            *out += strformat("; pid %" PRIu32 " %s", e.parsed_name.pid,
                              e.liveness.c_str());
        }
        if (e.stat_ok) {
            *out += strformat("; %s, %" PRIu64 " bytes",
                              file_type(e.st.st_mode).c_str(),
                              uint64_t(e.st.st_size));
        }
        *out += "\n";
    }
    for (const auto &p : e.problems) {
        *out += "  problem: " + printable(p) + "\n";
    }
}

/* JSON, written by hand: one document */

class Json {
public:
    Json &begin(char bracket, const char *key = nullptr)
    {
        prefix(key);
        out_ += bracket;
        comma_ = false;
        return *this;
    }
    Json &end(char bracket)
    {
        out_ += bracket;
        comma_ = true;
        return *this;
    }
    Json &str(const char *key, const std::string &value)
    {
        prefix(key);
        quote(value);
        comma_ = true;
        return *this;
    }
    Json &num(const char *key, uint64_t value)
    {
        return raw(key, strformat("%" PRIu64, value));
    }
    Json &boolean(const char *key, bool value)
    {
        return raw(key, value ? "true" : "false");
    }
    Json &raw(const char *key, const std::string &text)
    {
        prefix(key);
        out_ += text;
        comma_ = true;
        return *this;
    }
    const std::string &text() const { return out_; }

private:
    void prefix(const char *key)
    {
        out_ += comma_ ? "," : "";
        if (key != nullptr) {
            quote(key);
            out_ += ':';
        }
    }
    /* Bytes outside ASCII are written as \u00XX: the document stays valid
     * UTF-8 whatever a file holds. */
    void quote(const std::string &s)
    {
        out_ += '"';
        for (unsigned char c : s) {
            if ((c == '"') || (c == '\\')) {
                out_ += '\\';
                out_ += char(c);
            } else if ((c < 0x20) || (c >= 0x7f)) {
                out_ += strformat("\\u%04x", c);
            } else {
                out_ += char(c);
            }
        }
        out_ += '"';
    }

    std::string out_;
    bool        comma_ = false;
};

/* "last_completion_age_ns": null when none yet. */
void completion_age(Json &j, uint64_t now, uint64_t at)
{
    if (at == 0) {
        j.raw("last_completion_age_ns", "null");
    } else {
        j.num("last_completion_age_ns", (now > at) ? now - at : 0);
    }
}

/* "<key>": {"samples": n, "sum_ns": s, "buckets": [{"le_ns": 10000,
 * "count": c}, ..., {"le_ns": null, "count": c}]} (not cumulative). */
void latency_json(Json &j, const char *key, const pxn::abi::LatencyHistogram &h)
{
    j.begin('{', key).num("samples", h.count).num("sum_ns", h.sum_ns);
    j.begin('[', "buckets");
    for (uint32_t b = 0; b < pxn::abi::kLatencyBuckets; ++b) {
        j.begin('{');
        if (b + 1 < pxn::abi::kLatencyBuckets) {
            j.num("le_ns", pxn::abi::kLatencyBoundsNs[b]);
        } else {
            j.raw("le_ns", "null");
        }
        j.num("count", h.buckets[b]).end('}');
    }
    j.end(']').end('}');
}

void json_entry(const EntrySnapshot &e, uint64_t now, Json &j)
{
    j.begin('{').str("file", e.name).str("kind", e.kind).boolean("read", e.read());
    if (!e.reason.empty()) {
        j.str("reason", e.reason);
    }
    if (e.parsed) {
        j.num("pid", e.parsed_name.pid)
         .str("epoch", strformat("%016" PRIx64, e.parsed_name.epoch));
    }
    if (e.stat_ok) {
        j.num("file_uid", e.st.st_uid)
         .str("file_mode", strformat("%04o", unsigned(e.st.st_mode & 07777)))
         .str("file_type", file_type(e.st.st_mode))
         .num("file_bytes", uint64_t(e.st.st_size));
    }
    if (!e.liveness.empty()) {
        j.str("process", e.liveness).boolean("stale", is_stale(e.liveness));
    }
    j.begin('[', "problems");
    for (const auto &p : e.problems) {
        j.str(nullptr, p);
    }
    j.end(']');
    if (!e.read()) {
        j.end('}');
        return;
    }
    const abi::ProcessHeader &h = e.header;
    j.num("start_time", h.start_time)
     .str("node_id", fixed_string(h.node_id, sizeof(h.node_id)))
     .str("rail", fixed_string(h.rail, sizeof(h.rail)))
     .str("device", fixed_string(h.device, sizeof(h.device)))
     .str("inner_tl", fixed_string(h.inner_tl, sizeof(h.inner_tl)))
     .str("state", process_state_name(e.state)).num("state_value", e.state)
     .boolean("relay_sleeping", e.sleeping != 0)
     .num("heartbeat_ns", e.heartbeat_ns);
    if ((e.heartbeat_ns != 0) && (e.heartbeat_ns <= now)) {
        j.num("heartbeat_age_ns", now - e.heartbeat_ns);
    } else {
        j.raw("heartbeat_age_ns", "null");
    }
    j.begin('{', "geometry").num("lanes", h.lanes).num("slots", h.slots)
     .num("slot_size", h.slot_size).num("max_plan", h.max_plan)
     .str("arena_kind", arena_kind_name(h.arena_kind))
     .num("arena_size", h.arena_size).num("file_size", h.file_size).end('}');
    j.begin('[', "files");
    for (const auto &f : e.files) {
        j.str(nullptr, f);
    }
    j.end(']');
    const auto &r = e.counters.relay;
    const auto &s = e.counters.sender;
    j.begin('{', "counters").begin('{', "relay").num("pieces", r.pieces)
     .num("bytes", r.bytes).num("failed_pieces", r.failed_pieces)
     .num("rejected", r.rejected).num("routes", r.routes)
     .num("routes_active", r.routes_active)
     .num("route_errors", r.route_errors).num("lane_resets", r.lane_resets)
     .num("inflight", r.inflight).num("lanes_backed", r.lanes_backed)
     .num("lane_commits", r.lane_commits)
     .num("lane_commit_ns", r.lane_commit_ns)
     .num("warm_claims", r.warm_claims).num("fenced", r.fenced)
     .num("rkeys_held", r.rkeys_held).num("inner_ops", r.inner_ops)
     .num("inner_sgl_ops", r.inner_sgl_ops).num("get_pieces", r.get_pieces)
     .num("get_bytes", r.get_bytes).num("am_pieces", r.am_pieces)
     .num("am_messages", r.am_messages).num("am_bytes", r.am_bytes)
     .num("am_credit_waits", r.am_credit_waits);
    latency_json(j, "pickup", r.pickup);
    completion_age(j, now, r.last_completion_ns);
    j.end('}');
    j.begin('{', "sender").num("pieces", s.pieces).num("bytes", s.bytes)
     .num("credit_stalls", s.credit_stalls).num("failed_ops", s.failed_ops)
     .num("fallback_ops", s.fallback_ops).num("fallback_bytes", s.fallback_bytes)
     .num("lanes", s.lanes).num("gather_pieces", s.gather_pieces)
     .num("lane_open_ns", s.lane_open_ns).num("lane_map_ns", s.lane_map_ns)
     .num("spare_misses", s.spare_misses).num("get_pieces", s.get_pieces)
     .num("get_bytes", s.get_bytes).num("am_sent", s.am_sent)
     .num("am_received", s.am_received).num("am_refused", s.am_refused);
    latency_json(j, "completion", s.completion);
    completion_age(j, now, s.last_completion_ns);
    j.end('}').end('}');
    j.begin('[', "lanes");
    for (size_t i = 0; i < e.lanes.size(); ++i) {
        const LaneSnapshot &l = e.lanes[i];
        bool garbage = false;
        const uint64_t credit = credit_in_use(l, h.slots, &garbage);
        j.begin('{').num("index", i)
         .str("state", (l.state == abi::kLaneClaimed) ? "claimed" :
                       (l.state == abi::kLaneFree) ? "free" : "unknown")
         .num("state_value", l.state).num("owner_pid", l.owner_pid);
        if (!l.owner_liveness.empty()) {
            j.str("owner", l.owner_liveness);
        }
        j.num("owner_start_time", l.owner_start)
         .str("owner_epoch", strformat("%016" PRIx64, l.owner_epoch))
         .str("lane_epoch", strformat("%016" PRIx64, l.lane_epoch))
         .str("acknowledged_epoch", strformat("%016" PRIx64, l.acked_epoch))
         .boolean("owner_changing", l.owner_torn).num("initial_seq", l.initial_seq)
         .num("head", l.head).num("doorbell", l.doorbell).num("reaped", l.reaped)
         .num("consumed", l.consumed).num("completed", l.completed)
         .num("credit_in_use", credit).boolean("credit_garbage", garbage)
         .num("route_requests_pending", l.routes).num("rkeys_in_use", l.rkeys).end('}');
    }
    j.end(']').end('}');
}

} // namespace

void text_report(const std::vector<RegistrySnapshot> &regs, uint64_t now,
                 std::string *out)
{
    for (const RegistrySnapshot &reg : regs) {
        *out += strformat("registry %s (uid %" PRIu64 ", group %s)",
                          printable(reg.path).c_str(), reg.uid,
                          printable(reg.group).c_str());
        if (!reg.reason.empty()) {
            *out += ": " + printable(reg.reason) + "\n";
            continue;
        }
        *out += strformat(": %zu entr%s\n", reg.entries.size(),
                          (reg.entries.size() == 1) ? "y" : "ies");
        for (const auto &p : reg.problems) {
            *out += "problem: " + printable(p) + "\n";
        }
        for (const EntrySnapshot &e : reg.entries) {
            text_entry(e, now, out);
        }
    }
}

void json_report(const std::vector<RegistrySnapshot> &regs, uint64_t now,
                 const std::string &message, std::string *out)
{
    Json j;
    j.begin('{').str("tool", "ucx_pxn_info").num("abi_version", abi::kAbiVersion)
     .num("uid", geteuid()).num("monotonic_ns", now);
    if (!message.empty()) {
        j.str("message", message);
    }
    j.begin('[', "registries");
    for (const RegistrySnapshot &reg : regs) {
        j.begin('{').str("path", reg.path).num("uid", reg.uid)
         .str("group", reg.group).boolean("read", reg.reason.empty());
        if (!reg.reason.empty()) {
            j.str("reason", reg.reason);
        }
        j.begin('[', "problems");
        for (const auto &p : reg.problems) {
            j.str(nullptr, p);
        }
        j.end(']').begin('[', "entries");
        for (const EntrySnapshot &e : reg.entries) {
            json_entry(e, now, j);
        }
        j.end(']').end('}');
    }
    j.end(']').end('}');
    *out += j.text() + "\n";
}

} // namespace pxn_tools
