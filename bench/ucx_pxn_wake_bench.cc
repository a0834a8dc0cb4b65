/*
 * ucx_pxn_wake_bench: how soon a thread that shares its core with busy
 * pollers runs after it is told to, when it waits by blocking (poll() on a
 * pipe, as the relay engine waits now) and when it waits by spinning on
 * sched_yield() (as the engine waited before issue 31). The scheduler
 * alone, no UCX (docs/relay-engine.md, "A relay beside busy pollers").
 *
 *   ucx_pxn_wake_bench [--pollers 1] [--samples 300] [--wait poll,yield]
 *                      [--limit-s 20]
 *
 * Processes: --pollers spinning processes and the waiter pinned to CPU 0,
 * the sender (this process) on CPU 1; the sender stores the time and
 * writes a byte to the pipe every 2-3 ms, the waiter records how long
 * after the store it saw the new time. Prints the waiter's p50, p90 and
 * max per mode, or how many samples it had when --limit-s ran out. Needs
 * two CPUs.
 */
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
}

struct Shared {
    std::atomic<uint64_t> stamp{0};
    std::atomic<uint32_t> samples{0};
    uint64_t              latency_ns[100000];
};

/* The waiter: until `want` samples. */
[[noreturn]] void waiter(Shared *sh, int fd, bool block, unsigned want)
{
    pin(0);
    uint64_t seen = 0;
    while (sh->samples.load() < want) {
        if (block) {
            pollfd p = {fd, POLLIN, 0};
            poll(&p, 1, 1000);
            char buf[64];
            (void)!read(fd, buf, sizeof(buf));
        } else {
            while (sh->stamp.load() == seen) {
                sched_yield();
            }
        }
        const uint64_t stamp = sh->stamp.load();
        if (stamp != seen) {
            seen = stamp;
            sh->latency_ns[sh->samples.load()] = now_ns() - stamp;
            sh->samples.fetch_add(1);
        }
    }
    _exit(0);
}

void run(const std::string &mode, unsigned pollers, unsigned want, double limit_s)
{
    auto *sh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                                         MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (sh) Shared();
    int pipe_fd[2];
    if ((sh == MAP_FAILED) || (pipe(pipe_fd) != 0)) {
        perror("ucx_pxn_wake_bench: setup");
        exit(2);
    }
    fcntl(pipe_fd[0], F_SETFL, O_NONBLOCK);
    std::vector<pid_t> children;
    for (unsigned i = 0; i < pollers; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            pin(0);
            for (volatile unsigned long n = 0;; n = n + 1) {
            }
        }
        children.push_back(pid);
    }
    const pid_t w = fork();
    if (w == 0) {
        waiter(sh, pipe_fd[0], mode == "poll", want);
    }
    pin(1);
    usleep(100000);
    const uint64_t end = now_ns() + uint64_t(limit_s * 1e9);
    while ((sh->samples.load() < want) && (now_ns() < end)) {
        usleep(2000 + rand() % 1000);
        sh->stamp.store(now_ns());
        const char byte = 1;
        (void)!write(pipe_fd[1], &byte, 1);
    }
    children.push_back(w);
    for (pid_t pid : children) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
    const unsigned n = sh->samples.load();
    std::vector<uint64_t> v(sh->latency_ns, sh->latency_ns + n);
    std::sort(v.begin(), v.end());
    if (n < want) {
        printf("%-5s pollers %u: %u of %u samples in %.0f s (the waiter hardly ran)\n",
               mode.c_str(), pollers, n, want, limit_s);
    } else {
        printf("%-5s pollers %u: p50 %.1f us, p90 %.1f us, max %.1f us (%u samples)\n",
               mode.c_str(), pollers, v[n / 2] / 1e3, v[n * 9 / 10] / 1e3,
               v.back() / 1e3, n);
    }
    fflush(stdout);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
    munmap(sh, sizeof(Shared));
}

} // namespace

int main(int argc, char **argv)
{
    unsigned pollers = 1, samples = 300;
    double limit_s   = 20;
    std::string modes = "poll,yield";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string name = argv[i], value = argv[i + 1];
        if (name == "--pollers") {
            pollers = unsigned(std::stoul(value));
        } else if (name == "--samples") {
            samples = std::min(100000u, unsigned(std::stoul(value)));
        } else if (name == "--wait") {
            modes = value;
        } else if (name == "--limit-s") {
            limit_s = std::stod(value);
        } else {
            fprintf(stderr, "ucx_pxn_wake_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if ((argc % 2) != 1) {
        fprintf(stderr, "ucx_pxn_wake_bench: options take a value\n");
        return 2;
    }
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "ucx_pxn_wake_bench: needs two CPUs\n");
        return 2;
    }
    size_t at = 0;
    while (at <= modes.size()) {
        const size_t comma = modes.find(',', at);
        const std::string mode = modes.substr(at, comma - at);
        if ((mode != "poll") && (mode != "yield")) {
            fprintf(stderr, "ucx_pxn_wake_bench: unknown wait %s\n", mode.c_str());
            return 2;
        }
        run(mode, pollers, samples, limit_s);
        at = (comma == std::string::npos) ? modes.size() + 1 : comma + 1;
    }
    return 0;
}
