/*
 * The control file of a relay incarnation as seen by code: its file names,
 * its derived size, the checks a header read from a file must pass before
 * anything in it is trusted, and typed access to its lane blocks.
 *
 * File names (in the registry directory; see abi.h):
 *   p<pid>-<epoch>.<suffix>, pid in decimal, epoch as exactly 16 lowercase
 *   hex digits; suffix "init" (being written, not yet published), "ctl"
 *   (published), "arena", "wake". All files of one incarnation share the
 *   stem p<pid>-<epoch>.
 *
 * Contract of check_header(): a header passes only if every field used to
 * locate anything (magic, ABI version, header size, uid, geometry, lane
 * offset and stride, descriptor stride, arena size, file size) equals what
 * this process derives itself from its own Geometry, and the file really
 * has file_size bytes. Nothing else in a file is trusted: strings are read
 * with fixed_string() (bounded, NUL optional).
 *
 * LaneBlock: a view of one lane inside a mapping; it does not own anything
 * and is valid while the mapping (RegistryEntry or PeerMapping) lives. Its
 * accessors are plain pointer arithmetic with no checks, for the data path:
 * callers pass indices they validated (slot < slots, route < the relay's routes,
 * rkey < kMaxRkeys). Concurrently used fields are read and written with the
 * helpers of abi.h.
 */
#ifndef PXN_CONTROL_FILE_H_
#define PXN_CONTROL_FILE_H_

#include "abi.h"
#include "settings.h"

#include <ucs/type/status.h>

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace pxn {

constexpr const char *kSuffixInit    = "init";
constexpr const char *kSuffixControl = "ctl";
constexpr const char *kSuffixArena   = "arena";
constexpr const char *kSuffixWake    = "wake";
constexpr const char *kLockName      = ".lock";

/* "p<pid>-<16 hex digits>" */
std::string entry_stem(uint32_t pid, uint64_t epoch);
std::string entry_file_name(uint32_t pid, uint64_t epoch, const char *suffix);

struct EntryName {
    uint32_t    pid;
    uint64_t    epoch;
    std::string suffix;
};

/* Parses a name made by entry_file_name(); false for anything else. */
bool parse_entry_name(const char *name, EntryName *parsed);

/* lane_offset + lanes * lane_stride */
uint64_t control_file_size(const Geometry &geometry);

Geometry header_geometry(const abi::ProcessHeader &header);

/* A NUL-terminated copy of at most `size` bytes of a fixed-size field. */
std::string fixed_string(const char *field, size_t size);

/* Renames `from` to `to` in dir_fd atomically, failing with
 * UCS_ERR_ALREADY_EXISTS instead of replacing: renameat2(RENAME_NOREPLACE),
 * or link() + unlink() where the kernel or file system lacks it (and always
 * when use_renameat2 is false, for tests). Logs failures. */
ucs_status_t rename_no_replace(int dir_fd, const std::string &from,
                               const std::string &to, bool use_renameat2 = true);

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no syscall). */
uint64_t monotonic_ns();

/* fstat and pread of the header of an open control file. Returns an empty
 * string on success, else why the file is refused: not a regular file,
 * owned by another uid (the reason then starts with "owned by uid"), or
 * shorter than a header. */
std::string read_header(int fd, uid_t uid, abi::ProcessHeader *header,
                        uint64_t *file_bytes);

/* Checks the identity and geometry block of a header read from a file of
 * `file_bytes` bytes named `name` against this process's ABI, uid and
 * geometry. Returns an empty string if it passes, else the reason. */
std::string check_header(const abi::ProcessHeader &header, uint64_t file_bytes,
                         const EntryName &name, uid_t uid,
                         const Geometry &geometry);

class LaneBlock {
public:
    LaneBlock() = default;
    LaneBlock(uint8_t *base, const Geometry &geometry) :
        base_(base),
        layout_(abi::lane_layout(geometry.slots, geometry.max_plan)),
        slots_(geometry.slots), max_plan_(geometry.max_plan)
    {
    }

    uint8_t *base() const { return base_; }
    uint32_t slots() const { return slots_; }
    uint32_t max_plan() const { return max_plan_; }
    const abi::LaneLayout &layout() const { return layout_; }

    abi::LaneHeader &header() const
    {
        return *reinterpret_cast<abi::LaneHeader*>(base_);
    }
    abi::LaneOwner &owner() const { return header().owner; }
    abi::LaneProducer &producer() const { return header().producer; }
    abi::LaneConsumer &consumer() const { return header().consumer; }
    abi::LaneMemory &memory() const { return header().memory; }

    abi::RouteEntry &route(uint32_t index) const
    {
        return reinterpret_cast<abi::RouteEntry*>(base_ + layout_.routes)[index];
    }
    abi::RkeyEntry &rkey(uint32_t index) const
    {
        return reinterpret_cast<abi::RkeyEntry*>(base_ + layout_.rkeys)[index];
    }
    abi::Completion &completion(uint32_t slot) const
    {
        return reinterpret_cast<abi::Completion*>(base_ + layout_.completions)[slot];
    }
    abi::DescriptorHeader &descriptor(uint32_t slot) const
    {
        return *reinterpret_cast<abi::DescriptorHeader*>(
                base_ + layout_.descriptors + uint64_t(slot) * layout_.desc_stride);
    }
    /* max_plan() entries right after the descriptor header. */
    abi::Plan *plans(uint32_t slot) const
    {
        return reinterpret_cast<abi::Plan*>(&descriptor(slot) + 1);
    }

private:
    uint8_t        *base_     = nullptr;
    abi::LaneLayout layout_   = {};
    uint32_t        slots_    = 0;
    uint32_t        max_plan_ = 0;
};

/* A mapped control file whose header passed check_header(). */
struct ControlView {
    uint8_t *base = nullptr;
    Geometry geometry;

    abi::ProcessHeader &header() const
    {
        return *reinterpret_cast<abi::ProcessHeader*>(base);
    }

    /* Lane `index` (< geometry.lanes, unchecked). */
    LaneBlock lane(uint32_t index) const
    {
        const abi::LaneLayout layout = abi::lane_layout(geometry.slots,
                                                        geometry.max_plan);
        return LaneBlock(base + abi::kLaneOffset +
                                 uint64_t(index) * layout.lane_stride,
                         geometry);
    }
};

} // namespace pxn

#endif
