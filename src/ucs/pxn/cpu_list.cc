#include "cpu_list.h"

#include <algorithm>
#include <cctype>
#include <iterator>

namespace pxn {

namespace {

/* A decimal CPU number at text[*at]; advances *at. */
bool read_cpu(const std::string &text, size_t *at, int *cpu)
{
    const size_t start = *at;
    long value         = 0;
    while ((*at < text.size()) && isdigit(static_cast<unsigned char>(text[*at]))) {
        value = value * 10 + (text[(*at)++] - '0');
        if (value > kMaxCpu) {
            return false;
        }
    }
    *cpu = int(value);
    return *at > start;
}

std::vector<int> intersect(const std::vector<int> &a, const std::vector<int> &b)
{
    std::vector<int> both;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(),
                          std::back_inserter(both));
    return both;
}

} // namespace

bool parse_cpu_list(const std::string &input, std::vector<int> *cpus,
                    std::string *error)
{
    std::string text = input;
    while (!text.empty() && ((text.back() == '\n') || (text.back() == ' '))) {
        text.pop_back();
    }
    cpus->clear();
    size_t at = 0;
    while (true) {
        int first, last;
        if (!read_cpu(text, &at, &first)) {
            *error = "expected a CPU number (0.." + std::to_string(kMaxCpu) +
                     ") at offset " + std::to_string(at) + " of '" + input + "'";
            return false;
        }
        last = first;
        if ((at < text.size()) && (text[at] == '-')) {
            ++at;
            if (!read_cpu(text, &at, &last) || (last < first)) {
                *error = "bad range in '" + input + "'";
                return false;
            }
        }
        for (int cpu = first; cpu <= last; ++cpu) {
            cpus->push_back(cpu);
        }
        if (at == text.size()) {
            break;
        }
        if (text[at++] != ',') {
            *error = "expected ',' at offset " + std::to_string(at - 1) + " of '" +
                     input + "'";
            return false;
        }
    }
    std::sort(cpus->begin(), cpus->end());
    cpus->erase(std::unique(cpus->begin(), cpus->end()), cpus->end());
    return true;
}

std::string format_cpu_list(const std::vector<int> &cpus)
{
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while ((j + 1 < cpus.size()) && (cpus[j + 1] == cpus[j] + 1)) {
            ++j;
        }
        out += (out.empty() ? "" : ",") + std::to_string(cpus[i]);
        if (j > i) {
            out += "-" + std::to_string(cpus[j]);
        }
        i = j + 1;
    }
    return out;
}

std::vector<int> choose_engine_cpus(const std::string &setting,
                                    const std::vector<int> &allowed,
                                    const std::vector<int> &gpu_local,
                                    std::string *why)
{
    const std::string process = "the process's CPUs (" + format_cpu_list(allowed) + ")";
    if (setting == "inherit") {
        *why = process + ": UCX_PXN_ENGINE_CPUS=inherit";
        return {};
    }
    if (setting == "auto") {
        const std::vector<int> near = intersect(allowed, gpu_local);
        if (gpu_local.empty()) {
            *why = process + ": the GPU is not known";
        } else if (near.empty()) {
            *why = process + ": none of them is local to the GPU (" +
                   format_cpu_list(gpu_local) + ")";
        } else if (near == allowed) {
            *why = process + ": all of them are local to the GPU";
        } else {
            *why = format_cpu_list(near) + ": the process's CPUs local to the GPU";
            return near;
        }
        return {};
    }
    std::vector<int> listed;
    std::string error;
    if (!parse_cpu_list(setting, &listed, &error)) {
        *why = process + ": UCX_PXN_ENGINE_CPUS=" + setting + ": " + error;
        return {};
    }
    const std::vector<int> chosen = intersect(allowed, listed);
    if (chosen.empty()) {
        *why = process + ": UCX_PXN_ENGINE_CPUS=" + setting +
               " names none of them (a cpuset or taskset confines the process)";
        return {};
    }
    *why = format_cpu_list(chosen) + ": UCX_PXN_ENGINE_CPUS=" + setting;
    return chosen;
}

} // namespace pxn
