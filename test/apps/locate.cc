#include "locate.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace pxn_tools {

std::string build_dir()
{
    const char *env = getenv("PXN_BUILD_DIR");
    if ((env != nullptr) && (*env != '\0')) {
        return env;
    }
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        return "";
    }
    std::string dir(exe, n);
    while (!dir.empty()) {
        dir.erase(dir.find_last_of('/'));
        if (access((dir + "/config.status").c_str(), F_OK) == 0) {
            return dir;
        }
    }
    return "";
}

std::string make_var(const std::string &name)
{
    std::ifstream makefile(build_dir() + "/Makefile");
    const std::string key = name + " = ";
    for (std::string line; std::getline(makefile, line);) {
        if (line.compare(0, key.size(), key) == 0) {
            return line.substr(key.size());
        }
    }
    return "";
}

std::string source_dir()
{
    const char *env = getenv("PXN_SOURCE_DIR");
    if ((env != nullptr) && (*env != '\0')) {
        return env;
    }
    return make_var("abs_top_srcdir");
}

} // namespace pxn_tools
