#include "peer_process.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sstream>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pxn_tools {

namespace {

/* iproute2's ip: the first in PATH (a machine without iproute2 gets one
 * carried in, contrib/gpu/host.sh), else where distributions put it. */
std::string ip_binary()
{
    const char *path = getenv("PATH");
    std::stringstream dirs(path ? path : "");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const std::string ip = (dir.empty() ? "." : dir) + "/ip";
        if (access(ip.c_str(), X_OK) == 0) {
            return ip;
        }
    }
    return (access("/usr/sbin/ip", X_OK) == 0) ? "/usr/sbin/ip" : "/sbin/ip";
}

/* 'T' (stopped, or traced) in /proc/<pid>/stat. */
bool is_stopped(pid_t pid)
{
    char buf[512] = {};
    const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
    const int fd = open(stat.c_str(), O_RDONLY | O_CLOEXEC);
    const ssize_t n = (fd >= 0) ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) {
        close(fd);
    }
    const char *paren = (n > 0) ? strrchr(buf, ')') : nullptr;
    return (paren != nullptr) && (paren[1] == ' ') &&
           ((paren[2] == 'T') || (paren[2] == 't'));
}

} // namespace

PeerProcess::~PeerProcess()
{
    /* Ended as a user would end it, so that it leaves nothing behind (its
     * registry files, its group's directory when it is the last): the end
     * of its input ends ucx_pxn_peer's loop and closes UCT; one still busy
     * (or stopped) gets SIGTERM (pxn's handler removes its files), and
     * SIGKILL only if that did not end it either. */
    if (to_fd_ >= 0) {
        close(to_fd_);
        to_fd_ = -1;
    }
    if ((pid_ > 0) && (is_stopped(pid_) || (wait(kQuitMs) == -1000))) {
        ::kill(pid_, SIGTERM);
        ::kill(pid_, SIGCONT);
        if (wait(kTermMs) == -1000) {
            ::kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    if (from_fd_ >= 0) {
        close(from_fd_);
    }
}

bool PeerProcess::start(const std::string &binary, const std::string &netns,
                        const std::vector<std::string> &env,
                        const std::string &md, const std::string &tl,
                        const std::string &device, std::string *error)
{
    int to[2], from[2];
    if ((pipe2(to, O_CLOEXEC) != 0) || (pipe2(from, O_CLOEXEC) != 0)) {
        *error = std::string("pipe: ") + strerror(errno);
        return false;
    }
    std::vector<std::string> argv;
    if (!netns.empty()) {
        argv = {ip_binary(), "netns", "exec", netns};
    }
    for (const auto &a : {binary, md, tl, device}) {
        argv.push_back(a);
    }

    pid_ = fork();
    if (pid_ == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(to[0], 0);
        dup2(from[1], 1);
        for (const auto &e : env) {
            const size_t eq = e.find('=');
            setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
        }
        std::vector<char*> args;
        for (auto &a : argv) {
            args.push_back(const_cast<char*>(a.c_str()));
        }
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    to_fd_   = to[1];
    from_fd_ = from[0];
    if (pid_ < 0) {
        *error = std::string("fork: ") + strerror(errno);
        return false;
    }
    const std::string ready = receive(20000);
    if (ready != "ready") {
        *error = "peer did not start (got '" + ready + "')";
        return false;
    }
    return true;
}

bool PeerProcess::send(const std::string &line)
{
    const std::string data = line + "\n";
    return write(to_fd_, data.data(), data.size()) == ssize_t(data.size());
}

std::string PeerProcess::receive(int timeout_ms)
{
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const size_t nl = buffered_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffered_.substr(0, nl);
            buffered_.erase(0, nl + 1);
            return line;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            return "";
        }
        pollfd pfd{from_fd_, POLLIN, 0};
        if (poll(&pfd, 1, static_cast<int>(left)) <= 0) {
            continue;
        }
        char buf[4096];
        const ssize_t n = read(from_fd_, buf, sizeof(buf));
        if (n <= 0) {
            return "";
        }
        buffered_.append(buf, n);
    }
}

std::string PeerProcess::call(const std::string &line, int timeout_ms)
{
    return send(line) ? receive(timeout_ms) : "";
}

void PeerProcess::kill(int sig)
{
    if (pid_ > 0) {
        ::kill(pid_, sig);
    }
}

bool PeerProcess::stop()
{
    kill(SIGSTOP);
    const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
    for (int attempt = 0; attempt < 5000; ++attempt) {
        bool all_stopped = true;
        DIR *d = opendir(tasks.c_str());
        if (d == nullptr) {
            return false;
        }
        for (dirent *e; (e = readdir(d)) != nullptr;) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char buf[512] = {};
            const std::string stat = tasks + "/" + e->d_name + "/stat";
            const int fd = open(stat.c_str(), O_RDONLY);
            const ssize_t n = (fd >= 0) ? read(fd, buf, sizeof(buf) - 1) : -1;
            if (fd >= 0) {
                close(fd);
            }
            const char *paren = (n > 0) ? strrchr(buf, ')') : nullptr;
            if ((paren == nullptr) || (paren[1] != ' ') || (paren[2] != 'T')) {
                all_stopped = false;
            }
        }
        closedir(d);
        if (all_stopped) {
            return true;
        }
        usleep(1000);
    }
    return false;
}

int PeerProcess::wait(int timeout_ms)
{
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    while (pid_ > 0) {
        int status;
        const pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return -1000;
        }
        usleep(1000);
    }
    return -1000;
}

std::vector<std::string> split(const std::string &line)
{
    std::istringstream in(line);
    std::vector<std::string> words;
    for (std::string w; in >> w;) {
        words.push_back(w);
    }
    return words;
}

std::vector<std::string> split(const std::string &text, char separator)
{
    std::vector<std::string> parts;
    std::istringstream in(text);
    for (std::string part; std::getline(in, part, separator);) {
        if (!part.empty()) {
            parts.push_back(part);
        }
    }
    return parts;
}

bool parse_done(const std::string &line, std::string *status, uint64_t *ops)
{
    const std::vector<std::string> words = split(line);
    if ((words.size() < 4) || (words[0] != "done")) {
        return false;
    }
    std::string s = words[1];
    for (size_t i = 2; i + 2 < words.size(); ++i) {
        s += " " + words[i];
    }
    *status = s;
    if (ops != nullptr) {
        *ops = strtoull(words.back().c_str(), nullptr, 10);
    }
    return true;
}

std::string thread_dir(pid_t pid, const std::string &comm)
{
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    std::string found;
    DIR *d = opendir(tasks.c_str());
    for (dirent *e; (d != nullptr) && found.empty() && ((e = readdir(d)) != nullptr);) {
        const std::string task = tasks + "/" + e->d_name;
        std::string name;
        std::getline(std::ifstream(task + "/comm"), name);
        if ((e->d_name[0] != '.') && (name == comm)) {
            found = task;
        }
    }
    if (d != nullptr) {
        closedir(d);
    }
    return found;
}

double process_cpu_seconds(pid_t pid)
{
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    double ticks = 0;
    DIR *d = opendir(tasks.c_str());
    if (d == nullptr) {
        return 0;
    }
    for (dirent *e; (e = readdir(d)) != nullptr;) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char buf[1024] = {};
        const std::string stat = tasks + "/" + e->d_name + "/stat";
        const int fd = open(stat.c_str(), O_RDONLY);
        const ssize_t n = (fd >= 0) ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0) {
            close(fd);
        }
        const char *p = (n > 0) ? strrchr(buf, ')') : nullptr;
        if (p == nullptr) {
            continue;
        }
        /* Fields after the comm: state is field 3, utime 14, stime 15. */
        std::istringstream in(p + 2);
        std::string field;
        for (int i = 3; (i <= 15) && (in >> field); ++i) {
            if (i >= 14) {
                ticks += std::stod(field);
            }
        }
    }
    closedir(d);
    return ticks / sysconf(_SC_CLK_TCK);
}

bool read_counters(const std::string &group, pid_t pid,
                   pxn::abi::ProcessCounters *counters)
{
    const char *base      = getenv("UCX_PXN_REGISTRY_DIR");
    const std::string dir = std::string((base && *base) ? base : "/dev/shm") +
                            "/ucx-pxn-" + std::to_string(geteuid()) +
                            "-" + group;
    const std::string prefix = "p" + std::to_string(pid) + "-";
    DIR *d = opendir(dir.c_str());
    if (d == nullptr) {
        return false;
    }
    std::string path;
    for (dirent *e; (e = readdir(d)) != nullptr;) {
        const std::string name = e->d_name;
        if ((name.rfind(prefix, 0) == 0) && (name.size() > 4) &&
            (name.compare(name.size() - 4, 4, ".ctl") == 0)) {
            path = dir + "/" + name;
        }
    }
    closedir(d);
    const int fd = path.empty() ? -1 : open(path.c_str(), O_RDONLY);
    if (fd < 0) {
        return false;
    }
    void *map = mmap(nullptr, pxn::abi::kLaneOffset, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        return false;
    }
    memcpy(counters, static_cast<uint8_t*>(map) + pxn::abi::kCountersOffset,
           sizeof(*counters));
    munmap(map, pxn::abi::kLaneOffset);
    return true;
}

BackgroundProcess::~BackgroundProcess()
{
    /* SIGTERM first, as PeerProcess: a pxn process then removes its files. */
    if ((pid_ > 0) && !exited_) {
        ::kill(pid_, SIGTERM);
        ::kill(pid_, SIGCONT);
        if (wait(PeerProcess::kTermMs) == -1000) {
            ::kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
}

bool BackgroundProcess::start(const std::string &netns,
                              const std::vector<std::string> &env,
                              const std::vector<std::string> &argv,
                              const std::string &log_path, std::string *error)
{
    std::vector<std::string> args;
    if (!netns.empty()) {
        args = {ip_binary(), "netns", "exec", netns};
    }
    args.insert(args.end(), argv.begin(), argv.end());
    const int out = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                         0600);
    if (out < 0) {
        *error = log_path + ": " + strerror(errno);
        return false;
    }
    log_path_ = log_path;
    pid_      = fork();
    if (pid_ == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        dup2(null, 0);
        dup2(out, 1);
        dup2(out, 2);
        for (const auto &e : env) {
            const size_t eq = e.find('=');
            if (eq + 1 == e.size()) {
                unsetenv(e.substr(0, eq).c_str());
            } else {
                setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
            }
        }
        std::vector<char*> cargs;
        for (auto &a : args) {
            cargs.push_back(const_cast<char*>(a.c_str()));
        }
        cargs.push_back(nullptr);
        execv(cargs[0], cargs.data());
        dprintf(2, "exec %s: %s\n", cargs[0], strerror(errno));
        _exit(127);
    }
    close(out);
    if (pid_ < 0) {
        *error = std::string("fork: ") + strerror(errno);
        return false;
    }
    return true;
}

void BackgroundProcess::kill(int sig)
{
    if ((pid_ > 0) && !exited_) {
        ::kill(pid_, sig);
    }
}

int BackgroundProcess::wait(int timeout_ms)
{
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    while ((pid_ > 0) && !exited_) {
        int status;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            exited_ = true;
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
            break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return -1000;
        }
        usleep(1000);
    }
    return status_;
}

std::string BackgroundProcess::output() const
{
    std::string text;
    const int fd = open(log_path_.c_str(), O_RDONLY | O_CLOEXEC);
    char buf[65536];
    for (ssize_t n; (fd >= 0) && ((n = read(fd, buf, sizeof(buf))) > 0);) {
        text.append(buf, size_t(n));
    }
    if (fd >= 0) {
        close(fd);
    }
    return text;
}

bool BackgroundProcess::wait_for_output(const std::string &text, int timeout_ms)
{
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    while (output().find(text) == std::string::npos) {
        if ((wait(0) != -1000) || (std::chrono::steady_clock::now() > deadline)) {
            return output().find(text) != std::string::npos;
        }
        usleep(10000);
    }
    return true;
}

} // namespace pxn_tools
