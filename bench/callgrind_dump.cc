#include "callgrind_dump.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>

namespace pxn_bench {

std::vector<std::string> words(const std::string &s)
{
    std::vector<std::string> w;
    size_t i = 0;
    while (i < s.size()) {
        const size_t j = s.find(' ', i);
        w.push_back(s.substr(i, (j == std::string::npos) ? j : j - i));
        i = (j == std::string::npos) ? s.size() : j + 1;
    }
    return w;
}

/* A cost line ("<line> <Ir>") belongs to the last fn= of the last ob=,
 * except the one after calls= (a callee's inclusive cost, counted where the
 * callee is). */
std::map<std::string, Dump> read_dumps(const std::string &dir,
                                       const std::string &skip_object,
                                       const std::string &skip_function)
{
    std::map<std::string, Dump> dumps;
    DIR *d = opendir(dir.c_str());
    for (dirent *e; (d != nullptr) && ((e = readdir(d)) != nullptr);) {
        if (strncmp(e->d_name, "callgrind.out", 13) != 0) {
            continue;
        }
        FILE *f = fopen((dir + "/" + e->d_name).c_str(), "r");
        char line[8192];
        std::string trigger, fn;
        Dump dump;
        bool callee = false, skip_ob = false, skip_fn = false;
        while ((f != nullptr) && fgets(line, sizeof(line), f)) {
            std::string l(line);
            while (!l.empty() && isspace(static_cast<unsigned char>(l.back()))) {
                l.pop_back();
            }
            const std::string t = "desc: Trigger: Client Request: ";
            if (l.compare(0, t.size(), t) == 0) {
                trigger = l.substr(t.size());
            } else if (l.compare(0, 3, "ob=") == 0) {
                skip_ob = !skip_object.empty() &&
                          (l.find(skip_object) != std::string::npos);
            } else if (l.compare(0, 3, "fn=") == 0) {
                fn      = l.substr(3);
                skip_fn = !skip_function.empty() &&
                          (fn.find(skip_function) != std::string::npos);
            } else if (l.compare(0, 6, "calls=") == 0) {
                callee = true;
            } else if (!l.empty() && isdigit(static_cast<unsigned char>(l[0]))) {
                const auto w = words(l);
                const uint64_t ir = (w.size() > 1) ?
                                    strtoull(w[1].c_str(), nullptr, 10) : 0;
                if (!callee && !skip_ob && !skip_fn) {
                    dump.self[fn] += ir;
                    dump.total    += ir;
                }
                callee = false;
            }
        }
        if (f != nullptr) {
            fclose(f);
        }
        if (!trigger.empty()) {
            dumps[trigger] = dump;
        }
    }
    if (d != nullptr) {
        closedir(d);
    }
    return dumps;
}

uint64_t copy_cost(const Dump &dump)
{
    uint64_t n = 0;
    for (const auto &f : dump.self) {
        if ((f.first.find("memcpy") != std::string::npos) ||
            (f.first.find("memmove") != std::string::npos)) {
            n += f.second;
        }
    }
    return n;
}

} // namespace pxn_bench
