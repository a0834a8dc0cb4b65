#include "health_check.h"

#include <ucs/pxn/rail_map.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <map>
#include <set>

namespace pxn_tools {

using namespace pxn;

namespace {

std::string mib(uint64_t bytes)
{
    return strformat("%.1f MiB", double(bytes) / (1024.0 * 1024.0));
}

std::vector<std::string> sorted_names(const std::string &dir)
{
    std::vector<std::string> names;
    if (DIR *d = opendir(dir.c_str())) {
        while (const struct dirent *de = readdir(d)) {
            if (de->d_name[0] != '.') {
                names.push_back(de->d_name);
            }
        }
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string first_line(const std::string &path)
{
    std::ifstream in(path);
    std::string   line;
    std::getline(in, line);
    return line;
}

/* Why no relay of `rail` is up: one clause per entry of that rail. */
std::string rail_failure(const RegistrySnapshot &reg, const std::string &rail,
                         uint64_t now_ns, double timeout_s)
{
    if (!reg.reason.empty()) {
        return "registry " + reg.path + " " + reg.reason;
    }
    std::string why;
    for (const EntrySnapshot &e : reg.entries) {
        std::string entry_why;
        if (!e.read() || (entry_rail(e) != rail) ||
            relay_is_up(e, now_ns, timeout_s, &entry_why)) {
            continue;
        }
        why += (why.empty() ? "" : "; ") +
               strformat("relay pid %" PRIu32 " ", e.header.pid) + entry_why;
    }
    return why.empty() ? "no relay registered for it" : why;
}

} // namespace

std::string entry_rail(const EntrySnapshot &e)
{
    return e.header_ok ? fixed_string(e.header.rail, sizeof(e.header.rail)) : "";
}

uint64_t entry_allocated_bytes(const EntrySnapshot &e)
{
    return (e.stat_ok ? uint64_t(e.st.st_blocks) * 512 : 0) + e.arena_allocated;
}

uint64_t entry_apparent_bytes(const EntrySnapshot &e)
{
    return (e.stat_ok ? uint64_t(e.st.st_size) : 0) + e.arena_bytes;
}

bool relay_is_up(const EntrySnapshot &e, uint64_t now_ns, double timeout_s,
                 std::string *why)
{
    if (!e.read()) {
        *why = "not read: " + (e.reason.empty() ? std::string("no header") :
                                                  e.reason);
        return false;
    }
    if (e.liveness != "alive") {
        *why = (e.liveness == "dead") ? "dead (stale entry " + e.name + ")" :
               (e.liveness == "pid reused") ?
               "gone, its pid reused (stale entry " + e.name + ")" :
               "of unknown liveness (" + e.liveness + ")";
        return false;
    }
    if (e.state != abi::kProcessReady) {
        *why = (e.state == abi::kProcessInit) ? "still starting (INIT)" :
               (e.state == abi::kProcessClosing) ? "shutting down (CLOSING)" :
               strformat("in unknown state %" PRIu32, e.state);
        return false;
    }
    if ((e.heartbeat_ns == 0) || (e.heartbeat_ns > now_ns)) {
        *why = "without a valid heartbeat";
        return false;
    }
    const double age = double(now_ns - e.heartbeat_ns) / 1e9;
    if (age > timeout_s) {
        *why = strformat("alive but its heartbeat is %.1f s old (limit %g s): "
                         "frozen or starved of CPU", age, timeout_s);
        return false;
    }
    *why = strformat("READY, heartbeat %.2f s ago", age);
    return true;
}

bool rails_from_sysfs(const std::string &sysfs_root, const RailMap &map,
                      std::vector<std::string> *rails,
                      std::vector<std::string> *problems, std::string *error)
{
    const std::string ib = sysfs_root + "/class/infiniband";
    std::vector<std::string> order;
    std::set<std::string>    active;
    std::map<std::string, std::string> down; /* rail -> its ports' states */
    for (const std::string &dev : sorted_names(ib)) {
        for (const std::string &port : sorted_names(ib + "/" + dev + "/ports")) {
            const std::string device = dev + ":" + port;
            const std::string rail   = map.rail_of(device);
            if (std::find(order.begin(), order.end(), rail) == order.end()) {
                order.push_back(rail);
            }
            /* "4: ACTIVE" */
            const std::string state = first_line(ib + "/" + dev + "/ports/" +
                                                 port + "/state");
            if (state.find("ACTIVE") != std::string::npos) {
                active.insert(rail);
            } else {
                std::string &d = down[rail];
                d += (d.empty() ? "" : ", ") + device + " " +
                     (state.empty() ? std::string("state unreadable") : state);
            }
        }
    }
    if (order.empty()) {
        *error = "no RDMA device under " + ib + ": name the rails with --rails";
        return false;
    }
    for (const std::string &rail : order) {
        rails->push_back(rail);
        if (active.count(rail) == 0) {
            problems->push_back(printable(rail) + ": no ACTIVE port on its NIC (" +
                                printable(down[rail]) + ")");
        }
    }
    return true;
}

CheckReport check_rails(const RegistrySnapshot &reg,
                        const std::vector<std::string> &expected,
                        const std::vector<std::string> &nic_problems,
                        uint64_t now_ns, double timeout_s)
{
    CheckReport r;
    size_t      failed = 0;
    std::string ready;
    for (const std::string &p : nic_problems) {
        r.lines.push_back("FAIL " + p);
    }
    for (const std::string &rail : expected) {
        const EntrySnapshot *up = nullptr;
        for (const EntrySnapshot &e : reg.entries) {
            std::string why;
            if (reg.reason.empty() && (entry_rail(e) == rail) &&
                relay_is_up(e, now_ns, timeout_s, &why)) {
                up = &e;
                break;
            }
        }
        if (up == nullptr) {
            ++failed;
            r.lines.push_back("FAIL " + printable(rail) + ": no relay is up: " +
                              printable(rail_failure(reg, rail, now_ns,
                                                     timeout_s)));
        } else {
            ready += strformat("%s%s pid %" PRIu32, ready.empty() ? "" : ", ",
                               printable(rail).c_str(), up->header.pid);
        }
    }
    for (const EntrySnapshot &e : reg.entries) {
        if (is_stale(e.liveness) && ((e.kind == "ctl") || (e.kind == "init"))) {
            const std::string rail = entry_rail(e);
            r.lines.push_back(
                    "STALE " + printable(e.name) + ": process " + e.liveness +
                    (rail.empty() ? "" : ", rail " + printable(rail)) + ", holds " +
                    mib(entry_allocated_bytes(e)) + " of " + reg.path + " (" +
                    mib(entry_apparent_bytes(e)) + " apparent); ucx_pxn_info "
                    "--clean --group " + printable(reg.group) + " removes it");
        } else if (!e.reason.empty() || (e.kind == "unexpected") ||
                   (e.kind == "arena") || (e.kind == "wake")) {
            r.lines.push_back("NOTE " + printable(e.name) + ": " +
                              (!e.reason.empty() ? "not read: " + e.reason :
                               (e.kind == "unexpected") ? std::string("not a pxn file") :
                               "stray " + e.kind + " file (no control file), " +
                               mib(entry_allocated_bytes(e)) + " allocated"));
        }
    }
    for (const std::string &p : reg.problems) {
        r.lines.push_back("NOTE " + reg.path + ": " + p);
    }
    r.healthy = r.lines.empty() ||
                std::none_of(r.lines.begin(), r.lines.end(),
                             [](const std::string &l) { return l.rfind("FAIL", 0) == 0; });
    const size_t fails = size_t(std::count_if(r.lines.begin(), r.lines.end(),
            [](const std::string &l) { return l.rfind("FAIL", 0) == 0; }));
    r.lines.push_back(r.healthy ?
            strformat("HEALTHY: %zu of %zu rails ready (%s) in group %s",
                      expected.size(), expected.size(), ready.c_str(),
                      printable(reg.group).c_str()) :
            strformat("UNHEALTHY: %zu problem%s, %zu of %zu rails not ready, "
                      "in group %s", fails, (fails == 1) ? "" : "s", failed,
                      expected.size(), printable(reg.group).c_str()));
    return r;
}

} // namespace pxn_tools
