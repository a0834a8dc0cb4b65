/*
 * The tests' view of pxn's Prometheus metrics, through the ecosystem's own
 * tools: test/apps/prom_scrape.py fetches with an HTTP client and parses
 * with python3-prometheus-client's parser; this side only reads that
 * script's canonical lines ("name{label="value",...} value", labels sorted).
 * And ucx_pxn_exporter run as a process of the test.
 *
 * The metrics exist only in a build with prometheus-cpp: prometheus_built()
 * says whether this one has them (configure's PXN_HAVE_PROMETHEUS); tests
 * skip without. The parser is Debian's: /usr/bin/python3 with
 * python3-prometheus-client (contrib/deps.sh installs both).
 */
#ifndef PXN_TEST_PROM_CLIENT_H_
#define PXN_TEST_PROM_CLIENT_H_

#include <apps/peer_process.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pxn_test {

/* key (name{labels}) -> value */
using Samples = std::map<std::string, double>;

bool prometheus_built();

/* name{k1="v1",k2="v2"} with the labels sorted by name, as the script
 * prints them. */
std::string sample_key(const std::string &name,
                       std::vector<std::pair<std::string, std::string>> labels);

/* The script's lines -> samples; false (with *error) for anything else. */
bool read_samples(const std::string &lines, Samples *samples, std::string *error);

/* The text format in `text` parsed by prometheus_client. */
bool parse_metrics(const std::string &text, Samples *samples, std::string *error);

/* One scrape of `url`, parsed. */
bool scrape(const std::string &url, Samples *samples, std::string *error);

/* prom_scrape.py's command line: /usr/bin/python3 <script> args... */
std::vector<std::string> prom_script(const std::vector<std::string> &args);

/* ucx_pxn_exporter of the build, listening on a free port of 127.0.0.1. */
class Exporter {
public:
    /* `args`: its options beyond --listen. False (with *error) when it did
     * not say it serves within 10 s (scaled). */
    bool start(const std::vector<std::string> &args, const std::string &log,
               std::string *error);
    std::string url() const { return url_; }
    pxn_tools::BackgroundProcess &process() { return process_; }

private:
    pxn_tools::BackgroundProcess process_;
    std::string                  url_;
};

} // namespace pxn_test

#endif
