/*
 * A node's pxn registries as Prometheus metric families (prometheus-cpp's
 * MetricFamily), for `ucx_pxn_info --prometheus` and ucx_pxn_exporter:
 * one family per counter of abi.h (a table row each, info_metrics.cc),
 * plus the state of every relay, rail and registry.
 *
 * Contract:
 * - Built from snapshots (info_snapshot.h) only: nothing is read twice,
 *   nothing written. `now_ns` is CLOCK_MONOTONIC of the snapshot.
 * - Names follow Prometheus's conventions: prefix ucx_pxn_, base units
 *   (seconds, bytes), counters end in _total, one metric per family name.
 * - Labels are bounded by what runs on the node: group, node, rail, pid
 *   (of a relay's process), and for ucx_pxn_relay_info device, inner,
 *   arena; ucx_pxn_registry_entries has a state out of a fixed set. No
 *   label carries an epoch, a path or a counter value. Strings read from
 *   files are shown printable ASCII only (other bytes as \xNN), so that a
 *   hostile file cannot break the format.
 * - Per relay entry that was read (its header checked): its relay counters
 *   and state. Sender counters are per process (pid), summed over its
 *   entries (abi.h: the first relay's file holds them, the others zeros).
 *   Two read entries with the same (group, node, rail, pid) (a reused pid
 *   beside a stale entry, a crafted copy) export the one that is up, else
 *   the freshest heartbeat; every entry still counts in
 *   ucx_pxn_registry_entries.
 * - ucx_pxn_rail_up{group, rail}: 1 when a relay of that rail is up (READY,
 *   process alive, heartbeat no older than heartbeat_timeout_s), for every
 *   rail an entry names and every rail of `expected_rails`.
 * - A registry that was not read (missing, squatted, another uid's) still
 *   gives ucx_pxn_registry_readable 0, and its expected rails 0.
 */
#ifndef PXN_TOOLS_INFO_METRICS_H_
#define PXN_TOOLS_INFO_METRICS_H_

#include "info_snapshot.h"

#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

struct MetricsOptions {
    double                   heartbeat_timeout_s = 3.0;
    std::vector<std::string> expected_rails; /* every registry's */
};

std::vector<prometheus::MetricFamily>
registry_metrics(const std::vector<RegistrySnapshot> &registries,
                 uint64_t now_ns, const MetricsOptions &options);

/* ucx_pxn_build_info{version, ucx_version, abi_version} 1. */
prometheus::MetricFamily build_info_metric();

/* The text exposition format (prometheus-cpp's TextSerializer). */
std::string prometheus_text(const std::vector<prometheus::MetricFamily> &families);

} // namespace pxn_tools

#endif
