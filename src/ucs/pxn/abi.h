/*
 * The pxn shared-memory ABI: every struct that crosses a process boundary.
 *
 * Files of a registry (/dev/shm/ucx-pxn-<uid>-<group>/), <pid> in decimal,
 * <epoch> as exactly 16 lowercase hex digits (control_file.h):
 *   p<pid>-<epoch>.init   the control file while it is written (state INIT)
 *   p<pid>-<epoch>.ctl    control file of one relay incarnation:
 *                         ProcessHeader, then `lanes` lane blocks
 *   p<pid>-<epoch>.arena  host staging arena (ArenaKind::kHostShm), sparse:
 *                         only the lanes the relay backs take memory
 *   p<pid>-<epoch>.wake   FIFO that wakes the relay
 *   .lock                 flock for register / claim / cleanup only
 *
 * Rules (docs/abi.md has the full text):
 * - Fixed-width fields, offsets instead of pointers, little-endian x86-64 /
 *   aarch64 only. Sizes and offsets are pinned by static_assert here and by
 *   test/gtest/ucs/test_abi_layout.cc. Any change bumps kAbiVersion.
 * - One writer per field. Producer (sender) and consumer (relay) fields are
 *   in separate 64-byte blocks.
 * - Publication: write the payload, then store-release the counter or commit
 *   field; readers load-acquire it before reading the payload. Fields read
 *   or written concurrently are accessed only through the helpers at the end
 *   of this file (std::atomic_ref semantics on plain fields).
 * - A reader never trusts anything written by another process: every index,
 *   length and count is validated before use (see descriptor.h).
 *
 * Lane block layout (offsets from the lane's start, all 64-byte aligned):
 *   LaneHeader                         sizeof(LaneHeader)
 *   RouteEntry  routes[kRouteMailboxes]   (route mailboxes)
 *   RkeyEntry   rkeys[kMaxRkeys]
 *   Completion  completions[slots]     (rounded up to 64 bytes)
 *   descriptors[slots], each desc_stride = align64(sizeof(DescriptorHeader)
 *                                          + max_plan * sizeof(Plan))
 * Slot of sequence number s: (s - 1) % slots. A lane's slots are one block
 * of slots * slot_size bytes, slot k at k * slot_size: in a host arena the
 * block of lane l starts at l * slots * slot_size of the arena file; in a
 * GPU arena each lane has an allocation of its own, exported by the IPC
 * handle in its LaneMemory block.
 */
#ifndef PXN_ABI_H_
#define PXN_ABI_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace pxn {
namespace abi {

constexpr uint64_t kMagic      = 0x314e58505843556full; /* "oUCXPXN1" */
constexpr uint32_t kAbiVersion = 9;
constexpr size_t   kCacheLine  = 64;
constexpr size_t   kNameMax    = 64;  /* NUL-terminated names */
constexpr size_t   kHandleMax  = 128; /* arena export handle */
constexpr size_t   kTlNameMax  = 32;
constexpr uint32_t kRouteMailboxes = 16; /* route requests in flight per lane */
constexpr uint32_t kMaxRkeys   = 64;  /* per lane */
constexpr size_t   kRkeyMax    = 240; /* packed inner rkey */
constexpr size_t   kDevAddrMax = 64;
constexpr size_t   kIfaceAddrMax = 64;
constexpr size_t   kEpAddrMax  = 256;

enum ProcessState : uint32_t {
    kProcessInit    = 1, /* being written, not yet renamed to *.ctl */
    kProcessReady   = 2, /* published: may be discovered and claimed */
    kProcessClosing = 3  /* orderly shutdown: claim nothing new */
};

enum ArenaKind : uint32_t {
    kArenaHostShm = 1, /* handle: file name (NUL-terminated) in the registry */
    kArenaCudaIpc = 2  /* no arena-wide handle: GPU memory per lane, each
                          exported in the lane's LaneMemory.handle */
};

/* How a lane incarnation began. */
enum LaneOwnerFlags : uint32_t {
    /* A renewal by the same owner (the seq wrap of seq.h): routes and rkeys
     * stay, in the lane and in the relay; only the sequence starts over. */
    kLaneKeepRoutes = 1
};

enum LaneState : uint32_t {
    kLaneFree    = 0,
    kLaneClaimed = 1
};

enum Op : uint32_t {
    kOpPut = 1, /* slot -> target memory */
    kOpGet = 2, /* target memory -> slot */
    kOpAm  = 3  /* slot -> the target iface's AM handlers, a message per
                   plan (am_frame.h) */
};

enum RouteKind : uint32_t {
    kRouteToIface   = 1, /* a route to the target at dev + iface address */
    kRouteCreateEp  = 2, /* ep-to-ep, first round: an unconnected relay ep */
    kRouteConnectEp = 3, /* ep-to-ep, second round: connect it to dev + ep */
    kRouteRelease   = 4  /* the lane no longer uses `route` */
};

/*
 * Control file header. The identity and geometry block is written once by
 * the relay before the file is published (rename) and never changes. The
 * live block is written only by the relay.
 */
struct alignas(kCacheLine) ProcessHeader {
    /* identity, immutable after publication */
    uint64_t magic;
    uint32_t abi_version;
    uint32_t header_size; /* sizeof(ProcessHeader) */
    uint32_t uid;
    uint32_t pid;
    uint64_t start_time;  /* /proc/<pid>/stat field 22: pid reuse check */
    uint64_t epoch;       /* random, != 0, new for every relay incarnation */
    char     node_id[kNameMax];
    char     rail[kNameMax];
    char     device[kNameMax];
    char     inner_tl[kTlNameMax];
    /* geometry, immutable */
    uint32_t lanes;
    uint32_t slots;
    uint64_t slot_size;
    uint32_t max_plan;
    uint32_t arena_kind;   /* ArenaKind */
    uint64_t arena_size;   /* lanes * slots * slot_size */
    uint64_t lane_offset;  /* offset of lane 0 from the file start */
    uint64_t lane_stride;  /* bytes per lane block */
    uint64_t desc_stride;  /* bytes per descriptor */
    uint64_t file_size;
    uint8_t  arena_handle[kHandleMax];
    uint8_t  reserved0[56];

    /* live, written by the relay */
    alignas(kCacheLine) uint32_t state; /* ProcessState */
    uint32_t relay_sleeping;            /* 1: wake it through the FIFO */
    uint64_t heartbeat_ns;              /* CLOCK_MONOTONIC */
    uint8_t  reserved1[48];
};

/*
 * How long something waited, as a histogram: count and sum of the samples
 * (ns) and how many fell into each bucket (not cumulative): bucket i < 7
 * holds samples of at most kLatencyBoundsNs[i], bucket 7 the rest. Added
 * to with relaxed atomic adds (record_latency), by any number of writers.
 */
constexpr uint32_t kLatencyBuckets = 8;
constexpr uint64_t kLatencyBoundsNs[kLatencyBuckets - 1] = {
    10000, 50000, 100000, 500000, 1000000, 4000000, 16000000};

struct LatencyHistogram {
    uint64_t count;
    uint64_t sum_ns;
    uint64_t buckets[kLatencyBuckets];
};

/*
 * Counters of one relay process, at kCountersOffset of its control file,
 * for inspection tools and tests. The relay block has one writer (the
 * engine thread, relaxed stores); the sender block holds the process's
 * sender counters, added to atomically by its lanes (every worker).
 * Readers get each value atomically, not a consistent set.
 */
struct alignas(kCacheLine) RelayCounters {
    uint64_t pieces;        /* forwarded successfully */
    uint64_t bytes;
    uint64_t failed_pieces; /* inner transport errors */
    uint64_t rejected;      /* invalid descriptors */
    uint64_t routes;        /* route requests granted */
    uint64_t route_errors;
    uint64_t lane_resets;   /* new lane owners acknowledged */
    uint64_t inflight;      /* pieces being forwarded now */
    uint64_t last_completion_ns; /* CLOCK_MONOTONIC of the last completion
                                    written; 0: none yet */
    uint64_t routes_active; /* routes (inner eps) held now, all lanes */
    uint64_t lane_commits;  /* lane memories backed (file pages reserved, or
                               GPU memory allocated, exported, registered) */
    uint64_t lane_commit_ns; /* time spent backing them, on the engine
                                thread (CLOCK_MONOTONIC) */
    uint64_t warm_claims;   /* claims acknowledged on a lane whose memory was
                               still backed */
    uint64_t lanes_backed;  /* lanes with memory now (claimed or warm) */
    uint64_t fenced;        /* pieces not (or not wholly) forwarded because
                               their sender had given up on them
                               (LaneProducer::abandoned) */
    uint64_t rkeys_held;    /* remote keys unpacked with the inner transport
                               now, all lanes */
    uint64_t inner_ops;     /* inner operations posted (an SGL counts once) */
    uint64_t inner_sgl_ops; /* of which scatter-gather operations of several
                               slices (put/get_sgl_zcopy) */
    LatencyHistogram pickup; /* a CPU-rung doorbell (LaneProducer::rung_ns)
                                to the relay taking its piece */
    uint64_t get_pieces;    /* of pieces and bytes: gets (the rest: puts and
                               active messages) */
    uint64_t get_bytes;
    uint64_t am_pieces;     /* of pieces: active messages (forwarded whole) */
    uint64_t am_messages;   /* messages handed to the inner transport (a
                               piece that failed part-way: those sent) */
    uint64_t am_bytes;      /* their payload */
    uint64_t am_credit_waits; /* times an AM piece stopped for want of its
                                 target's credit */
    uint64_t reserved[6];
};

struct alignas(kCacheLine) SenderCounters {
    uint64_t pieces;        /* published to relays */
    uint64_t bytes;
    uint64_t credit_stalls; /* times a lane ran out of ring credit */
    uint64_t failed_ops;    /* operations completed with an error */
    uint64_t fallback_ops;  /* sent on a direct path instead */
    uint64_t fallback_bytes;
    uint64_t lanes;         /* lanes currently held */
    uint64_t gather_pieces; /* GPU pieces staged by the gather kernel */
    uint64_t last_completion_ns; /* CLOCK_MONOTONIC of the last completion
                                    reaped; 0: none yet */
    uint64_t lane_open_ns;  /* claim to acknowledged and mapped, summed over
                               the lanes opened */
    uint64_t lane_map_ns;   /* of which mapping the lanes' slots */
    uint64_t spare_misses;  /* ep-to-ep endpoints created while a lane had
                               no spare relay ep: they cannot send to its
                               rail */
    LatencyHistogram completion; /* the relay writing a completion
                                    (LaneConsumer::completed_ns) to a
                                    sender reaping it */
    uint64_t get_pieces;    /* of pieces and bytes: gets (the rest: puts and
                               active messages) */
    uint64_t get_bytes;
    uint64_t am_sent;       /* active messages published to relays */
    uint64_t am_received;   /* handed to the AM handlers of the process's
                               ifaces */
    uint64_t am_refused;    /* frames the process's AM ports dropped
                               (malformed, no such iface, beyond credit) */
    uint64_t reserved[5];
};

struct ProcessCounters {
    RelayCounters  relay;
    SenderCounters sender;
};

/*
 * Owner of a lane: written under the registry lock by the claiming sender
 * (state, owner_*, lane_epoch) and by cleanup; read by the relay.
 */
struct alignas(kCacheLine) LaneOwner {
    uint32_t state;            /* LaneState */
    uint32_t owner_pid;
    uint64_t owner_start_time;
    uint64_t owner_epoch;      /* the sender's own process epoch */
    uint64_t lane_epoch;       /* new at every claim; descriptors carry it */
    uint64_t initial_seq;      /* counters start here (normally 0) */
    uint32_t flags;            /* LaneOwnerFlags of this incarnation */
    uint8_t  reserved[20];
};

/* Written only by the sender owning the lane. */
struct alignas(kCacheLine) LaneProducer {
    uint64_t head;     /* last seq whose descriptor is committed */
    uint64_t doorbell; /* last seq whose payload is in its slot */
    uint64_t reaped;   /* last seq whose completion the sender consumed */
    uint64_t abandoned; /* the lane_epoch of an incarnation whose published
                           pieces the sender failed (relay declared dead,
                           staging error): written (seq_cst) before any of
                           them is reported; the relay posts no inner
                           operation of that incarnation once it reads it */
    uint64_t rung_ns;   /* CLOCK_MONOTONIC of the last doorbell rung by the
                           CPU, written before it (relaxed; a GPU-rung
                           doorbell writes 0 first); for the relay's pickup
                           histogram only */
    uint8_t  reserved[24];
};

/* Written only by the relay. */
struct alignas(kCacheLine) LaneConsumer {
    uint64_t consumed;   /* last seq the relay picked up */
    uint64_t completed;  /* contiguous: every seq <= completed is done */
    uint64_t lane_epoch; /* epoch the relay state belongs to */
    int32_t  ack_status; /* ucs_status_t of that acknowledgement: UCS_OK,
                            or why the lane cannot be used (no memory for
                            its slots); written before lane_epoch */
    uint32_t reserved0;
    uint64_t completed_ns; /* CLOCK_MONOTONIC of the last completion entry,
                              written before it (relaxed); for the sender's
                              completion histogram only */
    uint8_t  reserved[24];
};

/*
 * Written only by the relay: the memory of the lane's slots. The relay
 * backs a lane before it acknowledges a claim (sync_owner) and keeps the
 * memory while the lane is claimed; a free lane's memory stays for a
 * while (warm) so that the next claim finds it. A claimer reads `backed`
 * (acquire) to prefer warm lanes; the owner reads `handle` after it
 * load-acquired consumer.lane_epoch == its lane epoch, and it stays valid
 * until the owner releases the lane. Claims never write this block.
 */
struct alignas(kCacheLine) LaneMemory {
    uint64_t gen;        /* new for every backing (relay-wide count); 0:
                            never backed */
    uint64_t size;       /* bytes of the backing: slots * slot_size */
    uint32_t backed;     /* 1: the lane has memory now (claimed or warm) */
    uint32_t reserved0;
    uint8_t  handle[64]; /* GPU arena: cudaIpcMemHandle_t of the lane's
                            slots (slot 0 at offset 0); host arena: zero */
    uint8_t  reserved[40];
};

struct alignas(kCacheLine) LaneHeader {
    LaneOwner    owner;
    LaneProducer producer;
    LaneConsumer consumer;
    LaneMemory   memory;
};

/*
 * Route mailbox: how a sender asks its relay for routes. Routes belong to
 * the relay (one table for all its lanes, keyed by target, so that senders
 * reaching the same target share one inner ep); a lane refers to the
 * routes it holds by their relay-wide id, in descriptors and requests.
 * The sender writes a request and store-releases request_gen; the relay
 * answers in the reply block and store-releases reply_gen = request_gen;
 * the mailbox is then free again. route_codec.h reads and writes both
 * sides. The first kRouteCreateEp reply's ep_addr holds: u8 n | the relay's
 * inner device address (n bytes) | its inner ep address.
 */
struct alignas(kCacheLine) RouteRequest {
    uint64_t request_gen;
    uint32_t kind;        /* RouteKind */
    uint32_t route;       /* kRouteConnectEp, kRouteRelease: the route id */
    uint16_t dev_addr_len;
    uint16_t iface_addr_len;
    uint16_t ep_addr_len;
    uint16_t reserved0;
    uint8_t  dev_addr[kDevAddrMax];
    uint8_t  iface_addr[kIfaceAddrMax];
    uint8_t  ep_addr[kEpAddrMax];
    uint8_t  reserved1[40];
};

struct alignas(kCacheLine) RouteReply {
    uint64_t reply_gen;
    int32_t  status;      /* ucs_status_t */
    uint32_t route;       /* the route id granted */
    uint16_t ep_addr_len;
    uint16_t reserved0[3];
    uint8_t  ep_addr[kEpAddrMax];
    uint8_t  reserved1[40];
};

struct RouteEntry {
    RouteRequest request;
    RouteReply   reply;
};

/* A packed inner remote key, written by the sender: payload first, then
 * gen (release). A descriptor may refer to the entry only while its gen is
 * unchanged; the relay caches the unpacked key per (lane, index, gen). */
struct alignas(kCacheLine) RkeyEntry {
    uint64_t gen;     /* 0: empty */
    uint32_t length;
    uint32_t reserved;
    uint8_t  packed[kRkeyMax];
};

/* Written by the relay: status first, then seq (release). */
struct Completion {
    uint64_t seq;
    int32_t  status; /* ucs_status_t */
    uint32_t reserved;
};

/* One segment of a piece: its bytes sit in the slot at the running sum of
 * the previous plans' lengths. */
struct Plan {
    uint64_t remote_addr;
    uint32_t length;
    uint32_t rkey_index;
};

/* Written by the sender: everything, plans included, then seq (release). */
struct alignas(kCacheLine) DescriptorHeader {
    uint64_t seq;        /* commit field */
    uint64_t lane_epoch;
    uint32_t op;         /* Op */
    uint32_t plan_count;
    uint64_t length;     /* sum of plan lengths, <= slot_size */
    uint32_t route;      /* relay-wide route id the lane holds */
    uint32_t flags;
    uint8_t  reserved[24];
};

/* --- pinned layout ------------------------------------------------------ */
static_assert(sizeof(ProcessHeader) == 576, "ProcessHeader ABI");
static_assert(offsetof(ProcessHeader, node_id) == 40, "ProcessHeader ABI");
static_assert(offsetof(ProcessHeader, lanes) == 264, "ProcessHeader ABI");
static_assert(offsetof(ProcessHeader, arena_handle) == 328, "ProcessHeader ABI");
static_assert(offsetof(ProcessHeader, state) == 512, "ProcessHeader ABI");
static_assert(offsetof(ProcessHeader, heartbeat_ns) == 520, "ProcessHeader ABI");
static_assert(sizeof(LaneOwner) == 64, "LaneOwner ABI");
static_assert(sizeof(LaneProducer) == 64, "LaneProducer ABI");
static_assert(sizeof(LaneConsumer) == 64, "LaneConsumer ABI");
static_assert(sizeof(LaneMemory) == 128, "LaneMemory ABI");
static_assert(offsetof(LaneMemory, handle) == 24, "LaneMemory ABI");
static_assert(sizeof(LaneHeader) == 320, "LaneHeader ABI");
static_assert(offsetof(LaneHeader, producer) == 64, "LaneHeader ABI");
static_assert(offsetof(LaneHeader, consumer) == 128, "LaneHeader ABI");
static_assert(offsetof(LaneHeader, memory) == 192, "LaneHeader ABI");
static_assert(sizeof(RouteRequest) == 448, "RouteRequest ABI");
static_assert(sizeof(RouteReply) == 320, "RouteReply ABI");
static_assert(offsetof(RouteRequest, dev_addr) == 24, "RouteRequest ABI");
static_assert(offsetof(RouteReply, ep_addr) == 24, "RouteReply ABI");
static_assert(sizeof(RouteEntry) == 768, "RouteEntry ABI");
static_assert(sizeof(RkeyEntry) == 256, "RkeyEntry ABI");
static_assert(sizeof(Completion) == 16, "Completion ABI");
static_assert(sizeof(Plan) == 16, "Plan ABI");
static_assert(sizeof(DescriptorHeader) == 64, "DescriptorHeader ABI");
static_assert(std::is_trivially_copyable<ProcessHeader>::value &&
              std::is_trivially_copyable<LaneHeader>::value &&
              std::is_trivially_copyable<RouteEntry>::value &&
              std::is_trivially_copyable<DescriptorHeader>::value,
              "shared structs must be trivially copyable");

/* --- derived layout ------------------------------------------------------ */
constexpr uint64_t align_up(uint64_t value, uint64_t align)
{
    return (value + align - 1) / align * align;
}

struct LaneLayout {
    uint64_t routes;      /* offsets from the lane start */
    uint64_t rkeys;
    uint64_t completions;
    uint64_t descriptors;
    uint64_t desc_stride;
    uint64_t lane_stride;
};

constexpr LaneLayout lane_layout(uint32_t slots, uint32_t max_plan)
{
    LaneLayout l{};
    l.routes      = sizeof(LaneHeader);
    l.rkeys       = l.routes + kRouteMailboxes * sizeof(RouteEntry);
    l.completions = l.rkeys + kMaxRkeys * sizeof(RkeyEntry);
    l.descriptors = l.completions +
                    align_up(uint64_t(slots) * sizeof(Completion), kCacheLine);
    l.desc_stride = align_up(sizeof(DescriptorHeader) +
                             uint64_t(max_plan) * sizeof(Plan), kCacheLine);
    l.lane_stride = align_up(l.descriptors + uint64_t(slots) * l.desc_stride,
                             4096);
    return l;
}

/* Offset of lane 0 in the control file; the file is lane_offset +
 * lanes * lane_stride bytes. */
constexpr uint64_t kLaneOffset = 4096;
static_assert(sizeof(ProcessHeader) <= kLaneOffset, "header fits its page");

/* ProcessCounters live between the header and lane 0. */
constexpr uint64_t kCountersOffset = 1024;
static_assert(sizeof(ProcessHeader) <= kCountersOffset, "counters after header");
static_assert(kCountersOffset + sizeof(ProcessCounters) <= kLaneOffset,
              "counters before lane 0");
static_assert(sizeof(RelayCounters) == 320 && sizeof(SenderCounters) == 256,
              "counter blocks ABI");
static_assert(offsetof(RelayCounters, am_pieces) == 240 &&
              offsetof(RelayCounters, am_credit_waits) == 264 &&
              offsetof(SenderCounters, am_sent) == 192 &&
              offsetof(SenderCounters, am_refused) == 208,
              "AM counters ABI");

/* --- access to concurrently used fields -------------------------------- */
template<typename T> inline T load_acquire(const T &field)
{
    static_assert(std::is_integral<T>::value, "integral fields only");
    return __atomic_load_n(&field, __ATOMIC_ACQUIRE);
}

template<typename T> inline T load_relaxed(const T &field)
{
    static_assert(std::is_integral<T>::value, "integral fields only");
    return __atomic_load_n(&field, __ATOMIC_RELAXED);
}

template<typename T> inline void store_release(T &field, T value)
{
    static_assert(std::is_integral<T>::value, "integral fields only");
    __atomic_store_n(&field, value, __ATOMIC_RELEASE);
}

template<typename T> inline void store_relaxed(T &field, T value)
{
    static_assert(std::is_integral<T>::value, "integral fields only");
    __atomic_store_n(&field, value, __ATOMIC_RELAXED);
}

/* A mark that must be visible before anything the writer does next
 * (LaneProducer::abandoned). */
template<typename T> inline void store_seq_cst(T &field, T value)
{
    static_assert(std::is_integral<T>::value, "integral fields only");
    __atomic_store_n(&field, value, __ATOMIC_SEQ_CST);
}

/* Counters: single writer, readers see each value atomically. */
inline void bump(uint64_t &counter, uint64_t by = 1)
{
    store_relaxed(counter, load_relaxed(counter) + by);
}

/* One sample of `ns` into a histogram; any number of writers. */
inline void record_latency(LatencyHistogram &h, uint64_t ns)
{
    uint32_t b = 0;
    while ((b < kLatencyBuckets - 1) && (ns > kLatencyBoundsNs[b])) {
        ++b;
    }
    __atomic_fetch_add(&h.count, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h.sum_ns, ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&h.buckets[b], 1, __ATOMIC_RELAXED);
}

/* The wait from `since` (a stamp of the other side; 0: none) to `now`;
 * nothing for a stamp newer than `now` (read after it). */
inline void record_wait(LatencyHistogram &h, uint64_t since, uint64_t now)
{
    if ((since != 0) && (now >= since)) {
        record_latency(h, now - since);
    }
}

/* Samples over `ns`, a bound of kLatencyBoundsNs: the buckets above it. */
inline uint64_t latency_over(const LatencyHistogram &h, uint64_t ns)
{
    uint64_t over = 0;
    for (uint32_t b = 1; b < kLatencyBuckets; ++b) {
        over += (kLatencyBoundsNs[b - 1] >= ns) ? load_relaxed(h.buckets[b]) : 0;
    }
    return over;
}

} // namespace abi
} // namespace pxn

#endif
