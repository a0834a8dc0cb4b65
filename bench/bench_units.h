/*
 * Byte sizes on benchmark command lines and in their tables: "4096", "4K",
 * "8M", "1G" (binary units), lists separated by commas; the median the
 * benchmarks report.
 */
#ifndef PXN_TOOLS_BENCH_UNITS_H_
#define PXN_TOOLS_BENCH_UNITS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

/* One size; false for anything else (empty, zero, junk, overflow). */
bool parse_size(const std::string &text, uint64_t *bytes);

/* A comma-separated list of sizes; false if any item is not a size. */
bool parse_sizes(const std::string &text, std::vector<uint64_t> *sizes);

/* The shortest exact form: 4096 -> "4K", 8388608 -> "8M", 1000 -> "1000". */
std::string human(uint64_t bytes);

/* The middle value (the upper one of an even count); 0 for none. */
double median(std::vector<double> values);

} // namespace pxn_tools

#endif
