#include "ucp_output.h"

#include <apps/locate.h>

#include "../common/test_helpers.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace pxn_test {

std::string tail(const std::string &text, size_t lines)
{
    size_t pos = text.size();
    for (size_t n = 0; n <= lines; ++n) {
        pos = (pos == 0) ? std::string::npos : text.rfind('\n', pos - 1);
        if (pos == std::string::npos) {
            return text;
        }
    }
    return text.substr(pos + 1);
}

std::vector<std::string> ep_cfg_lines(const std::string &log)
{
    static const std::regex newer("UCX +INFO +(.*\\bcfg#[0-9]+\\b.*)$");
    std::vector<std::string> lines;
    std::istringstream in(log);
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
        const size_t at = line.find("ep_cfg[");
        if (at != std::string::npos) {
            lines.push_back(line.substr(at));
        } else if (std::regex_search(line, m, newer)) {
            lines.push_back(m[1]);
        }
    }
    return lines;
}

bool any_pxn_lane(const std::vector<std::string> &cfgs)
{
    for (const auto &c : cfgs) {
        if (c.find("pxn/") != std::string::npos) {
            return true;
        }
    }
    return false;
}

bool only_pxn_lanes(const std::vector<std::string> &cfgs)
{
    /* lanes read "kind(tl/dev ...)": every tl/dev pair */
    static const std::regex lane("([A-Za-z0-9_]+)/[A-Za-z0-9_:.-]+");
    size_t lanes = 0;
    for (const auto &c : cfgs) {
        const size_t colon = c.find("]:");
        const std::string body = c.substr((colon == std::string::npos) ? 0 : colon);
        for (std::sregex_iterator m(body.begin(), body.end(), lane), end; m != end;
             ++m) {
            if ((*m)[1] != "pxn") {
                return false;
            }
            ++lanes;
        }
    }
    return lanes > 0;
}

std::vector<ProtoTable> proto_tables(const std::string &log)
{
    std::vector<ProtoTable> tables;
    std::istringstream in(log);
    bool in_rows = false;
    for (std::string line; std::getline(in, line);) {
        const size_t bar = line.find("| ");
        if ((bar == std::string::npos) || (line.find(" |", bar + 1) == std::string::npos)) {
            continue;
        }
        std::vector<std::string> cells;
        std::istringstream row(line.substr(bar + 1));
        for (std::string cell; std::getline(row, cell, '|');) {
            const size_t b = cell.find_first_not_of(' ');
            const size_t e = cell.find_last_not_of(' ');
            if (b != std::string::npos) {
                cells.push_back(cell.substr(b, e - b + 1));
            }
        }
        const bool title = (cells.size() == 1) ||
                           ((cells.size() == 2) && (cells[0].find("cfg#") !=
                                                    std::string::npos));
        if (title) { /* 1.22: one cell a line; 1.18: "cfg | operation" */
            if (in_rows || tables.empty()) {
                tables.emplace_back();
                in_rows = false;
            }
            for (const auto &cell : cells) {
                tables.back().title += cell + "\n";
            }
        } else if ((cells.size() >= 3) && !tables.empty() && (cells[0] != "Range") &&
                   (cells[1] != "Range")) {
            tables.back().configs.push_back(cells.back());
            in_rows = true;
        }
    }
    return tables;
}

OpTables op_tables(const std::string &log, const std::string &operation)
{
    OpTables t;
    for (const auto &table : proto_tables(log)) {
        if ((table.title.find(operation) == std::string::npos) ||
            (table.title.find("host memory") == std::string::npos)) {
            continue;
        }
        ++t.count;
        t.text += table.title;
        for (const auto &config : table.configs) {
            ++t.rows;
            t.pxn_rows += (config.find("pxn/") != std::string::npos);
            t.text += "  " + config + "\n";
        }
    }
    return t;
}

bool new_protocols_by_default()
{
    const auto config = pxn_test::run_program({pxn_test::ucx_prefix() + "/bin/ucx_info",
                                               "-c"});
    return config.output.find("UCX_PROTO_ENABLE=y") != std::string::npos;
}

bool peer_mode_gets_use_rma_lanes()
{
    return !new_protocols_by_default() ||
           (pxn_tools::make_var("PXN_UCP_PEER_GET_OFFLOAD") == "yes");
}

std::string joined(const std::vector<std::string> &lines)
{
    std::string all;
    for (const auto &l : lines) {
        all += l + "\n";
    }
    return all;
}

bool listening(pid_t pid, int port)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/net/tcp");
    std::string line;
    std::getline(in, line); /* header */
    while (std::getline(in, line)) {
        unsigned local_port = 0, state = 0;
        char local[64];
        if ((sscanf(line.c_str(), " %*d: %63[0-9A-Fa-f:] %*s %x", local, &state) == 2) &&
            (sscanf(strchr(local, ':') + 1, "%x", &local_port) == 1) &&
            (int(local_port) == port) && (state == 0x0A)) {
            return true;
        }
    }
    return false;
}

} // namespace pxn_test
