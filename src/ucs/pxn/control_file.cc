#include "control_file.h"

#include "strformat.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <cstdarg>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pxn {

std::string entry_stem(uint32_t pid, uint64_t epoch)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "p%" PRIu32 "-%016" PRIx64, pid, epoch);
    return buf;
}

std::string entry_file_name(uint32_t pid, uint64_t epoch, const char *suffix)
{
    return entry_stem(pid, epoch) + "." + suffix;
}

bool parse_entry_name(const char *name, EntryName *parsed)
{
    const char *p = name;
    if (*p++ != 'p') {
        return false;
    }
    uint64_t pid    = 0;
    int      digits = 0;
    for (; (*p >= '0') && (*p <= '9'); ++p, ++digits) {
        pid = pid * 10 + uint64_t(*p - '0');
        if (pid > UINT32_MAX) {
            return false;
        }
    }
    if ((digits == 0) || (*p++ != '-')) {
        return false;
    }
    uint64_t epoch = 0;
    for (digits = 0; digits < 16; ++digits, ++p) {
        int nibble;
        if ((*p >= '0') && (*p <= '9')) {
            nibble = *p - '0';
        } else if ((*p >= 'a') && (*p <= 'f')) {
            nibble = *p - 'a' + 10;
        } else {
            return false;
        }
        epoch = (epoch << 4) | uint64_t(nibble);
    }
    if ((*p++ != '.') || (*p == '\0') || (strchr(p, '/') != nullptr)) {
        return false;
    }
    parsed->pid    = uint32_t(pid);
    parsed->epoch  = epoch;
    parsed->suffix = p;
    return true;
}

uint64_t control_file_size(const Geometry &geometry)
{
    return abi::kLaneOffset +
           uint64_t(geometry.lanes) *
                   abi::lane_layout(geometry.slots, geometry.max_plan).lane_stride;
}

Geometry header_geometry(const abi::ProcessHeader &header)
{
    Geometry g;
    g.lanes     = header.lanes;
    g.slots     = header.slots;
    g.slot_size = header.slot_size;
    g.max_plan  = header.max_plan;
    return g;
}

std::string fixed_string(const char *field, size_t size)
{
    return std::string(field, strnlen(field, size));
}

ucs_status_t rename_no_replace(int dir_fd, const std::string &from,
                               const std::string &to, bool use_renameat2)
{
    if (use_renameat2) {
        if (renameat2(dir_fd, from.c_str(), dir_fd, to.c_str(),
                      RENAME_NOREPLACE) == 0) {
            return UCS_OK;
        }
        if ((errno != EINVAL) && (errno != ENOSYS) && (errno != EOPNOTSUPP)) {
            const ucs_status_t status = (errno == EEXIST) ?
                                        UCS_ERR_ALREADY_EXISTS : UCS_ERR_IO_ERROR;
            ucs_error("pxn: rename of %s to %s failed: %m", from.c_str(),
                      to.c_str());
            return status;
        }
    }
    /* link() never replaces either; the unlink that follows only removes
     * the second name of a file that is already published. */
    if (linkat(dir_fd, from.c_str(), dir_fd, to.c_str(), 0) != 0) {
        const ucs_status_t status = (errno == EEXIST) ? UCS_ERR_ALREADY_EXISTS :
                                                        UCS_ERR_IO_ERROR;
        ucs_error("pxn: link of %s to %s failed: %m", from.c_str(), to.c_str());
        return status;
    }
    if (unlinkat(dir_fd, from.c_str(), 0) != 0) {
        ucs_warn("pxn: unlink of %s after publishing %s failed: %m",
                 from.c_str(), to.c_str());
    }
    return UCS_OK;
}

uint64_t monotonic_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

namespace {

std::string describe(const Geometry &g)
{
    return strformat("lanes=%" PRIu32 " slots=%" PRIu32 " slot_size=%" PRIu64
                     " max_plan=%" PRIu32, g.lanes, g.slots, g.slot_size,
                     g.max_plan);
}

} // namespace

std::string read_header(int fd, uid_t uid, abi::ProcessHeader *header,
                        uint64_t *file_bytes)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        return strformat("fstat failed: %m");
    }
    if (!S_ISREG(st.st_mode)) {
        return "not a regular file";
    }
    if (st.st_uid != uid) {
        return strformat("owned by uid %u, not %u", unsigned(st.st_uid),
                         unsigned(uid));
    }
    *file_bytes = uint64_t(st.st_size);
    if (*file_bytes < sizeof(*header)) {
        return strformat("truncated: %" PRIu64 " bytes, smaller than a header",
                         *file_bytes);
    }
    const ssize_t n = pread(fd, header, sizeof(*header), 0);
    if (n != ssize_t(sizeof(*header))) {
        return (n < 0) ? strformat("read failed: %m") : "truncated while reading";
    }
    return "";
}

std::string check_header(const abi::ProcessHeader &h, uint64_t file_bytes,
                         const EntryName &name, uid_t uid,
                         const Geometry &geometry)
{
    if (h.magic != abi::kMagic) {
        return strformat("wrong magic 0x%016" PRIx64, h.magic);
    }
    if ((h.abi_version != abi::kAbiVersion) ||
        (h.header_size != sizeof(abi::ProcessHeader))) {
        return strformat("ABI version %" PRIu32 " (header %" PRIu32 " bytes), this "
                         "process speaks version %" PRIu32 " (%zu bytes)",
                         h.abi_version, h.header_size, abi::kAbiVersion,
                         sizeof(abi::ProcessHeader));
    }
    if (h.uid != uid) {
        return strformat("header says uid %" PRIu32 ", not %u", h.uid,
                         unsigned(uid));
    }
    if ((h.pid != name.pid) || (h.epoch != name.epoch) || (h.epoch == 0)) {
        return strformat("header says pid %" PRIu32 " epoch %016" PRIx64
                         ", which does not match the file name", h.pid, h.epoch);
    }
    const Geometry theirs = header_geometry(h);
    if (!(theirs == geometry)) {
        return "geometry " + describe(theirs) + " differs from this process's " +
               describe(geometry);
    }
    const abi::LaneLayout layout = abi::lane_layout(geometry.slots,
                                                    geometry.max_plan);
    const uint64_t size = control_file_size(geometry);
    if ((h.lane_offset != abi::kLaneOffset) ||
        (h.lane_stride != layout.lane_stride) ||
        (h.desc_stride != layout.desc_stride) ||
        (h.arena_size != geometry.arena_size()) || (h.file_size != size)) {
        return strformat("inconsistent layout (lane offset %" PRIu64 " stride %" PRIu64
                         ", descriptor stride %" PRIu64 ", arena %" PRIu64
                         ", file size %" PRIu64 ")", h.lane_offset, h.lane_stride,
                         h.desc_stride, h.arena_size, h.file_size);
    }
    if (file_bytes != size) {
        return strformat("truncated or padded: %" PRIu64 " bytes, expected %" PRIu64,
                         file_bytes, size);
    }
    return "";
}

} // namespace pxn
