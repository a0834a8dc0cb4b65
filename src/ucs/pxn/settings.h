/*
 * pxn settings: the values of every UCX_PXN_* variable after UCX's parser
 * has read them, and their semantic validation.
 *
 * Contract: validate() checks every field and, on the first bad one, returns
 * UCS_ERR_INVALID_PARAM with a message that starts with the variable's full
 * name (e.g. "UCX_PXN_SLOTS=0: ..."). It logs nothing: the caller logs the
 * message once.
 */
#ifndef PXN_SETTINGS_H_
#define PXN_SETTINGS_H_

#include <ucs/type/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pxn {

/* Shape of a relay's staging arena and lane rings. The arena size is derived,
 * never configured: lanes x slots x slot_size. */
struct Geometry {
    uint32_t lanes     = 7;
    uint32_t slots     = 4;
    uint64_t slot_size = 8ull << 20;
    uint32_t max_plan  = 4096;

    uint64_t arena_size() const { return uint64_t(lanes) * slots * slot_size; }
    bool operator==(const Geometry &o) const
    {
        return (lanes == o.lanes) && (slots == o.slots) &&
               (slot_size == o.slot_size) && (max_plan == o.max_plan);
    }
};

/* Limits enforced by validate(). */
constexpr uint32_t kMaxLanes         = 64;
constexpr uint32_t kMaxSlots         = 4096;
constexpr uint64_t kMinSlotSize      = 4096;
constexpr uint64_t kMaxSlotSize      = 1ull << 30;
constexpr uint32_t kMaxPlan          = 65536;
constexpr uint32_t kMaxInflightDepth = 64;
constexpr uint32_t kMaxRoutes        = 65536;
constexpr uint32_t kMaxGatherCtas    = 1024;
constexpr uint64_t kMaxArenaSize     = 64ull << 30;
constexpr size_t   kMaxGroupLength   = 64;
constexpr size_t   kMaxNodeIdLength  = 63;
/* UCX_PXN_PIECE_BYTES as UCX's memory units read them: auto and inf (the
 * values of UCS_MEMUNITS_AUTO and _INF), and what auto means with a host
 * arena. */
constexpr uint64_t kPieceBytesAuto   = UINT64_MAX - 1;
constexpr uint64_t kPieceBytesInf    = UINT64_MAX;
constexpr uint64_t kHostPieceBytes   = 256ull << 10;

/* How the relay connects its inner eps to targets. */
enum class ConnectModel {
    kAuto,  /* to-iface when the inner transport supports it, else wired
               where a wiring transport opens, else to-ep */
    kIface, /* the relay connects from the target's iface address */
    kEp,    /* ep-to-ep addresses exchanged through the pxn ep address */
    kWired  /* to-iface towards UCP; the relay wires its own ep-to-ep inner
               connection over a to-iface transport of the same device */
};

/* Whether pxn is active in a process (UCX_PXN_ENABLE). */
enum class EnableChoice {
    kAuto, /* when UCX_TLS names pxn explicitly */
    kYes,
    kNo
};

/* Where a relay's staging arena lives. */
enum class ArenaChoice {
    kAuto, /* GPU memory when CUDA works and the inner md registers it */
    kHost, /* a shared-memory file */
    kCuda  /* GPU memory, exported by CUDA IPC */
};

/* How a sender copies into a GPU arena. */
enum class CopyChoice {
    kAuto, /* gather kernel for many/small device segments, else copy engine */
    kCe,   /* copy engine only */
    kSm    /* gather kernel whenever the sources allow it */
};

struct Settings {
    EnableChoice             enable = EnableChoice::kAuto;
    std::string              registry_dir = "/dev/shm"; /* base of the registry */
    std::string              group;
    std::string              node_id;     /* empty: derived from the boot id */
    std::string              rail_map;
    std::vector<std::string> net_tls;
    std::string              home_device; /* empty: the device of the iface */
    ConnectModel             connect_model = ConnectModel::kAuto;
    bool                     direct_fallback = true;
    ArenaChoice              arena         = ArenaChoice::kAuto;
    CopyChoice               copy          = CopyChoice::kAuto;
    int                      cuda_device   = -1; /* -1: current context's */
    bool                     gpu_doorbell  = true; /* false: CPU after event */
    uint32_t                 gather_ctas   = 32;   /* gather kernel grid bound */
    Geometry                 geometry;
    uint32_t                 inflight_depth    = 4;
    uint32_t                 piece_ops         = 64;  /* 0: pieces fill up */
    uint64_t                 piece_bytes       = kPieceBytesAuto; /* 0, inf: off */
    uint32_t                 routes            = 1024; /* relay's route table */
    double                   credit_timeout    = 1.0; /* seconds */
    double                   heartbeat_timeout = 3.0; /* seconds */
    uint32_t                 warm_lanes        = 1;   /* kept backed while free */
    double                   lane_linger       = 10.0; /* seconds a free lane
                                                          keeps its memory */
    uint64_t                 relay_slice       = 0;   /* 0: inner limits only */
    uint64_t                 relay_slice_merge = 4096;
    bool                     relay_sgl         = true; /* inner SGL ops */
    uint64_t                 initial_seq       = 0; /* new lanes count from here */
    double                   engine_spin       = 50e-6; /* seconds */
    double                   engine_poll       = 20e-6; /* seconds */
    std::string              engine_cpus       = "auto"; /* cpu_list.h */
    std::string              engine_nice       = "inherit";
    bool                     am_poll           = true; /* the application's
                                                          progress receives AM */
};

/* UCX_PXN_PIECE_BYTES for a relay whose arena is host memory or not: 0
 * (also for inf) when pieces fill up to the slot. */
uint64_t piece_bytes_for(const Settings &settings, bool host_arena);

/* UCX_PXN_ENGINE_NICE as a number; false for "inherit". */
bool engine_nice_value(const Settings &settings, int *nice);

/* 1..64 characters of [A-Za-z0-9_.-], and not "." or "..". */
bool is_valid_group_name(const std::string &group);

/* Does a UCX_TLS value name transport `tl` explicitly: an entry `tl` or
 * `tl:<suffix>`, in a list that is not an exclusion ("^...")? "all" does
 * not count. */
bool tls_names(const std::string &ucx_tls, const std::string &tl);

/* Is pxn active in a process with these settings and this UCX_TLS value
 * (nullptr: unset)? The one rule for every way pxn is opened. */
bool pxn_requested(const Settings &settings, const char *ucx_tls);

/* The same rule on the raw texts of UCX_PXN_ENABLE and UCX_TLS (nullptr:
 * unset), before pxn's configuration is parsed, so that a job that did not
 * ask for pxn does not see even its configuration errors: 'n' is off,
 * 'auto' (or unset) asks when UCX_TLS names pxn, anything else asks (the
 * parser then takes 'y' or reports the value). */
bool pxn_asked(const char *enable, const char *ucx_tls);

ucs_status_t validate(const Settings &settings, std::string *error);

/* Bytes the registry's file system must hold for one relay of this
 * geometry: its control file, and its host arena when `host_arena`. */
uint64_t relay_footprint(const Geometry &geometry, bool host_arena);

/* A container's small /dev/shm: when the registry's file system has
 * `fs_bytes` in all and the geometry is the default one, shrinks it until a
 * relay with a host arena takes at most a quarter of that (SLOT_SIZE halved
 * down to 256 KiB, then SLOTS down to 2); *changed says so. Every process
 * of the group sees the same file system and must end with the same
 * geometry (relays and senders of different geometries refuse each
 * other), so the shrinking depends on nothing else: a process with a GPU
 * arena shrinks like one with a host arena. A geometry set by the user is
 * never changed: it fits when this process's relay (`host_arena` or not)
 * takes at most a quarter. false: not even the smallest geometry fits, or
 * the user's does not. */
bool fit_geometry(Settings *settings, uint64_t fs_bytes, bool host_arena,
                  bool *changed);

} // namespace pxn

#endif
