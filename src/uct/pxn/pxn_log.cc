#include "pxn_log.h"

#include <ucs/debug/log_def.h>

#include <mutex>
#include <set>

namespace pxn {
namespace uct {

namespace {

bool first_time(const std::string &text)
{
    static std::mutex            lock;
    static std::set<std::string> logged;
    std::lock_guard<std::mutex> guard(lock);
    return logged.insert(text).second;
}

} // namespace

void error_once(const std::string &text)
{
    if (first_time(text)) {
        ucs_error("%s", text.c_str());
    }
}

void warn_once(const std::string &text)
{
    if (first_time(text)) {
        ucs_warn("%s", text.c_str());
    }
}

} // namespace uct
} // namespace pxn
