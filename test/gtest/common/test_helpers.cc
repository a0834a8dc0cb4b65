#include "test_helpers.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
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
    return PXN_BUILD_DIR;
}

} // namespace pxn_test
