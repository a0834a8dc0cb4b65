#include "pxn_log.h"

#include "pxn_entry.h"

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

/* No std::string here: memory just ran out. */
void uct_pxn_entry_no_memory(const char *what) noexcept
{
    ucs_error("pxn: out of memory in %s: the call fails with "
              "UCS_ERR_NO_MEMORY or does less work", what);
}
