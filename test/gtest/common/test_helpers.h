/*
 * Helpers shared by the gtest suite: environment overrides, capture of UCX
 * log messages, running a child program and collecting its output, and
 * bounded waits.
 *
 * Waiting (project rule: tests wait on counters or events, never on
 * sleeps, and scale time bounds under sanitizers): wait_until() polls the
 * condition a test waits for; every time bound a test sets (a wait's
 * timeout, a deadline, an upper bound on how long something took) goes
 * through time_scale(). The rare duration that is itself what a test needs
 * (nothing observable stands for it) is a hold_for() with its reason, so
 * that every one is explicit and greppable.
 */
#ifndef PXN_TEST_HELPERS_H_
#define PXN_TEST_HELPERS_H_

#include <ucs/debug/log_def.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pxn_test {

/* How much longer than normal everything may take: 1.0, or the value of
 * the environment variable PXN_TEST_TIME_SCALE when it is set to a number
 * >= 1 (anything else counts as 1, with one warning on stderr).
 * contrib/sanitize.sh sets it (e.g. 4) for ASan builds. */
double time_scale();

/* seconds * time_scale(); timeout_ms * time_scale(), for the millisecond
 * timeouts of ForkedChild, PeerProcess and BackgroundProcess. */
double scaled_s(double seconds);
int    scaled_ms(int timeout_ms);

/* Polls done() every poll_s seconds until it returns true or
 * timeout_s * time_scale() seconds have passed; returns done()'s last
 * value (it is called once more at the deadline). */
bool wait_until(const std::function<bool()> &done, double timeout_s,
                double poll_s = 0.001);

/* Sleeps seconds * time_scale(). Only for a duration that is inherent to
 * what a test checks and has no observable effect to wait for; `why` says
 * which (and makes every such duration greppable). */
void hold_for(double seconds, const char *why);

/* State letter of process `pid` (/proc/<pid>/stat field 3: 'R', 'S', 'D',
 * 'T', 'Z', ...); 0 if there is no such process. */
char process_state(int pid);

/* Its start time in clock ticks since boot (/proc/<pid>/stat field 22);
 * 0 if there is no such process. */
unsigned long long process_start_ticks(int pid);

/* Clock ticks since boot now, on the clock of process_start_ticks(). */
unsigned long long boot_ticks();

/* /proc/<pid>/wchan: where it sleeps in the kernel; "" if unknown (also
 * "0", which kernels show when they do not tell). */
std::string process_wchan(int pid);

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

/* The build and source trees (test/apps/locate.h). */
std::string build_dir();
std::string source_dir();
/* A program of test/apps in the build tree. */
std::string app(const std::string &name);

/* UCX install prefix: $PXN_UCX_PREFIX, else the build's UCX_PREFIX. */
std::string ucx_prefix();

/* How the suite has UCX load the pxn module: $PXN_MODULE_LOAD, else the
 * build's PXN_MODULE_LOAD (what configure found), else "name":
 *   "name"        pxn is in the UCX's compiled-in module list (uct_MODULES);
 *   "dir"         the UCX scans its module directory for plugins (1.22 on);
 *   "plugin-path" UCX_PLUGIN_PATH names the directory of module_file();
 *   "preload"     LD_PRELOAD=module_file() (UCX 1.14-1.21: nothing else
 *                 loads a module that is not compiled in).
 * uct_gtest's main() applies it to its own process and, through the
 * environment, to every process it starts (LD_PRELOAD, UCX_PLUGIN_PATH). */
std::string module_load();

/* The module file the suite loads: $PXN_MODULE_INSTALLED, else for
 * "plugin-path" the build's .libs/libuct_pxn.so.0, else the one in the
 * UCX module directory. */
std::string module_file();

/* The environment that makes a process load the module as module_load()
 * says ({} for "name" and "dir"): LD_PRELOAD (with the UCX's library
 * directory first in LD_LIBRARY_PATH, for the module's own dependencies)
 * or UCX_PLUGIN_PATH. */
std::vector<std::pair<std::string, std::string>> module_load_env();

/* Removes a file or a directory tree without following symlinks. */
void remove_tree(const std::string &path);

/* A fresh directory (mkdtemp of prefix + "XXXXXX", mode 0700) removed with
 * everything in it by the destructor. path() is empty if creation failed. */
/* How many times `what` occurs in `text` (not overlapping). */
size_t count_of(const std::string &text, const std::string &what);

/* The default prefix is /dev/shm/pxn-test-<inode of the build
 * directory>-: test/leftovers.sh tells this suite's directories from
 * those of another build's suite running beside it. */
class TempDir {
public:
    explicit TempDir(const std::string &prefix = "");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir &operator=(const TempDir&) = delete;

    const std::string &path() const { return path_; }

private:
    std::string path_;
};

/* One end of a line-based pipe pair between a test and a forked child. */
class ChildChannel {
public:
    ChildChannel(int read_fd, int write_fd) :
        read_fd_(read_fd), write_fd_(write_fd)
    {
    }
    ~ChildChannel();
    ChildChannel(const ChildChannel&) = delete;
    ChildChannel &operator=(const ChildChannel&) = delete;

    /* Writes line + '\n'. */
    bool send(const std::string &line);
    /* Next line (without '\n'); false on timeout, EOF or error. */
    bool receive(std::string *line, int timeout_ms);

private:
    int         read_fd_;
    int         write_fd_;
    std::string buffer_;
};

/* A child process forked from the test that runs body(channel) and _exits
 * with its return value. Fork before any thread exists. The child dies with
 * the test process (PR_SET_PDEATHSIG). The destructor SIGKILLs and reaps a
 * child that is still there. */
class ForkedChild {
public:
    ForkedChild() = default;
    ~ForkedChild();
    ForkedChild(const ForkedChild&) = delete;
    ForkedChild &operator=(const ForkedChild&) = delete;

    bool start(const std::function<int(ChildChannel&)> &body);
    int pid() const { return pid_; }
    bool send(const std::string &line) { return channel_->send(line); }
    /* Default timeout: kDefaultTimeoutMs, scaled (time_scale()). */
    bool receive(std::string *line, int timeout_ms = -1)
    {
        return channel_->receive(line, (timeout_ms < 0) ?
                                       scaled_ms(kDefaultTimeoutMs) : timeout_ms);
    }
    /* Exit code, or -signal; kWaitTimeout if still running after timeout_ms
     * (default: kDefaultTimeoutMs, scaled). */
    int wait(int timeout_ms = -1);
    void kill(int sig);

    static constexpr int kWaitTimeout      = -1000;
    static constexpr int kDefaultTimeoutMs = 10000;

private:
    int                           pid_ = -1;
    std::unique_ptr<ChildChannel> channel_;
};

} // namespace pxn_test

#endif
