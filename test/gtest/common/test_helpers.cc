#include "test_helpers.h"

#include <apps/locate.h>

#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pxn_test {

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

static int remove_entry(const char *path, const struct stat *, int, struct FTW *)
{
    return remove(path);
}

void remove_tree(const std::string &path)
{
    nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TempDir::TempDir(const std::string &prefix)
{
    std::string pattern = prefix + "XXXXXX";
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
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    for (;;) {
        int         status = 0;
        const pid_t rc     = waitpid(pid_, &status, WNOHANG);
        if (rc == pid_) {
            pid_ = -1;
            return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        }
        if ((rc < 0) && (errno != EINTR)) {
            pid_ = -1;
            return kWaitTimeout;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return kWaitTimeout;
        }
        usleep(1000);
    }
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
