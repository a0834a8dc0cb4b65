#include "info_snapshot.h"

#include <ucs/pxn/identity.h>
#include <ucs/pxn/os_resource.h>
#include <ucs/pxn/registry_lease.h>
#include <ucs/pxn/settings.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <sys/mman.h>
#include <unistd.h>

namespace pxn_tools {

using namespace pxn;

std::string strformat(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int length = vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    std::string text(size_t(std::max(length, 0)) + 1, '\0');
    va_start(ap, fmt);
    vsnprintf(&text[0], text.size(), fmt, ap);
    va_end(ap);
    text.resize(text.size() - 1);
    return text;
}

bool is_stale(const std::string &liveness)
{
    return (liveness == "dead") || (liveness == "pid reused");
}

std::string file_type(mode_t mode)
{
    return S_ISREG(mode) ? "regular file" : S_ISDIR(mode) ? "directory" :
           S_ISFIFO(mode) ? "fifo" : S_ISLNK(mode) ? "symlink" : "special file";
}

uint64_t credit_in_use(const LaneSnapshot &l, uint32_t slots, bool *garbage)
{
    *garbage = (l.head < l.reaped) || (l.head - l.reaped > slots);
    return (l.head < l.reaped) ? 0 : std::min<uint64_t>(l.head - l.reaped, slots);
}

namespace {

std::string process_liveness(uint32_t pid, uint64_t start_time, bool known)
{
    if ((pid == 0) || (pid > uint32_t(INT_MAX))) {
        return "dead";
    }
    uint64_t now_start = 0;
    const ucs_status_t status = process_start_time(pid_t(pid), &now_start);
    if (status == UCS_ERR_NO_ELEM) {
        return "dead";
    } else if (status != UCS_OK) {
        return "unknown";
    }
    return !known ? "exists" : (now_start == start_time) ? "alive" : "pid reused";
}

/* The header's own geometry, within the limits pxn enforces on settings. */
std::string geometry_problem(const abi::ProcessHeader &h)
{
    const Geometry g = header_geometry(h);
    if ((g.lanes < 1) || (g.lanes > kMaxLanes) || (g.slots < 1) ||
        (g.slots > kMaxSlots) || (g.slot_size < kMinSlotSize) ||
        (g.slot_size > kMaxSlotSize) || (g.slot_size % 64 != 0) ||
        (g.max_plan < 1) || (g.max_plan > kMaxPlan) ||
        (g.arena_size() > kMaxArenaSize)) {
        return strformat("geometry out of pxn's limits: lanes=%" PRIu32 " slots=%"
                         PRIu32 " slot_size=%" PRIu64 " max_plan=%" PRIu32,
                         g.lanes, g.slots, g.slot_size, g.max_plan);
    }
    if ((h.arena_kind != 0) && (h.arena_kind != abi::kArenaHostShm) &&
        (h.arena_kind != abi::kArenaCudaIpc)) {
        return strformat("unknown arena kind %" PRIu32, h.arena_kind);
    }
    return "";
}

/* A read that faults because the file shrank under the mapping jumps back
 * here instead of killing the tool. Only plain stores into memory prepared
 * before the jump point happen while it is armed. */
sigjmp_buf            g_bus_jump;
volatile sig_atomic_t g_bus_armed = 0;

void on_sigbus(int sig)
{
    if (g_bus_armed) {
        siglongjmp(g_bus_jump, 1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void read_lane(const LaneBlock &lane, LaneSnapshot *v)
{
    using abi::load_acquire;
    using abi::load_relaxed;
    /* The owner block is a seqlock over lane_epoch (lane_claim.h). */
    for (int attempt = 0; attempt < 3; ++attempt) {
        const uint64_t e1 = load_acquire(lane.owner().lane_epoch);
        v->state          = load_acquire(lane.owner().state);
        v->owner_pid      = load_relaxed(lane.owner().owner_pid);
        v->owner_start    = load_relaxed(lane.owner().owner_start_time);
        v->owner_epoch    = load_relaxed(lane.owner().owner_epoch);
        v->initial_seq    = load_relaxed(lane.owner().initial_seq);
        std::atomic_thread_fence(std::memory_order_acquire);
        v->lane_epoch = load_relaxed(lane.owner().lane_epoch);
        v->owner_torn = (e1 != v->lane_epoch);
        if (!v->owner_torn) {
            break;
        }
    }
    v->head        = load_acquire(lane.producer().head);
    v->doorbell    = load_acquire(lane.producer().doorbell);
    v->reaped      = load_acquire(lane.producer().reaped);
    v->consumed    = load_acquire(lane.consumer().consumed);
    v->completed   = load_acquire(lane.consumer().completed);
    v->acked_epoch = load_acquire(lane.consumer().lane_epoch);
    for (uint32_t r = 0; r < abi::kRouteMailboxes; ++r) {
        v->routes += (load_relaxed(lane.route(r).request.request_gen) !=
                      load_relaxed(lane.route(r).reply.reply_gen));
    }
    for (uint32_t k = 0; k < abi::kMaxRkeys; ++k) {
        v->rkeys += (load_relaxed(lane.rkey(k).gen) != 0);
    }
}

/* Copies the live parts of a mapped, checked control file. False if the
 * file was truncated meanwhile. */
bool read_mapping(const uint8_t *base, EntrySnapshot *e)
{
    ControlView view;
    view.base     = const_cast<uint8_t*>(base); /* mapped PROT_READ */
    view.geometry = header_geometry(e->header);
    e->lanes.assign(view.geometry.lanes, LaneSnapshot());
    LaneSnapshot *lanes = e->lanes.data();

    struct sigaction sa = {}, old = {};
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &old);
    if (sigsetjmp(g_bus_jump, 1) != 0) {
        g_bus_armed = 0;
        sigaction(SIGBUS, &old, nullptr);
        return false;
    }
    g_bus_armed     = 1;
    const auto &h   = view.header();
    e->state        = abi::load_acquire(h.state);
    e->sleeping     = abi::load_relaxed(h.relay_sleeping);
    e->heartbeat_ns = abi::load_acquire(h.heartbeat_ns);
    const auto *c   = reinterpret_cast<const uint64_t*>(base + abi::kCountersOffset);
    auto *counters  = reinterpret_cast<uint64_t*>(&e->counters);
    for (size_t i = 0; i < sizeof(e->counters) / sizeof(uint64_t); ++i) {
        counters[i] = abi::load_relaxed(c[i]);
    }
    for (uint32_t i = 0; i < view.geometry.lanes; ++i) {
        read_lane(view.lane(i), &lanes[i]);
    }
    g_bus_armed = 0;
    sigaction(SIGBUS, &old, nullptr);
    return true;
}

void read_control(int dir_fd, EntrySnapshot *e)
{
    UniqueFd fd(openat(dir_fd, e->name.c_str(),
                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) {
        e->reason = (errno == EACCES) ? std::string("permission denied") :
                    strformat("open failed: %s", strerror(errno));
        return;
    }
    uint64_t file_bytes = 0;
    e->reason = read_header(fd.get(), geteuid(), &e->header, &file_bytes);
    if (e->reason.empty()) {
        e->reason = check_header(e->header, file_bytes, e->parsed_name, geteuid(),
                                 header_geometry(e->header));
    }
    if (e->reason.empty()) {
        e->reason = geometry_problem(e->header);
    }
    if (!e->reason.empty()) {
        return;
    }
    e->header_ok = true;
    void *map = mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd.get(), 0);
    if (map == MAP_FAILED) {
        e->reason = strformat("mmap failed: %s", strerror(errno));
    } else {
        if (!read_mapping(static_cast<const uint8_t*>(map), e)) {
            e->reason = "truncated while reading (SIGBUS)";
        }
        munmap(map, file_bytes);
    }
    if (!e->reason.empty()) {
        e->lanes.clear();
        return;
    }
    e->liveness = process_liveness(e->header.pid, e->header.start_time, true);
    for (LaneSnapshot &lane : e->lanes) {
        if (lane.state == abi::kLaneClaimed) {
            lane.owner_liveness = process_liveness(lane.owner_pid,
                                                   lane.owner_start, true);
        }
    }
}

void read_registry(RegistrySnapshot *reg)
{
    struct stat st;
    if (lstat(reg->path.c_str(), &st) != 0) {
        reg->reason = (errno == ENOENT) ? "does not exist" :
                      strformat("lstat failed: %s", strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        reg->reason = "a " + file_type(st.st_mode) + ", not a directory (pxn "
                      "refuses it; not followed)";
        return;
    }
    if (st.st_uid != geteuid()) {
        reg->reason = strformat("owned by uid %u, not %u: not read",
                                unsigned(st.st_uid), unsigned(geteuid()));
        return;
    }
    if ((st.st_mode & 07777) != 0700) {
        reg->problems.push_back(strformat("mode %04o, expected 0700: pxn refuses "
                                          "this directory", st.st_mode & 07777));
    }
    const int dfd = open(reg->path.c_str(),
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *dir = (dfd < 0) ? nullptr : fdopendir(dfd);
    if (dir == nullptr) {
        reg->reason = (errno == EACCES) ? "permission denied" :
                      strformat("cannot open: %s", strerror(errno));
        if (dfd >= 0) {
            close(dfd);
        }
        return;
    }
    std::map<std::string, EntrySnapshot> by_name;
    while (const struct dirent *de = readdir(dir)) {
        const std::string name = de->d_name;
        if ((name == ".") || (name == "..") || (name == kLockName) ||
            (name == kUsersName)) {
            continue;
        }
        EntrySnapshot e;
        e.name       = name;
        e.stat_ok    = (fstatat(dfd, name.c_str(), &e.st, AT_SYMLINK_NOFOLLOW) == 0);
        e.stat_errno = e.stat_ok ? 0 : errno;
        e.parsed     = parse_entry_name(name.c_str(), &e.parsed_name);
        const std::string suffix = e.parsed ? e.parsed_name.suffix : "";
        e.kind = ((suffix == kSuffixControl) || (suffix == kSuffixInit) ||
                  (suffix == kSuffixArena) || (suffix == kSuffixWake)) ?
                 suffix : "unexpected";
        by_name[name] = e;
    }
    std::map<std::string, EntrySnapshot*> owners;
    for (auto &kv : by_name) {
        EntrySnapshot &e = kv.second;
        if (!e.stat_ok) {
            e.reason = strformat("gone or unreadable: %s", strerror(e.stat_errno));
            continue;
        }
        const bool fifo_expected = (e.kind == kSuffixWake);
        const bool type_ok = fifo_expected ? S_ISFIFO(e.st.st_mode) :
                                             S_ISREG(e.st.st_mode);
        if (e.st.st_uid != geteuid()) {
            e.reason = strformat("owned by uid %u, not %u: not read",
                                 unsigned(e.st.st_uid), unsigned(geteuid()));
        } else if (!type_ok && (e.kind != "unexpected")) {
            e.reason = "a " + file_type(e.st.st_mode) + ", not a " +
                       (fifo_expected ? "fifo" : "regular file");
        } else if ((e.st.st_mode & 07777) != 0600) {
            e.problems.push_back(strformat("mode %04o, expected 0600",
                                           e.st.st_mode & 07777));
        }
        if ((e.kind == kSuffixControl) || (e.kind == kSuffixInit)) {
            const std::string stem = entry_stem(e.parsed_name.pid,
                                                e.parsed_name.epoch);
            EntrySnapshot *&owner  = owners[stem];
            owner = ((owner == nullptr) || (e.kind == kSuffixControl)) ? &e : owner;
        }
    }
    /* Arena and wake files belong to the control file of their stem. */
    std::vector<const EntrySnapshot*> shown;
    for (auto &kv : by_name) {
        EntrySnapshot &e = kv.second;
        const auto owner = ((e.kind == kSuffixArena) || (e.kind == kSuffixWake)) ?
                           owners.find(entry_stem(e.parsed_name.pid,
                                                  e.parsed_name.epoch)) :
                           owners.end();
        if (owner == owners.end()) {
            shown.push_back(&e);
            continue;
        }
        EntrySnapshot *o = owner->second;
        o->files.push_back(e.kind);
        o->arena_bytes = (e.kind == kSuffixArena) ? uint64_t(e.st.st_size) :
                                                    o->arena_bytes;
        o->arena_allocated = (e.kind == kSuffixArena) ?
                             uint64_t(e.st.st_blocks) * 512 : o->arena_allocated;
        for (const auto &p : e.problems) {
            o->problems.push_back(e.kind + " file: " + p);
        }
        if (!e.reason.empty()) {
            o->problems.push_back(e.kind + " file: " + e.reason);
        }
    }
    for (const EntrySnapshot *shown_entry : shown) {
        EntrySnapshot e = *shown_entry;
        if (e.parsed) {
            e.liveness = process_liveness(e.parsed_name.pid, 0, false);
        }
        if (((e.kind == kSuffixControl) || (e.kind == kSuffixInit)) &&
            e.reason.empty()) {
            read_control(dfd, &e);
        }
        const bool has_arena = std::find(e.files.begin(), e.files.end(),
                                         kSuffixArena) != e.files.end();
        if (e.read() && (e.header.arena_kind == abi::kArenaHostShm)) {
            if (!has_arena) {
                e.problems.push_back("its host arena file is missing");
            } else if (e.arena_bytes != e.header.arena_size) {
                e.problems.push_back(strformat("arena file has %" PRIu64 " bytes, "
                                               "the header says %" PRIu64,
                                               e.arena_bytes, e.header.arena_size));
            }
        } else if (e.read() && (e.header.arena_kind == 0) &&
                   (e.state != abi::kProcessInit)) {
            e.problems.push_back("published without an arena");
        }
        reg->entries.push_back(e);
    }
    closedir(dir);
}

} // namespace

std::vector<RegistrySnapshot> snapshot_registries(const std::string &base,
                                                  bool all,
                                                  const std::string &group,
                                                  std::string *message)
{
    std::vector<RegistrySnapshot> regs;
    const std::string own = "ucx-pxn-" + std::to_string(geteuid()) + "-";
    if (!all) {
        RegistrySnapshot reg;
        reg.path  = base + "/" + own + group;
        reg.group = group;
        reg.uid   = geteuid();
        regs.push_back(reg);
    } else if (DIR *dir = opendir(base.c_str())) {
        std::vector<std::string> names;
        while (const struct dirent *de = readdir(dir)) {
            if (strncmp(de->d_name, "ucx-pxn-", 8) == 0) {
                names.push_back(de->d_name);
            }
        }
        closedir(dir);
        std::sort(names.begin(), names.end());
        for (const auto &name : names) {
            RegistrySnapshot reg;
            reg.path = base + "/" + name;
            char *end = nullptr;
            const char *digits = name.c_str() + 8;
            reg.uid = strtoull(digits, &end, 10);
            if ((end == digits) || (*end != '-') || !isdigit(*digits)) {
                reg.reason = "not a pxn registry name (ucx-pxn-<uid>-<group>): "
                             "not read";
            } else {
                reg.group = end + 1;
                if (reg.uid != geteuid()) {
                    reg.reason = strformat("registry of uid %" PRIu64 ": not read",
                                           reg.uid);
                }
            }
            regs.push_back(reg);
        }
    } else {
        *message = strformat("cannot list %s: %s", base.c_str(), strerror(errno));
        return regs;
    }
    size_t shown = 0;
    for (RegistrySnapshot &reg : regs) {
        if (reg.reason.empty()) {
            read_registry(&reg);
        }
        shown += reg.entries.size();
    }
    if (regs.empty()) {
        *message = "no pxn registry (ucx-pxn-*) in " + base;
    } else if (!all && (regs[0].reason == "does not exist")) {
        *message = "no pxn registry " + regs[0].path + " (no pxn process of uid " +
                   std::to_string(geteuid()) + " in group " + group +
                   " since boot; another UCX_PXN_GROUP? --all lists them)";
    } else if (shown == 0) {
        *message = "no pxn entries to show";
    }
    return regs;
}

std::string printable(const std::string &s)
{
    std::string out;
    for (unsigned char c : s) {
        out += ((c >= 0x20) && (c < 0x7f)) ? std::string(1, char(c)) :
                                             strformat("\\x%02x", c);
    }
    return out;
}

} // namespace pxn_tools
