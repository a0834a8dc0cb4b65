/*
 * libFuzzer target: UCX_PXN_RAIL_MAP parsing (RailMap::parse) and lookups
 * (RailMap::rail_of).
 *
 * Input: the text of the variable; a 0 byte, if any, ends the text and the
 * rest is a device name to look up. Must never crash or hit UB. Asserted:
 * a failed parse says why and leaves the previous map untouched; an
 * accepted map has one entry per ','-separated entry and maps each listed
 * device to its rail; parsing is deterministic.
 */
#include "fuzz_check.h"

#include <ucs/pxn/rail_map.h>

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const std::string input(reinterpret_cast<const char*>(data), size);
    const size_t      nul   = input.find('\0');
    const std::string text  = input.substr(0, nul);
    const std::string query = (nul == std::string::npos) ? text :
                              input.substr(nul + 1);

    pxn::RailMap known;
    std::string  error;
    FUZZ_CHECK(pxn::RailMap::parse("known_dev:known_rail", &known, &error) ==
               UCS_OK);

    pxn::RailMap map = known;
    error.clear();
    const ucs_status_t status = pxn::RailMap::parse(text, &map, &error);

    pxn::RailMap again;
    std::string  error_again;
    FUZZ_CHECK(pxn::RailMap::parse(text, &again, &error_again) == status);
    FUZZ_CHECK(error_again == error);

    /* Lookups never crash, whatever was asked. */
    (void)map.rail_of(query);
    (void)map.rail_of(text);
    (void)map.rail_of("");

    if (status != UCS_OK) {
        FUZZ_CHECK(status == UCS_ERR_INVALID_PARAM);
        FUZZ_CHECK(!error.empty());
        FUZZ_CHECK(map.size() == 1);
        FUZZ_CHECK(map.rail_of("known_dev") == "known_rail");
        return 0;
    }

    size_t entries = 0;
    size_t begin   = 0;
    while (begin < text.size()) {
        size_t end = text.find(',', begin);
        if (end == std::string::npos) {
            end = text.size();
        }
        const std::string entry = text.substr(begin, end - begin);
        const size_t      colon = entry.rfind(':');
        FUZZ_CHECK(colon != std::string::npos);
        const std::string device = entry.substr(0, colon);
        const std::string rail   = entry.substr(colon + 1);
        FUZZ_CHECK(!device.empty() && !rail.empty());
        FUZZ_CHECK(device.size() <= pxn::RailMap::kMaxNameLength);
        FUZZ_CHECK(rail.size() <= pxn::RailMap::kMaxNameLength);
        FUZZ_CHECK(map.rail_of(device) == rail);
        ++entries;
        begin = end + 1;
    }
    FUZZ_CHECK(map.size() == entries);
    FUZZ_CHECK(again.size() == entries);
    return 0;
}
