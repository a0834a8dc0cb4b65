#include "soak_peer.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sstream>

namespace pxn_tools {

ProcSample ProcSample::of(pid_t pid)
{
    ProcSample s;
    if (pid <= 0) {
        return s;
    }
    const std::string dir = "/proc/" + std::to_string(pid);
    std::ifstream status(dir + "/status");
    for (std::string line; std::getline(status, line);) {
        std::istringstream in(line);
        std::string key;
        long value;
        if (!(in >> key >> value)) {
            continue;
        }
        if (key == "VmRSS:") {
            s.rss_kb = value;
        } else if (key == "RssAnon:") {
            s.anon_kb = value;
        } else if (key == "RssShmem:") {
            s.shmem_kb = value;
        } else if (key == "Threads:") {
            s.threads = value;
        }
    }
    std::ifstream smaps(dir + "/smaps");
    bool in_pxn = false;
    long size   = 0;
    for (std::string line; std::getline(smaps, line);) {
        std::istringstream in(line);
        std::string first, second;
        in >> first >> second;
        if ((first.find('-') != std::string::npos) && (second.size() == 4)) {
            /* a mapping's header: range perms offset dev inode [path] */
            std::string offset, dev, inode, path;
            in >> offset >> dev >> inode >> path;
            in_pxn = (path.rfind("/dev/shm/ucx-pxn-", 0) == 0);
            if (in_pxn) {
                s.pxn_maps = std::max(s.pxn_maps, 0L) + 1;
            }
        } else if (in_pxn && ((first == "Size:") || (first == "Rss:"))) {
            size = strtol(second.c_str(), nullptr, 10);
            long &field = (first == "Size:") ? s.pxn_size_kb : s.pxn_rss_kb;
            field = std::max(field, 0L) + size;
        }
    }
    if (s.rss_kb >= 0) {
        s.pxn_maps    = std::max(s.pxn_maps, 0L);
        s.pxn_size_kb = std::max(s.pxn_size_kb, 0L);
        s.pxn_rss_kb  = std::max(s.pxn_rss_kb, 0L);
    }
    DIR *d = opendir((dir + "/fd").c_str());
    if (d != nullptr) {
        s.fds = 0;
        for (dirent *e; (e = readdir(d)) != nullptr;) {
            s.fds += (e->d_name[0] != '.');
        }
        closedir(d);
    }
    return s;
}

SoakPeer::SoakPeer(int node, int rail, const std::string &binary,
                   const std::vector<std::string> &env) :
    node_(node), rail_(rail),
    name_("node" + std::to_string(node) + "/rail" + std::to_string(rail)),
    binary_(binary), env_(env)
{
}

pid_t SoakPeer::pid() const
{
    return pid_.load();
}

bool SoakPeer::start_locked(std::string *error)
{
    process_.reset(new PeerProcess());
    pid_ = -1;
    if (!process_->start(binary_, "", env_, "pxn_cma", "pxn", "memory", error)) {
        *error = name_ + ": " + *error;
        return false;
    }
    pid_ = process_->pid();
    ++generation_;
    return true;
}

bool SoakPeer::start(std::string *error)
{
    std::lock_guard<std::mutex> guard(mutex_);
    return start_locked(error);
}

uint64_t soak_now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch()).count();
}

void SoakPeer::kill()
{
    last_kill_ns_ = soak_now_ns();
    ++kills_;
    const pid_t pid = pid_.load();
    if (pid > 0) {
        ::kill(pid, SIGKILL);
    }
}

bool SoakPeer::restart(std::string *error)
{
    std::lock_guard<std::mutex> guard(mutex_);
    if (process_ != nullptr) {
        process_->kill(SIGKILL);
        if (process_->wait(10000) == -1000) {
            *error = name_ + ": killed process " + std::to_string(pid_.load()) +
                     " not reaped within 10 s";
            return false;
        }
    }
    return start_locked(error);
}

SoakPeer::Reply SoakPeer::call(uint64_t generation,
                               const std::vector<std::string> &lines,
                               int timeout_ms)
{
    std::lock_guard<std::mutex> guard(mutex_);
    Reply reply;
    if ((generation != generation_.load()) || (process_ == nullptr)) {
        reply.restarted = true;
        return reply;
    }
    for (const std::string &line : lines) {
        std::string answer = process_->call(line, timeout_ms);
        if (answer.empty()) {
            return reply;
        }
        reply.lines.push_back(std::move(answer));
    }
    reply.ok = true;
    return reply;
}

bool SoakPeer::quit(int timeout_ms, std::string *error)
{
    std::lock_guard<std::mutex> guard(mutex_);
    if (process_ == nullptr) {
        return true;
    }
    process_->send("quit");
    const int status = process_->wait(timeout_ms);
    if (status != 0) {
        *error = name_ + " (pid " + std::to_string(pid_.load()) + "): " +
                 ((status == -1000) ? "did not exit within " +
                                      std::to_string(timeout_ms) + " ms of quit" :
                  (status < 0) ? "killed by signal " + std::to_string(-status) :
                                 "exit status " + std::to_string(status));
        process_.reset(); /* kills and reaps it */
        pid_ = -1;
        return false;
    }
    process_.reset();
    pid_ = -1;
    return true;
}

} // namespace pxn_tools
