#include <bench/bench_units.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace pxn_tools {

bool parse_size(const std::string &text, uint64_t *bytes)
{
    char *end;
    errno         = 0;
    uint64_t value = strtoull(text.c_str(), &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: break;
    }
    if (text.empty() || (text[0] == '-') || (errno != 0) || (*end != '\0') ||
        (value == 0) || (value > (UINT64_MAX >> shift))) {
        return false;
    }
    *bytes = value << shift;
    return true;
}

bool parse_sizes(const std::string &text, std::vector<uint64_t> *sizes)
{
    sizes->clear();
    for (size_t pos = 0; pos <= text.size();) {
        size_t comma = text.find(',', pos);
        comma        = (comma == std::string::npos) ? text.size() : comma;
        uint64_t bytes;
        if (!parse_size(text.substr(pos, comma - pos), &bytes)) {
            return false;
        }
        sizes->push_back(bytes);
        pos = comma + 1;
    }
    return true;
}

std::string human(uint64_t bytes)
{
    char buf[32];
    if ((bytes >= (1ull << 30)) && (bytes % (1ull << 30) == 0)) {
        snprintf(buf, sizeof(buf), "%luG", bytes >> 30);
    } else if ((bytes >= (1ull << 20)) && (bytes % (1ull << 20) == 0)) {
        snprintf(buf, sizeof(buf), "%luM", bytes >> 20);
    } else if ((bytes >= 1024) && (bytes % 1024 == 0)) {
        snprintf(buf, sizeof(buf), "%luK", bytes >> 10);
    } else {
        snprintf(buf, sizeof(buf), "%lu", bytes);
    }
    return buf;
}

double median(std::vector<double> values)
{
    if (values.empty()) {
        return 0;
    }
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    return values[values.size() / 2];
}

} // namespace pxn_tools
