/*
 * Helpers shared by the gtest suite: environment overrides, capture of UCX
 * log messages, running a child program and collecting its output.
 */
#ifndef PXN_TEST_HELPERS_H_
#define PXN_TEST_HELPERS_H_

#include <ucs/debug/log_def.h>

#include <string>
#include <utility>
#include <vector>

namespace pxn_test {

/* Sets (or unsets, for nullptr) an environment variable for its lifetime. */
class ScopedEnv {
public:
    ScopedEnv(const char *name, const char *value);
    ~ScopedEnv();
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv &operator=(const ScopedEnv&) = delete;

private:
    std::string name_;
    bool        had_old_;
    std::string old_;
};

/* Collects UCX log messages at warn level and above while alive, and keeps
 * them from being printed. */
class LogCapture {
public:
    LogCapture();
    ~LogCapture();
    LogCapture(const LogCapture&) = delete;
    LogCapture &operator=(const LogCapture&) = delete;

    const std::vector<std::string> &messages() const { return messages_; }
    bool contains(const std::string &text) const;
    std::string joined() const;

private:
    static ucs_log_func_rc_t handler(const char *file, unsigned line,
                                     const char *function, ucs_log_level_t level,
                                     const ucs_log_component_config_t *comp,
                                     const char *message, va_list ap);
    std::vector<std::string> messages_;
};

struct ChildResult {
    int         exit_code; /* -signal if killed */
    std::string output;    /* stdout and stderr together */
};

/* Runs argv with extra environment entries ("NAME=value"; "NAME=" unsets). */
ChildResult run_program(const std::vector<std::string> &argv,
                        const std::vector<std::string> &env = {});

/* Directory of the build tree (for helper programs). */
std::string build_dir();

} // namespace pxn_test

#endif
