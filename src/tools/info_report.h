/*
 * ucx_pxn_info's output of registry snapshots (info_snapshot.h): a table for
 * people, or one JSON document written by hand.
 *
 * Contract: strings read from files are never trusted. The table shows
 * bytes outside printable ASCII as \xNN (no terminal control sequence gets
 * through); JSON escapes them as \u00NN, so the document is valid UTF-8
 * whatever a file holds. `now` is CLOCK_MONOTONIC (heartbeat ages). Key and
 * column names follow the field names of abi.h.
 */
#ifndef PXN_TOOLS_INFO_REPORT_H_
#define PXN_TOOLS_INFO_REPORT_H_

#include "info_snapshot.h"

#include <string>
#include <vector>

namespace pxn_tools {

void text_report(const std::vector<RegistrySnapshot> &registries, uint64_t now,
                 std::string *out);

/* `message`: why there is nothing to show (added as "message" when set). */
void json_report(const std::vector<RegistrySnapshot> &registries, uint64_t now,
                 const std::string &message, std::string *out);

} // namespace pxn_tools

#endif
