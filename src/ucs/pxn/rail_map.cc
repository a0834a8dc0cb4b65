#include "rail_map.h"

#include <cctype>

namespace pxn {

namespace {

std::string strip_port(const std::string &device)
{
    const size_t colon = device.rfind(':');
    if ((colon == std::string::npos) || (colon + 1 == device.size())) {
        return device;
    }
    for (size_t i = colon + 1; i < device.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(device[i]))) {
            return device;
        }
    }
    return device.substr(0, colon);
}

bool is_valid_name(const std::string &name)
{
    if (name.empty() || (name.size() > RailMap::kMaxNameLength)) {
        return false;
    }
    for (char c : name) {
        if ((c == ',') || std::isspace(static_cast<unsigned char>(c)) ||
            !std::isprint(static_cast<unsigned char>(c))) {
            return false;
        }
    }
    return true;
}

} // namespace

ucs_status_t RailMap::parse(const std::string &text, RailMap *map,
                            std::string *error)
{
    RailMap result;
    size_t  begin = 0;

    while (begin < text.size()) {
        size_t end = text.find(',', begin);
        if (end == std::string::npos) {
            end = text.size();
        }
        const std::string entry = text.substr(begin, end - begin);
        const size_t      colon = entry.rfind(':');
        if (colon == std::string::npos) {
            *error = "entry '" + entry + "' is not <device>:<rail>";
            return UCS_ERR_INVALID_PARAM;
        }
        const std::string device = entry.substr(0, colon);
        const std::string rail   = entry.substr(colon + 1);
        if (!is_valid_name(device) || !is_valid_name(rail) ||
            (rail.find(':') != std::string::npos)) {
            *error = "entry '" + entry + "' needs a device and a rail name of "
                     "1-63 printable characters without spaces or ','";
            return UCS_ERR_INVALID_PARAM;
        }
        for (const auto &e : result.entries_) {
            if (strip_port(e.first) == strip_port(device)) {
                *error = "device '" + device + "' is listed twice";
                return UCS_ERR_INVALID_PARAM;
            }
        }
        result.entries_.emplace_back(device, rail);
        if (end == text.size()) {
            break;
        }
        begin = end + 1;
        if (begin == text.size()) {
            *error = "trailing ','";
            return UCS_ERR_INVALID_PARAM;
        }
    }
    *map = std::move(result);
    return UCS_OK;
}

std::string RailMap::rail_of(const std::string &device) const
{
    const std::string nic = strip_port(device);
    for (const auto &e : entries_) {
        if (strip_port(e.first) == nic) {
            return e.second;
        }
    }
    return nic;
}

} // namespace pxn
