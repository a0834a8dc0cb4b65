#include "prom_client.h"

#include "test_helpers.h"

#include <apps/locate.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace pxn_test {

bool prometheus_built()
{
    return pxn_tools::make_var("PXN_HAVE_PROMETHEUS") == "yes";
}

std::string sample_key(const std::string &name,
                       std::vector<std::pair<std::string, std::string>> labels)
{
    std::sort(labels.begin(), labels.end());
    std::string key = name + "{";
    for (size_t i = 0; i < labels.size(); ++i) {
        key += (i ? "," : "") + labels[i].first + "=\"" + labels[i].second + "\"";
    }
    return key + "}";
}

bool read_samples(const std::string &lines, Samples *samples, std::string *error)
{
    std::istringstream in(lines);
    for (std::string line; std::getline(in, line);) {
        const size_t space = line.rfind(' ');
        char        *end   = nullptr;
        const double value = (space == std::string::npos) ? 0 :
                             strtod(line.c_str() + space + 1, &end);
        if ((space == std::string::npos) || (end == line.c_str() + space + 1)) {
            *error = "not a sample line: " + line;
            return false;
        }
        (*samples)[line.substr(0, space)] = value;
    }
    return true;
}

std::vector<std::string> prom_script(const std::vector<std::string> &args)
{
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     source_dir() + "/test/apps/prom_scrape.py"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

bool parse_metrics(const std::string &text, Samples *samples, std::string *error)
{
    TempDir     dir;
    const std::string file = dir.path() + "/metrics.prom";
    std::ofstream(file) << text;
    const ChildResult r = run_program(prom_script({"parse", file}));
    if (r.exit_code != 0) {
        *error = "prometheus_client did not parse it: " + r.output;
        return false;
    }
    return read_samples(r.output, samples, error);
}

bool scrape(const std::string &url, Samples *samples, std::string *error)
{
    const ChildResult r = run_program(prom_script({"get", url}));
    if (r.exit_code != 0) {
        *error = "scrape of " + url + " failed: " + r.output;
        return false;
    }
    return read_samples(r.output, samples, error);
}

bool Exporter::start(const std::vector<std::string> &args, const std::string &log,
                     std::string *error)
{
    std::vector<std::string> argv = {build_dir() + "/src/tools/ucx_pxn_exporter",
                                     "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), args.begin(), args.end());
    if (!process_.start("", {"UCX_PXN_GROUP=", "UCX_PXN_REGISTRY_DIR="}, argv, log,
                        error)) {
        return false;
    }
    const std::string serving = "serving http://127.0.0.1:";
    if (!process_.wait_for_output(serving, scaled_ms(10000))) {
        *error = "ucx_pxn_exporter did not start: " + process_.output();
        return false;
    }
    const std::string out = process_.output();
    const size_t      at  = out.find(serving) + serving.size();
    url_ = "http://127.0.0.1:" + std::to_string(atoi(out.c_str() + at)) + "/metrics";
    return true;
}

} // namespace pxn_test
