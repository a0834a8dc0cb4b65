#include "info_metrics.h"

#include "health_check.h"

#include "pxn_autoconf.h"  /* PACKAGE_VERSION */
#include "pxn_ucx_build.h" /* PXN_UCX_BUILT_VERSION */

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cinttypes>
#include <limits>
#include <map>
#include <set>

namespace pxn_tools {

using namespace pxn;
using prometheus::MetricType;
using Labels = std::vector<prometheus::ClientMetric::Label>;

namespace {

/* One row per counter of abi.h: a new counter is one line here (and one
 * in docs/operator-guide.md, "Prometheus metrics"). `scale` turns the
 * stored unit into the base unit (ns -> s). Histograms: HistogramRow. */
template<typename Block> struct CounterRow {
    const char       *name;
    MetricType        type;
    uint64_t Block::*field;
    double            scale;
    const char       *help;
};

using RelayRow  = CounterRow<abi::RelayCounters>;
using SenderRow = CounterRow<abi::SenderCounters>;
constexpr MetricType kCounter = MetricType::Counter;
constexpr MetricType kGauge   = MetricType::Gauge;

const RelayRow kRelayRows[] = {
    {"ucx_pxn_relay_pieces_total", kCounter, &abi::RelayCounters::pieces, 1,
     "Pieces the relay forwarded successfully"},
    {"ucx_pxn_relay_bytes_total", kCounter, &abi::RelayCounters::bytes, 1,
     "Bytes the relay forwarded successfully"},
    {"ucx_pxn_relay_get_pieces_total", kCounter, &abi::RelayCounters::get_pieces, 1,
     "Of the pieces forwarded successfully, gets"},
    {"ucx_pxn_relay_get_bytes_total", kCounter, &abi::RelayCounters::get_bytes, 1,
     "Of the bytes forwarded successfully, those of gets"},
    {"ucx_pxn_relay_am_pieces_total", kCounter, &abi::RelayCounters::am_pieces, 1,
     "Of the pieces forwarded successfully, active messages"},
    {"ucx_pxn_relay_am_messages_total", kCounter,
     &abi::RelayCounters::am_messages, 1,
     "Active messages the relay handed to its inner transport"},
    {"ucx_pxn_relay_am_bytes_total", kCounter, &abi::RelayCounters::am_bytes, 1,
     "Payload bytes of the active messages the relay forwarded"},
    {"ucx_pxn_relay_am_credit_waits_total", kCounter,
     &abi::RelayCounters::am_credit_waits, 1,
     "Times an active-message piece waited for its target's credit"},
    {"ucx_pxn_relay_failed_pieces_total", kCounter,
     &abi::RelayCounters::failed_pieces, 1,
     "Pieces that failed in the relay's inner transport"},
    {"ucx_pxn_relay_rejected_descriptors_total", kCounter,
     &abi::RelayCounters::rejected, 1, "Invalid descriptors the relay refused"},
    {"ucx_pxn_relay_fenced_pieces_total", kCounter, &abi::RelayCounters::fenced, 1,
     "Pieces not (wholly) forwarded because their sender had given up on them"},
    {"ucx_pxn_relay_routes_granted_total", kCounter, &abi::RelayCounters::routes, 1,
     "Route requests the relay granted"},
    {"ucx_pxn_relay_route_errors_total", kCounter,
     &abi::RelayCounters::route_errors, 1, "Route requests the relay refused"},
    {"ucx_pxn_relay_lane_resets_total", kCounter, &abi::RelayCounters::lane_resets,
     1, "Lane claims and renewals the relay acknowledged"},
    {"ucx_pxn_relay_inner_operations_total", kCounter,
     &abi::RelayCounters::inner_ops, 1,
     "Operations the relay posted to its inner transport (an SGL counts once)"},
    {"ucx_pxn_relay_inner_sgl_operations_total", kCounter,
     &abi::RelayCounters::inner_sgl_ops, 1,
     "Scatter-gather operations among the inner operations"},
    {"ucx_pxn_relay_lane_commits_total", kCounter,
     &abi::RelayCounters::lane_commits, 1, "Lane memories the relay backed"},
    {"ucx_pxn_relay_lane_commit_seconds_total", kCounter,
     &abi::RelayCounters::lane_commit_ns, 1e-9,
     "Engine time spent backing lane memories"},
    {"ucx_pxn_relay_warm_claims_total", kCounter, &abi::RelayCounters::warm_claims,
     1, "Claims acknowledged on a lane whose memory was still backed"},
    {"ucx_pxn_relay_inflight_pieces", kGauge, &abi::RelayCounters::inflight, 1,
     "Pieces being forwarded now"},
    {"ucx_pxn_relay_routes_active", kGauge, &abi::RelayCounters::routes_active, 1,
     "Routes (inner endpoints) the relay holds now"},
    {"ucx_pxn_relay_rkeys_held", kGauge, &abi::RelayCounters::rkeys_held, 1,
     "Remote keys the relay holds unpacked now"},
    {"ucx_pxn_relay_lanes_backed", kGauge, &abi::RelayCounters::lanes_backed, 1,
     "Lanes of the relay with staging memory now (claimed or warm)"},
};

const SenderRow kSenderRows[] = {
    {"ucx_pxn_sender_pieces_total", kCounter, &abi::SenderCounters::pieces, 1,
     "Pieces the process published to relays"},
    {"ucx_pxn_sender_bytes_total", kCounter, &abi::SenderCounters::bytes, 1,
     "Bytes the process published to relays"},
    {"ucx_pxn_sender_get_pieces_total", kCounter, &abi::SenderCounters::get_pieces,
     1, "Of the pieces published to relays, gets"},
    {"ucx_pxn_sender_get_bytes_total", kCounter, &abi::SenderCounters::get_bytes, 1,
     "Of the bytes published to relays, those of gets"},
    {"ucx_pxn_sender_am_sent_total", kCounter, &abi::SenderCounters::am_sent, 1,
     "Active messages the process published to relays"},
    {"ucx_pxn_sender_am_received_total", kCounter,
     &abi::SenderCounters::am_received, 1,
     "Active messages handed to the handlers of the process's interfaces"},
    {"ucx_pxn_sender_am_refused_total", kCounter, &abi::SenderCounters::am_refused,
     1, "Active-message frames the process's ports dropped"},
    {"ucx_pxn_sender_credit_stalls_total", kCounter,
     &abi::SenderCounters::credit_stalls, 1, "Times a lane's ring was full"},
    {"ucx_pxn_sender_failed_operations_total", kCounter,
     &abi::SenderCounters::failed_ops, 1, "Operations completed with an error"},
    {"ucx_pxn_sender_fallback_operations_total", kCounter,
     &abi::SenderCounters::fallback_ops, 1,
     "Operations sent on the direct path instead of through a relay"},
    {"ucx_pxn_sender_fallback_bytes_total", kCounter,
     &abi::SenderCounters::fallback_bytes, 1,
     "Bytes sent on the direct path instead of through a relay"},
    {"ucx_pxn_sender_gather_pieces_total", kCounter,
     &abi::SenderCounters::gather_pieces, 1,
     "GPU pieces staged by the gather kernel"},
    {"ucx_pxn_sender_spare_misses_total", kCounter,
     &abi::SenderCounters::spare_misses, 1,
     "Endpoints created while a lane had no spare relay endpoint"},
    {"ucx_pxn_sender_lane_open_seconds_total", kCounter,
     &abi::SenderCounters::lane_open_ns, 1e-9,
     "Time from lane claim to lane ready, summed over the lanes opened"},
    {"ucx_pxn_sender_lane_map_seconds_total", kCounter,
     &abi::SenderCounters::lane_map_ns, 1e-9,
     "Of the lane open time, the mapping of the lanes' slots"},
    {"ucx_pxn_sender_lanes_held", kGauge, &abi::SenderCounters::lanes, 1,
     "Lanes the process holds now"},
};

/* Latency histograms of abi.h (LatencyHistogram), one row each. */
template<typename Block> struct HistogramRow {
    const char                      *name;
    abi::LatencyHistogram Block::*field;
    const char                      *help;
};

const HistogramRow<abi::RelayCounters> kRelayHistograms[] = {
    {"ucx_pxn_relay_pickup_seconds", &abi::RelayCounters::pickup,
     "From a doorbell rung by a sender's CPU to the relay taking its piece"},
};

const HistogramRow<abi::SenderCounters> kSenderHistograms[] = {
    {"ucx_pxn_sender_completion_seconds", &abi::SenderCounters::completion,
     "From the relay writing a completion to the sender reaping it"},
};

/* Families in the order they are first added, each sample appended. */
class Families {
public:
    void add(const std::string &name, MetricType type, const std::string &help,
             const Labels &labels, double value)
    {
        auto it = index_.find(name);
        if (it == index_.end()) {
            it = index_.emplace(name, families_.size()).first;
            families_.push_back({name, help, type, {}});
        }
        prometheus::ClientMetric m;
        m.label = labels;
        (type == kCounter) ? (m.counter.value = value) : (m.gauge.value = value);
        families_[it->second].metric.push_back(m);
    }
    /* abi.h's buckets (not cumulative, the last one unbounded) as
     * Prometheus's (cumulative, upper bounds in seconds, +Inf last). */
    void add_histogram(const std::string &name, const std::string &help,
                       const Labels &labels, const abi::LatencyHistogram &h)
    {
        auto it = index_.find(name);
        if (it == index_.end()) {
            it = index_.emplace(name, families_.size()).first;
            families_.push_back({name, help, MetricType::Histogram, {}});
        }
        prometheus::ClientMetric m;
        m.label                  = labels;
        m.histogram.sample_count = h.count;
        m.histogram.sample_sum   = double(h.sum_ns) / 1e9;
        uint64_t cumulative      = 0;
        for (uint32_t b = 0; b < abi::kLatencyBuckets; ++b) {
            cumulative += h.buckets[b];
            m.histogram.bucket.push_back(
                    {cumulative, (b + 1 < abi::kLatencyBuckets) ?
                                 double(abi::kLatencyBoundsNs[b]) / 1e9 :
                                 std::numeric_limits<double>::infinity()});
        }
        families_[it->second].metric.push_back(m);
    }
    /* A family with no sample yet: declared, so that its HELP and TYPE
     * show even before anything is there to count. */
    void declare(const std::string &name, MetricType type, const std::string &help)
    {
        if (index_.count(name) == 0) {
            index_.emplace(name, families_.size());
            families_.push_back({name, help, type, {}});
        }
    }
    std::vector<prometheus::MetricFamily> take() { return std::move(families_); }

private:
    std::map<std::string, size_t>         index_;
    std::vector<prometheus::MetricFamily> families_;
};

Labels with(Labels labels, const char *name, const std::string &value)
{
    labels.push_back({name, value});
    return labels;
}

double age_s(uint64_t at_ns, uint64_t now_ns)
{
    return (at_ns >= now_ns) ? 0.0 : double(now_ns - at_ns) / 1e9;
}

const char *arena_name(uint32_t kind)
{
    return (kind == abi::kArenaHostShm) ? "host_shm" :
           (kind == abi::kArenaCudaIpc) ? "cuda_ipc" : "none";
}

/* The state word of ucx_pxn_registry_entries for an entry. */
const char *entry_state(const EntrySnapshot &e)
{
    if ((e.kind != "ctl") && (e.kind != "init")) {
        return "other";
    } else if (is_stale(e.liveness)) {
        return "stale";
    } else if (!e.read()) {
        return "unreadable";
    }
    return (e.state == abi::kProcessReady) ? "ready" :
           (e.state == abi::kProcessInit) ? "starting" :
           (e.state == abi::kProcessClosing) ? "closing" : "other";
}

void relay_metrics(const RegistrySnapshot &reg, const EntrySnapshot &e,
                   uint64_t now_ns, const MetricsOptions &o, Families *f)
{
    const Labels labels = {{"group", printable(reg.group)},
                           {"node", printable(fixed_string(e.header.node_id,
                                                           sizeof(e.header.node_id)))},
                           {"rail", printable(entry_rail(e))},
                           {"pid", std::to_string(e.header.pid)}};
    std::string why;
    f->add("ucx_pxn_relay_up", kGauge,
           "1 when the relay is READY, its process alive and its heartbeat fresh",
           labels, relay_is_up(e, now_ns, o.heartbeat_timeout_s, &why) ? 1 : 0);
    Labels info = with(labels, "device",
                       printable(fixed_string(e.header.device,
                                              sizeof(e.header.device))));
    info = with(info, "inner", printable(fixed_string(e.header.inner_tl,
                                                      sizeof(e.header.inner_tl))));
    f->add("ucx_pxn_relay_info", kGauge,
           "The relay's device, inner transport and arena kind, as labels", 
           with(info, "arena", arena_name(e.header.arena_kind)), 1);
    f->add("ucx_pxn_relay_heartbeat_age_seconds", kGauge,
           "Age of the relay's last heartbeat", labels, age_s(e.heartbeat_ns, now_ns));
    std::set<uint32_t> senders;
    size_t             claimed = 0;
    for (const LaneSnapshot &l : e.lanes) {
        if (l.state == abi::kLaneClaimed) {
            ++claimed;
            if (l.owner_liveness == "alive") {
                senders.insert(l.owner_pid);
            }
        }
    }
    f->add("ucx_pxn_relay_lanes", kGauge, "Lanes of the relay (UCX_PXN_LANES)",
           labels, double(e.lanes.size()));
    f->add("ucx_pxn_relay_lanes_claimed", kGauge, "Lanes claimed by a sender now",
           labels, double(claimed));
    f->add("ucx_pxn_relay_senders_alive", kGauge,
           "Distinct live processes holding a lane of the relay", labels,
           double(senders.size()));
    const Geometry g = header_geometry(e.header);
    f->add("ucx_pxn_relay_staging_bytes", kGauge,
           "Staging memory the relay holds now (host or GPU): lanes backed "
           "times their slots", labels,
           double(e.counters.relay.lanes_backed) * double(g.slots) *
           double(g.slot_size));
    f->add("ucx_pxn_relay_shm_bytes", kGauge,
           "Bytes its control and arena files hold in the registry's file system",
           labels, double(entry_allocated_bytes(e)));
    for (const RelayRow &row : kRelayRows) {
        f->add(row.name, row.type, row.help, labels,
               double(e.counters.relay.*row.field) * row.scale);
    }
    for (const auto &row : kRelayHistograms) {
        f->add_histogram(row.name, row.help, labels, e.counters.relay.*row.field);
    }
    f->declare("ucx_pxn_relay_last_completion_age_seconds", kGauge,
               "Age of the last completion the relay wrote (absent: none yet)");
    if (e.counters.relay.last_completion_ns != 0) {
        f->add("ucx_pxn_relay_last_completion_age_seconds", kGauge, "", labels,
               age_s(e.counters.relay.last_completion_ns, now_ns));
    }
}

/* Sender counters of one process: summed over its entries. */
struct SenderTotals {
    Labels              labels;
    abi::SenderCounters c = {};
    uint64_t            last_completion_ns = 0;
};

void add_sender(const RegistrySnapshot &reg, const EntrySnapshot &e,
                std::map<uint32_t, SenderTotals> *senders)
{
    SenderTotals &t = (*senders)[e.header.pid];
    t.labels = {{"group", printable(reg.group)},
                {"node", printable(fixed_string(e.header.node_id,
                                                sizeof(e.header.node_id)))},
                {"pid", std::to_string(e.header.pid)}};
    for (const SenderRow &row : kSenderRows) {
        t.c.*row.field += e.counters.sender.*row.field;
    }
    for (const auto &row : kSenderHistograms) {
        abi::LatencyHistogram       &sum = t.c.*row.field;
        const abi::LatencyHistogram &add = e.counters.sender.*row.field;
        sum.count  += add.count;
        sum.sum_ns += add.sum_ns;
        for (uint32_t b = 0; b < abi::kLatencyBuckets; ++b) {
            sum.buckets[b] += add.buckets[b];
        }
    }
    t.last_completion_ns = std::max(t.last_completion_ns,
                                    e.counters.sender.last_completion_ns);
}

/* Of entries with the same labels, the one to export: up, else freshest. */
bool better(const EntrySnapshot &a, const EntrySnapshot &b, uint64_t now_ns,
            double timeout_s)
{
    std::string why;
    const bool up_a = relay_is_up(a, now_ns, timeout_s, &why);
    const bool up_b = relay_is_up(b, now_ns, timeout_s, &why);
    return (up_a != up_b) ? up_a : (a.heartbeat_ns > b.heartbeat_ns);
}

void registry(const RegistrySnapshot &reg, uint64_t now_ns,
              const MetricsOptions &o, Families *f)
{
    const Labels group = {{"group", printable(reg.group)}};
    f->add("ucx_pxn_registry_readable", kGauge,
           "1 when the registry directory was read (0: missing, squatted, "
           "another uid's)", group, reg.reason.empty() ? 1 : 0);
    std::map<std::string, std::string> rails_up; /* rail -> "" or why not */
    for (const std::string &rail : o.expected_rails) {
        rails_up[rail] = "expected";
    }
    if (reg.reason.empty()) {
        std::map<std::string, double> states = {
                {"ready", 0}, {"starting", 0}, {"closing", 0}, {"stale", 0},
                {"unreadable", 0}, {"other", 0}};
        double stale_bytes = 0, problems = double(reg.problems.size());
        std::map<std::string, const EntrySnapshot*> chosen;
        std::map<uint32_t, SenderTotals>            senders;
        for (const EntrySnapshot &e : reg.entries) {
            const char *state = entry_state(e);
            states[state] += 1;
            problems += double(e.problems.size());
            if (is_stale(e.liveness) || (e.kind == "arena") || (e.kind == "wake")) {
                stale_bytes += double(entry_allocated_bytes(e));
            }
            if (!e.read()) {
                continue;
            }
            const std::string rail = printable(entry_rail(e));
            std::string why;
            if (relay_is_up(e, now_ns, o.heartbeat_timeout_s, &why)) {
                rails_up[rail] = "";
            } else if (rails_up.count(rail) == 0) {
                rails_up[rail] = why;
            }
            const std::string key = printable(fixed_string(e.header.node_id,
                                              sizeof(e.header.node_id))) + "\n" +
                                    rail + "\n" + std::to_string(e.header.pid);
            const EntrySnapshot *&c = chosen[key];
            c = ((c == nullptr) || better(e, *c, now_ns, o.heartbeat_timeout_s)) ?
                &e : c;
        }
        for (const auto &s : states) {
            f->add("ucx_pxn_registry_entries", kGauge,
                   "Control files in the registry by state (ready, starting, "
                   "closing, stale: process gone, unreadable, other: stray or "
                   "foreign files)", with(group, "state", s.first), s.second);
        }
        f->add("ucx_pxn_registry_stale_bytes", kGauge,
               "Bytes that files of ended processes hold in the registry's file "
               "system (ucx_pxn_info --clean frees them)", group, stale_bytes);
        f->add("ucx_pxn_registry_problems", kGauge,
               "Files or directories of the registry with a wrong mode or size",
               group, problems);
        for (const auto &c : chosen) {
            relay_metrics(reg, *c.second, now_ns, o, f);
            add_sender(reg, *c.second, &senders);
        }
        for (const auto &s : senders) {
            for (const SenderRow &row : kSenderRows) {
                f->add(row.name, row.type, row.help, s.second.labels,
                       double(s.second.c.*row.field) * row.scale);
            }
            for (const auto &row : kSenderHistograms) {
                f->add_histogram(row.name, row.help, s.second.labels,
                                 s.second.c.*row.field);
            }
            f->declare("ucx_pxn_sender_last_completion_age_seconds", kGauge,
                       "Age of the last completion the process reaped (absent: "
                       "none yet)");
            if (s.second.last_completion_ns != 0) {
                f->add("ucx_pxn_sender_last_completion_age_seconds", kGauge, "",
                       s.second.labels, age_s(s.second.last_completion_ns, now_ns));
            }
        }
    }
    for (const auto &r : rails_up) {
        f->add("ucx_pxn_rail_up", kGauge,
               "1 when a relay of the rail is up (READY, alive, fresh heartbeat)",
               with(group, "rail", r.first), r.second.empty() ? 1 : 0);
    }
}

} // namespace

std::vector<prometheus::MetricFamily>
registry_metrics(const std::vector<RegistrySnapshot> &registries, uint64_t now_ns,
                 const MetricsOptions &options)
{
    Families f;
    for (const RegistrySnapshot &reg : registries) {
        registry(reg, now_ns, options, &f);
    }
    return f.take();
}

prometheus::MetricFamily build_info_metric()
{
    prometheus::ClientMetric m;
    m.label       = {{"version", PACKAGE_VERSION},
                     {"ucx_version", PXN_UCX_BUILT_VERSION},
                     {"abi_version", std::to_string(abi::kAbiVersion)}};
    m.gauge.value = 1;
    return {"ucx_pxn_build_info",
            "pxn's version, the UCX it was built for and its registry ABI, as "
            "labels", MetricType::Gauge, {m}};
}

std::string prometheus_text(const std::vector<prometheus::MetricFamily> &families)
{
    return prometheus::TextSerializer().Serialize(families);
}

} // namespace pxn_tools
