#include "vfs_dump.h"

#include <ucs/datastruct/string_buffer.h>
#include <ucs/vfs/base/vfs_obj.h>

#include <sys/stat.h>
#include <vector>

namespace {

constexpr unsigned kMaxDepth = 16;

void collect(const char *name, void *arg)
{
    static_cast<std::vector<std::string>*>(arg)->push_back(name);
}

unsigned walk(const std::string &dir, const std::string &part, FILE *out,
              unsigned depth)
{
    std::vector<std::string> names;
    if ((depth > kMaxDepth) ||
        (ucs_vfs_path_list_dir(dir.c_str(), collect, &names) != UCS_OK)) {
        return 0;
    }
    unsigned printed = 0;
    for (const std::string &name : names) {
        const std::string path = (dir == "/" ? "" : dir) + "/" + name;
        ucs_vfs_path_info_t info;
        if (ucs_vfs_path_get_info(path.c_str(), &info) != UCS_OK) {
            continue;
        }
        if (S_ISDIR(info.mode)) {
            printed += walk(path, part, out, depth + 1);
            continue;
        }
        if (path.find(part) == std::string::npos) {
            continue;
        }
        ucs_string_buffer_t strb;
        ucs_string_buffer_init(&strb);
        if (ucs_vfs_path_read_file(path.c_str(), &strb) == UCS_OK) {
            std::string value = ucs_string_buffer_cstr(&strb);
            while (!value.empty() && (value.back() == '\n')) {
                value.pop_back();
            }
            fprintf(out, "vfs %s = %s\n", path.c_str(), value.c_str());
            ++printed;
        }
        ucs_string_buffer_cleanup(&strb);
    }
    return printed;
}

} // namespace

unsigned print_vfs_files(const std::string &part, FILE *out)
{
    return walk("/", part, out, 0);
}
