#include "test_helpers.h"

#include <apps/locate.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <ftw.h>
#include <poll.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn_test {

double time_scale()
{
    static std::atomic<bool> warned{false};
    const char *value = getenv("PXN_TEST_TIME_SCALE");
    if ((value == nullptr) || (*value == '\0')) {
        return 1.0;
    }
    char        *end   = nullptr;
    const double scale = strtod(value, &end);
    if ((end == value) || (*end != '\0') || !std::isfinite(scale) || (scale < 1.0)) {
        if (!warned.exchange(true)) {
            fprintf(stderr, "PXN_TEST_TIME_SCALE=%s is not a number >= 1: "
                    "using 1\n", value);
        }
        return 1.0;
    }
    return scale;
}

double scaled_s(double seconds)
{
    return seconds * time_scale();
}

int scaled_ms(int timeout_ms)
{
    const double ms = double(timeout_ms) * time_scale();
    return (ms >= double(INT_MAX)) ? INT_MAX : int(ms);
}

using Clock = std::chrono::steady_clock;

static Clock::time_point after(double seconds)
{
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(seconds));
}

/* wait_until() with a deadline that is already final (scaled or not). */
static bool poll_until(const std::function<bool()> &done,
                       Clock::time_point deadline, double poll_s)
{
    const auto pause = std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(std::max(poll_s, 0.0)));
    for (;;) {
        if (done()) {
            return true;
        }
        const auto now = Clock::now();
        if (now >= deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    }
}

bool wait_until(const std::function<bool()> &done, double timeout_s, double poll_s)
{
    return poll_until(done, after(scaled_s(timeout_s)), poll_s);
}

void hold_for(double seconds, const char *why)
{
    (void)why; /* for the reader: every fixed duration says why it is one */
    std::this_thread::sleep_for(std::chrono::duration<double>(scaled_s(seconds)));
}

/* The fields of /proc/<pid>/stat after the command name ("(comm)" may
 * contain spaces and parentheses); fields[0] is field 3, the state. */
static std::vector<std::string> stat_fields(int pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string   text((std::istreambuf_iterator<char>(in)),
                       std::istreambuf_iterator<char>());
    const size_t  paren = text.rfind(')');
    std::vector<std::string> fields;
    if (paren == std::string::npos) {
        return fields;
    }
    std::istringstream rest(text.substr(paren + 1));
    for (std::string field; rest >> field;) {
        fields.push_back(field);
    }
    return fields;
}

char process_state(int pid)
{
    const auto fields = stat_fields(pid);
    return fields.empty() ? 0 : fields[0][0];
}

unsigned long long process_start_ticks(int pid)
{
    const auto fields = stat_fields(pid);
    return (fields.size() > 19) ? strtoull(fields[19].c_str(), nullptr, 10) : 0;
}

unsigned long long boot_ticks()
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    const long hz = sysconf(_SC_CLK_TCK);
    return (unsigned long long)ts.tv_sec * hz +
           (unsigned long long)ts.tv_nsec * hz / 1000000000ull;
}

std::string process_wchan(int pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/wchan");
    std::string   wchan;
    std::getline(in, wchan);
    return (wchan == "0") ? "" : wchan;
}

ScopedEnv::ScopedEnv(const char *name, const char *value) : name_(name)
{
    const char *old = getenv(name);
    had_old_        = (old != nullptr);
    if (had_old_) {
        old_ = old;
    }
    if (value != nullptr) {
        setenv(name, value, 1);
    } else {
        unsetenv(name);
    }
}

ScopedEnv::~ScopedEnv()
{
    if (had_old_) {
        setenv(name_.c_str(), old_.c_str(), 1);
    } else {
        unsetenv(name_.c_str());
    }
}

static LogCapture *g_capture = nullptr;

LogCapture::LogCapture()
{
    g_capture = this;
    ucs_log_push_handler(handler);
}

LogCapture::~LogCapture()
{
    ucs_log_pop_handler();
    g_capture = nullptr;
}

ucs_log_func_rc_t LogCapture::handler(const char *, unsigned, const char *,
                                      ucs_log_level_t level,
                                      const ucs_log_component_config_t *,
                                      const char *message, va_list ap)
{
    if ((g_capture == nullptr) || (level > UCS_LOG_LEVEL_WARN)) {
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
    char buf[2048];
    va_list copy;
    va_copy(copy, ap);
    vsnprintf(buf, sizeof(buf), message, copy);
    va_end(copy);
    g_capture->messages_.emplace_back(buf);
    return UCS_LOG_FUNC_RC_STOP;
}

bool LogCapture::contains(const std::string &text) const
{
    for (const auto &m : messages_) {
        if (m.find(text) != std::string::npos) {
            return true;
        }
    }
    return false;
}

std::string LogCapture::joined() const
{
    std::string all;
    for (const auto &m : messages_) {
        all += m + "\n";
    }
    return all;
}

ChildResult run_program(const std::vector<std::string> &argv,
                        const std::vector<std::string> &env)
{
    int fds[2];
    if (pipe(fds) != 0) {
        return {-1, std::string("pipe: ") + strerror(errno)};
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        for (const auto &e : env) {
            const size_t eq = e.find('=');
            const std::string name = e.substr(0, eq), value = e.substr(eq + 1);
            if (value.empty()) {
                unsetenv(name.c_str());
            } else {
                setenv(name.c_str(), value.c_str(), 1);
            }
        }
        std::vector<char*> args;
        for (const auto &a : argv) {
            args.push_back(const_cast<char*>(a.c_str()));
        }
        args.push_back(nullptr);
        execv(args[0], args.data());
        fprintf(stderr, "exec %s: %s\n", args[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    ChildResult result{-1, ""};
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
        result.output.append(buf, n);
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return result;
}

std::string build_dir()
{
    return pxn_tools::build_dir();
}

std::string source_dir()
{
    return pxn_tools::source_dir();
}

std::string app(const std::string &name)
{
    return build_dir() + "/test/apps/" + name;
}

std::string ucx_prefix()
{
    const char *prefix = getenv("PXN_UCX_PREFIX");
    return prefix ? prefix : pxn_tools::make_var("UCX_PREFIX");
}

std::string module_load()
{
    const char *mode = getenv("PXN_MODULE_LOAD");
    if ((mode != nullptr) && (*mode != '\0')) {
        return mode;
    }
    const std::string configured = pxn_tools::make_var("PXN_MODULE_LOAD");
    return configured.empty() ? "name" : configured;
}

std::string module_file()
{
    const char *file = getenv("PXN_MODULE_INSTALLED");
    if ((file != nullptr) && (*file != '\0')) {
        return file;
    }
    if (module_load() == "plugin-path") {
        return build_dir() + "/.libs/libuct_pxn.so.0";
    }
    return pxn_tools::make_var("UCX_MODULEDIR") + "/libuct_pxn.so.0";
}

std::vector<std::pair<std::string, std::string>> module_load_env()
{
    const std::string mode = module_load();
    const std::string file = module_file();
    auto with_old = [](const char *name, const std::string &first,
                       const char *separator) {
        const char *old = getenv(name);
        return ((old == nullptr) || (*old == '\0')) ? first :
               first + separator + old;
    };
    if (mode == "preload") {
        return {{"LD_PRELOAD", with_old("LD_PRELOAD", file, " ")},
                {"LD_LIBRARY_PATH", with_old("LD_LIBRARY_PATH",
                                             ucx_prefix() + "/lib", ":")}};
    }
    if (mode == "plugin-path") {
        return {{"UCX_PLUGIN_PATH", file.substr(0, file.rfind('/'))}};
    }
    return {};
}

static int remove_entry(const char *path, const struct stat *, int, struct FTW *)
{
    return remove(path);
}

void remove_tree(const std::string &path)
{
    nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

size_t count_of(const std::string &text, const std::string &what)
{
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos;
         at = text.find(what, at + what.size())) {
        ++n;
    }
    return n;
}

TempDir::TempDir(const std::string &prefix)
{
    struct stat build;
    const std::string tag = (stat(build_dir().c_str(), &build) == 0) ?
                            std::to_string(build.st_ino) : "x";
    std::string pattern = (prefix.empty() ? "/dev/shm/pxn-test-" + tag + "-" :
                                            prefix) + "XXXXXX";
    if (mkdtemp(&pattern[0]) != nullptr) {
        path_ = pattern;
    }
}

TempDir::~TempDir()
{
    if (!path_.empty()) {
        remove_tree(path_);
    }
}

ChildChannel::~ChildChannel()
{
    close(read_fd_);
    close(write_fd_);
}

bool ChildChannel::send(const std::string &line)
{
    const std::string data = line + "\n";
    size_t            done = 0;
    while (done < data.size()) {
        const ssize_t n = write(write_fd_, data.data() + done, data.size() - done);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        done += size_t(n);
    }
    return true;
}

bool ChildChannel::receive(std::string *line, int timeout_ms)
{
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const size_t eol = buffer_.find('\n');
        if (eol != std::string::npos) {
            *line = buffer_.substr(0, eol);
            buffer_.erase(0, eol + 1);
            return true;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            return false;
        }
        struct pollfd pfd = {read_fd_, POLLIN, 0};
        const int     rc  = poll(&pfd, 1, int(left));
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        if (rc == 0) {
            return false;
        }
        char          buf[512];
        const ssize_t n = read(read_fd_, buf, sizeof(buf));
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            return false;
        }
        buffer_.append(buf, size_t(n));
    }
}

bool ForkedChild::start(const std::function<int(ChildChannel&)> &body)
{
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0) {
        return false;
    }
    if (pipe2(from_child, O_CLOEXEC) != 0) {
        close(to_child[0]);
        close(to_child[1]);
        return false;
    }
    const pid_t parent = getpid();
    const pid_t pid    = fork();
    if (pid < 0) {
        for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) {
            close(fd);
        }
        return false;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(126);
        }
        close(to_child[1]);
        close(from_child[0]);
        int code;
        {
            ChildChannel channel(to_child[0], from_child[1]);
            code = body(channel);
        }
        _exit(code);
    }
    close(to_child[0]);
    close(from_child[1]);
    pid_     = pid;
    channel_.reset(new ChildChannel(from_child[0], to_child[1]));
    return true;
}

int ForkedChild::wait(int timeout_ms)
{
    if (pid_ <= 0) {
        return kWaitTimeout;
    }
    if (timeout_ms < 0) {
        timeout_ms = scaled_ms(kDefaultTimeoutMs);
    }
    int result = kWaitTimeout;
    /* timeout_ms is the caller's bound as it is (scaled where the caller
     * wants it so) */
    poll_until([&] {
        int         status = 0;
        const pid_t rc     = waitpid(pid_, &status, WNOHANG);
        if (rc == pid_) {
            pid_   = -1;
            result = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
            return true;
        }
        if ((rc < 0) && (errno != EINTR)) {
            pid_ = -1;
            return true; /* result stays kWaitTimeout */
        }
        return false;
    }, after(timeout_ms / 1000.0), 0.001);
    return result;
}

void ForkedChild::kill(int sig)
{
    if (pid_ > 0) {
        ::kill(pid_, sig);
    }
}

ForkedChild::~ForkedChild()
{
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status;
        while ((waitpid(pid_, &status, 0) < 0) && (errno == EINTR)) {
        }
    }
}

} // namespace pxn_test
