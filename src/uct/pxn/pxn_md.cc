#include "pxn_md.h"

#include "pxn_compat.h"
#include "pxn_cuda.h"
#include "pxn_log.h"
#include "pxn_node.h"
#include "pxn_relay_service.h"

#include <sys/statvfs.h>

extern "C" {
#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <ucs/sys/string.h>
}

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <unistd.h>
#include <vector>

static const char *uct_pxn_enable_names[]        = {"auto", "y", "n", NULL};
static const char *uct_pxn_connect_model_names[] = {"auto", "iface", "ep", NULL};
static const char *uct_pxn_arena_names[]         = {"auto", "host", "cuda", NULL};
static const char *uct_pxn_copy_names[]          = {"auto", "ce", "sm", NULL};

/* Every UCX_PXN_* variable. Defaults here are the documented defaults. */
ucs_config_field_t uct_pxn_md_config_table[] = {
    {"", "", NULL, ucs_offsetof(uct_pxn_md_config_t, super),
     UCS_CONFIG_TYPE_TABLE(uct_md_config_table)},

    {"ENABLE", "auto",
     "Whether pxn is active in this process: 'y', 'n', or 'auto': when UCX_TLS\n"
     "names pxn (e.g. UCX_TLS=pxn,rc,cuda_copy,cuda_ipc; 'all' does not).\n"
     "Inactive, pxn offers no memory domain and creates nothing: no files,\n"
     "threads or GPU memory.",
     ucs_offsetof(uct_pxn_md_config_t, enable),
     UCS_CONFIG_TYPE_ENUM(uct_pxn_enable_names)},

    {"REGISTRY_DIR", "/dev/shm",
     "Directory holding the node registry ucx-pxn-<uid>-<group>/ (control\n"
     "files, host staging arenas, wakeup FIFOs): a tmpfs every process of\n"
     "the job on this node can reach, e.g. /dev/shm or $XDG_RUNTIME_DIR.",
     ucs_offsetof(uct_pxn_md_config_t, registry_dir), UCS_CONFIG_TYPE_STRING},

    {"GROUP", "default",
     "Name of the job on this node: processes that relay for each other use the\n"
     "same group. 1-64 characters of [A-Za-z0-9_.-]. Selects the registry\n"
     "directory <UCX_PXN_REGISTRY_DIR>/ucx-pxn-<uid>-<group>.",
     ucs_offsetof(uct_pxn_md_config_t, group), UCS_CONFIG_TYPE_STRING},

    {"NODE_ID", "",
     "Identity of this node within the group. Empty: derived from the host's\n"
     "boot id. Set it to emulate several nodes on one host.",
     ucs_offsetof(uct_pxn_md_config_t, node_id), UCS_CONFIG_TYPE_STRING},

    {"RAIL_MAP", "",
     "Canonical rail of each network device, as <device>:<rail>,... (for\n"
     "example mlx5_0:rail0,mlx5_1:rail1). Empty: every device is its own rail.\n"
     "Devices with a port suffix (mlx5_0:1) match their NIC.",
     ucs_offsetof(uct_pxn_md_config_t, rail_map), UCS_CONFIG_TYPE_STRING},

    {"NET_TLS", "rc_mlx5,rc_verbs,dc_mlx5,tcp",
     "Inner transports for the network hop, in order of preference: the first\n"
     "one available on the home device is used.",
     ucs_offsetof(uct_pxn_md_config_t, net_tls), UCS_CONFIG_TYPE_STRING_ARRAY},

    {"HOME_DEVICE", "",
     "The process's home NIC: its relay forwards with it, and every pxn\n"
     "interface of the process receives there, whatever device it is opened\n"
     "on. Empty: the NIC nearest the process's GPU by PCIe topology; without\n"
     "a GPU, each interface's own device.",
     ucs_offsetof(uct_pxn_md_config_t, home_device), UCS_CONFIG_TYPE_STRING},

    {"NET_CONNECT", "auto",
     "How relays connect to targets over the inner transport: 'iface' (from\n"
     "the target's interface address), 'ep' (ep-to-ep addresses exchanged\n"
     "through pxn's ep address, as rc needs), or 'auto' (iface when the inner\n"
     "transport supports it).",
     ucs_offsetof(uct_pxn_md_config_t, connect_model),
     UCS_CONFIG_TYPE_ENUM(uct_pxn_connect_model_names)},

    {"FALLBACK", "y",
     "An operation that cannot be published to a relay (relay unhealthy, no\n"
     "ring credit for CREDIT_TIMEOUT) is sent once with this process's own\n"
     "inner transport when it reaches the target (a rail-optimized fabric\n"
     "with a spine); otherwise it fails. 'n' skips the attempt (rail-only\n"
     "fabrics, where it can only fail).",
     ucs_offsetof(uct_pxn_md_config_t, direct_fallback), UCS_CONFIG_TYPE_BOOL},

    {"ARENA", "auto",
     "Where a relay's staging arena lives: 'cuda' (GPU memory, exported by\n"
     "CUDA IPC; needs an inner transport that registers GPU memory, e.g.\n"
     "rc with GPUDirect RDMA or cuda_ipc), 'host' (shared memory), or\n"
     "'auto' (cuda when a GPU is usable and the inner md registers it).",
     ucs_offsetof(uct_pxn_md_config_t, arena),
     UCS_CONFIG_TYPE_ENUM(uct_pxn_arena_names)},

    {"COPY", "auto",
     "How senders copy into a GPU arena: 'ce' (copy engine, one copy per\n"
     "segment), 'sm' (one gather kernel per piece for its GPU segments), or\n"
     "'auto' (per piece, whichever a cost model of segment count, sizes,\n"
     "alignment and same or peer GPU finds cheaper). Host sources always go\n"
     "by copy engine.",
     ucs_offsetof(uct_pxn_md_config_t, copy),
     UCS_CONFIG_TYPE_ENUM(uct_pxn_copy_names)},

    {"CUDA_DEVICE", "-1",
     "The GPU this process uses (choice of the home NIC, GPU arena): -1 takes\n"
     "the device of the CUDA context current when pxn starts, else of the\n"
     "first GPU memory registered with pxn or of a context current when pxn\n"
     "progresses; until then a relay that needs it waits. pxn never creates\n"
     "or changes an application's current context.",
     ucs_offsetof(uct_pxn_md_config_t, cuda_device), UCS_CONFIG_TYPE_INT},

    {"GPU_DOORBELL", "y",
     "Ring a GPU arena's doorbell from the GPU (cuStreamWriteValue64 after\n"
     "the copy, when it works). 'n': record an event and ring it from the CPU\n"
     "once the copy is done.",
     ucs_offsetof(uct_pxn_md_config_t, gpu_doorbell), UCS_CONFIG_TYPE_BOOL},

    {"GATHER_CTAS", "32",
     "Most thread blocks (of 512 threads) one gather kernel launch uses. More\n"
     "stage scattered blocks faster while the GPU is otherwise idle; kernels\n"
     "of the application that fill the GPU delay staging, not the reverse\n"
     "(docs/gpu.md). 1..1024.",
     ucs_offsetof(uct_pxn_md_config_t, gather_ctas), UCS_CONFIG_TYPE_ULONG},

    {"LANES", "7",
     "Inbound lanes of a relay: how many senders of this node can stage into\n"
     "it at once (one per other GPU of an 8-GPU node). 1..64.",
     ucs_offsetof(uct_pxn_md_config_t, lanes), UCS_CONFIG_TYPE_ULONG},

    {"SLOTS", "4",
     "Staging slots per lane (K): pieces a sender may have in flight on one\n"
     "lane. 1..4096.",
     ucs_offsetof(uct_pxn_md_config_t, slots), UCS_CONFIG_TYPE_ULONG},

    {"SLOT_SIZE", "8M",
     "Bytes per staging slot (S), the largest piece. The staging arena is\n"
     "LANES x SLOTS x SLOT_SIZE bytes at most (224 MiB by default): a lane\n"
     "has memory only while it is claimed or warm. 4K..1G, a multiple of 64.",
     ucs_offsetof(uct_pxn_md_config_t, slot_size), UCS_CONFIG_TYPE_MEMUNITS},

    {"MAX_PLAN", "4096",
     "Most segments one piece may carry. 1..65536.",
     ucs_offsetof(uct_pxn_md_config_t, max_plan), UCS_CONFIG_TYPE_ULONG},

    {"WARM_LANES", "1",
     "Free lanes whose slots a relay keeps backed (host pages reserved and\n"
     "mapped, or GPU memory allocated and exported), backing them ahead of\n"
     "any claim: a new sender's claim then needs no new memory. 0: lanes get\n"
     "memory only when claimed. 0..64.",
     ucs_offsetof(uct_pxn_md_config_t, warm_lanes), UCS_CONFIG_TYPE_ULONG},

    {"LANE_LINGER", "10s",
     "How long a relay keeps the memory of a lane that became free, beyond\n"
     "WARM_LANES, for the next claim; then it goes back (host pages punched\n"
     "out, GPU memory freed).",
     ucs_offsetof(uct_pxn_md_config_t, lane_linger), UCS_CONFIG_TYPE_TIME},

    {"INFLIGHT_DEPTH", "4",
     "Pieces a relay forwards at once over its network hop, over all lanes.\n"
     "1..64.",
     ucs_offsetof(uct_pxn_md_config_t, inflight_depth), UCS_CONFIG_TYPE_ULONG},

    {"ROUTES", "1024",
     "Routes a relay holds at once: one per target that senders of this node\n"
     "reach through it (inner eps are shared by every sender to that target;\n"
     "the ep-to-ep model takes one per sender endpoint). A request past it\n"
     "fails with 'Exceeds limit'. 1..65536.",
     ucs_offsetof(uct_pxn_md_config_t, routes), UCS_CONFIG_TYPE_ULONG},

    {"CREDIT_TIMEOUT", "1s",
     "How long an unpublished piece waits for ring credit before it falls\n"
     "back to a direct path (or fails where there is none).",
     ucs_offsetof(uct_pxn_md_config_t, credit_timeout), UCS_CONFIG_TYPE_TIME},

    {"HEARTBEAT_TIMEOUT", "3s",
     "A relay whose heartbeat is older than this is unhealthy: no new pieces\n"
     "are published to it and its published pieces fail.",
     ucs_offsetof(uct_pxn_md_config_t, heartbeat_timeout), UCS_CONFIG_TYPE_TIME},

    {"RELAY_SLICE", "0",
     "The relay splits each piece into network operations of at most this\n"
     "size. 0: split only where the inner transport requires it.",
     ucs_offsetof(uct_pxn_md_config_t, relay_slice), UCS_CONFIG_TYPE_MEMUNITS},

    {"RELAY_SLICE_MERGE", "4K",
     "A tail shorter than this is merged into the previous slice instead of\n"
     "being sent alone. Must be smaller than RELAY_SLICE.",
     ucs_offsetof(uct_pxn_md_config_t, relay_slice_merge),
     UCS_CONFIG_TYPE_MEMUNITS},

    {"INITIAL_SEQ", "0",
     "Sequence number a sender's new lane counts from (testing: a value near\n"
     "the limit, 18446744069414584319, makes lanes drain and re-establish\n"
     "themselves under a new epoch within a few pieces). After such a\n"
     "re-establishment lanes count from 0.",
     ucs_offsetof(uct_pxn_md_config_t, initial_seq), UCS_CONFIG_TYPE_ULONG},

    {NULL}
};

/* Counts: decimal digits only, nothing after them, no overflow (UCX's
 * own "%lu" would take "-1" or "12abc"); invalid text makes UCX report
 * "Invalid value for <NAME>: '<text>'". */
static int uct_pxn_config_sscanf_count(const char *buf, void *dest, const void *)
{
    if (!isdigit(static_cast<unsigned char>(buf[0]))) {
        return 0;
    }
    char *end;
    errno = 0;
    const unsigned long long value = strtoull(buf, &end, 10);
    if ((errno == ERANGE) || (*end != '\0') || (value > ULONG_MAX)) {
        return 0;
    }
    *static_cast<unsigned long*>(dest) = value;
    return 1;
}

/* A signed int, whole text, no overflow (CUDA_DEVICE). */
static int uct_pxn_config_sscanf_int(const char *buf, void *dest, const void *)
{
    char *end;
    errno = 0;
    const long value = strtol(buf, &end, 10);
    if ((end == buf) || (errno == ERANGE) || (*end != '\0') ||
        (value < INT_MIN) || (value > INT_MAX)) {
        return 0;
    }
    *static_cast<int*>(dest) = static_cast<int>(value);
    return 1;
}

/* UCX's ULONG and INT parsers with the strict readers above (the parser
 * struct differs between UCX versions: only .read is replaced). */
static const bool uct_pxn_config_strict = [] {
    for (ucs_config_field_t *f = uct_pxn_md_config_table; f->name != NULL; ++f) {
        if (f->parser.read == ucs_config_sscanf_ulong) {
            f->parser.read = uct_pxn_config_sscanf_count;
        } else if (f->parser.read == ucs_config_sscanf_int) {
            f->parser.read = uct_pxn_config_sscanf_int;
        }
    }
    return true;
}();

void uct_pxn_error_once(const std::string &text)
{
    pxn::uct::error_once(text);
}

void uct_pxn_warn_once(const std::string &text)
{
    pxn::uct::warn_once(text);
}

ucs_status_t uct_pxn_md_settings(const uct_pxn_md_config_t *config,
                                 pxn::Settings *settings, std::string *error)
{
    /* Counts of pxn::Settings are 32 bits: wider values are refused with
     * the value given, before they could wrap. */
    const struct {
        const char    *name;
        unsigned long  value;
        uint32_t      *dest;
    } counts[] = {
        {"GATHER_CTAS", config->gather_ctas, &settings->gather_ctas},
        {"LANES", config->lanes, &settings->geometry.lanes},
        {"SLOTS", config->slots, &settings->geometry.slots},
        {"MAX_PLAN", config->max_plan, &settings->geometry.max_plan},
        {"WARM_LANES", config->warm_lanes, &settings->warm_lanes},
        {"INFLIGHT_DEPTH", config->inflight_depth, &settings->inflight_depth},
        {"ROUTES", config->routes, &settings->routes}};
    pxn::Settings &s = *settings;
    for (const auto &c : counts) {
        if (c.value > UINT32_MAX) {
            *error = std::string("UCX_PXN_") + c.name + "=" +
                     std::to_string(c.value) + ": far out of range";
            return UCS_ERR_INVALID_PARAM;
        }
        *c.dest = static_cast<uint32_t>(c.value);
    }
    s.enable       = static_cast<pxn::EnableChoice>(config->enable);
    s.registry_dir = config->registry_dir;
    s.group        = config->group;
    s.node_id      = config->node_id;
    s.rail_map     = config->rail_map;
    s.home_device  = config->home_device;
    s.connect_model   = static_cast<pxn::ConnectModel>(config->connect_model);
    s.direct_fallback = (config->direct_fallback != 0);
    s.arena           = static_cast<pxn::ArenaChoice>(config->arena);
    s.copy            = static_cast<pxn::CopyChoice>(config->copy);
    s.cuda_device     = config->cuda_device;
    s.gpu_doorbell    = (config->gpu_doorbell != 0);
    s.net_tls.clear();
    for (unsigned i = 0; i < config->net_tls.count; ++i) {
        s.net_tls.emplace_back(config->net_tls.names[i]);
    }
    s.geometry.slot_size = config->slot_size;
    s.credit_timeout     = config->credit_timeout;
    s.heartbeat_timeout  = config->heartbeat_timeout;
    s.lane_linger        = config->lane_linger;
    s.initial_seq        = config->initial_seq;
    s.relay_slice        = config->relay_slice;
    s.relay_slice_merge  = config->relay_slice_merge;
    return pxn::validate(s, error);
}

static void uct_pxn_md_close(uct_md_h tl_md) noexcept
{
    uct_pxn_md_t *md = ucs_derived_of(tl_md, uct_pxn_md_t);

    if (md->reg != md->inner) {
        delete md->reg;
    }
    delete md->inner;
    delete md->settings;
    ucs_free(md);
}

static ucs_status_t uct_pxn_md_mem_free(uct_md_h, uct_mem_h) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static ucs_status_t uct_pxn_md_mem_advise(uct_md_h, uct_mem_h, void *, size_t,
                                          unsigned) noexcept
{
    return UCS_ERR_UNSUPPORTED;
}

static char uct_pxn_memh_no_inner;
const uct_mem_h kPxnMemhNoInner = &uct_pxn_memh_no_inner;

bool uct_pxn_md_inner_registers(uct_md_h tl_md)
{
    return ucs_derived_of(tl_md, uct_pxn_md_t)->reg->attr().cap.flags &
           UCT_MD_FLAG_REG;
}

void uct_pxn_md_notice_registration(const void *address)
{
    /* GPU memory tells which GPU this process uses (a relay may wait for
     * it). */
    pxn::uct::Node::notice_process_gpu(address);
}

static ucs_status_t
uct_pxn_md_mem_dereg(uct_md_h tl_md, const uct_md_mem_dereg_params_t *params) noexcept
{
    uct_pxn_md_t *md = ucs_derived_of(tl_md, uct_pxn_md_t);

    /* The memh is the inner md's: its dereg (invalidation included, where
     * the inner md supports it) is ours. */
    if (params->memh == kPxnMemhNoInner) {
        /* Nothing registered, nothing to revoke: invalidation is what the
         * inner md makes of it without a registration (pxn_compat.cc). */
        if ((params->field_mask & UCT_MD_MEM_DEREG_FIELD_FLAGS) &&
            (params->flags & UCT_MD_MEM_DEREG_FLAG_INVALIDATE) &&
            (params->field_mask & UCT_MD_MEM_DEREG_FIELD_COMPLETION) &&
            (params->comp != nullptr)) {
            uct_invoke_completion(params->comp, UCS_OK);
        }
        return UCS_OK;
    }
    uct_md_h inner = md->reg->md();
    return inner->ops->mem_dereg(inner, params);
}

/* UCP 1.13 labels GPU pointers HOST on some paths: pxn finds out itself. */
static ucs_status_t uct_pxn_md_detect_memory_type(uct_md_h, const void *address,
                                                  size_t,
                                                  ucs_memory_type_t *mem_type) noexcept
{
    return pxn::uct::detect_memory_type(address, mem_type);
}

static uct_md_ops_t *uct_pxn_md_ops()
{
    static uct_md_ops_t ops = [] {
        uct_md_ops_t o;
        memset(&o, 0, sizeof(o));
        o.close              = uct_pxn_md_close;
        o.mem_free           = uct_pxn_md_mem_free;
        o.mem_advise         = uct_pxn_md_mem_advise;
        o.mem_dereg          = uct_pxn_md_mem_dereg;
        o.detect_memory_type = uct_pxn_md_detect_memory_type;
        uct_pxn_compat_md_ops(&o);
        return o;
    }();
    return &ops;
}

static std::string uct_pxn_config_environment();
/* Everything pxn needs from the registry's directory, checked before UCP
 * counts on pxn (a failing md open only leaves pxn out; a failing iface
 * open would fail UCP's worker): a geometry that fits its file system,
 * room for one relay, and a directory that is ours (Registry::open refuses
 * a squatted or foreign one). */
static ucs_status_t uct_pxn_md_check_room(pxn::Settings *settings,
                                          const pxn::uct::InnerMd &reg)
{
    const bool cuda_md = reg.attr().cap.reg_mem_types &
                         UCS_BIT(UCS_MEMORY_TYPE_CUDA);
    if ((settings->arena == pxn::ArenaChoice::kCuda) &&
        (!pxn::uct::cuda_available() || !cuda_md)) {
        uct_pxn_error_once(std::string("pxn: UCX_PXN_ARENA=cuda but ") +
                           (!pxn::uct::cuda_available() ?
                            "no GPU is usable here" :
                            "inner md " + reg.info().md_name +
                            " cannot register GPU memory") +
                           ": pxn offers nothing");
        return UCS_ERR_UNSUPPORTED;
    }
    const bool host    = !pxn::uct::RelayService::wants_gpu_arena(*settings,
                                                                  cuda_md);
    const std::string &dir = settings->registry_dir;
    struct statvfs fs;
    if (statvfs(dir.c_str(), &fs) != 0) {
        uct_pxn_error_once("pxn: UCX_PXN_REGISTRY_DIR=" + dir + ": " +
                           strerror(errno) + ": pxn offers nothing");
        return UCS_ERR_NO_DEVICE;
    }
    const uint64_t total = uint64_t(fs.f_blocks) * fs.f_frsize;
    const uint64_t avail = uint64_t(fs.f_bavail) * fs.f_frsize;
    bool changed;
    if (!pxn::fit_geometry(settings, total, host, &changed)) {
        uct_pxn_error_once(pxn::strformat("pxn: %s holds %lu MiB in all: a relay of "
                                          "this geometry (%lu MiB) does not fit in a "
                                          "quarter of it; pxn offers nothing "
                                          "(UCX_PXN_REGISTRY_DIR, UCX_PXN_SLOTS, "
                                          "UCX_PXN_SLOT_SIZE)", dir.c_str(),
                                          total >> 20,
                                          pxn::relay_footprint(settings->geometry,
                                                               host) >> 20));
        return UCS_ERR_NO_MEMORY;
    }
    const pxn::Geometry &g = settings->geometry;
    if (changed) {
        uct_pxn_warn_once(pxn::strformat("pxn: %s holds only %lu MiB: staging "
                                         "geometry reduced to UCX_PXN_SLOTS=%u "
                                         "UCX_PXN_SLOT_SIZE=%lu (%lu MiB a relay); "
                                         "set them to choose", dir.c_str(),
                                         total >> 20, g.slots, g.slot_size,
                                         pxn::relay_footprint(g, host) >> 20));
    }
    /* room now for a relay's control file and one lane's slots */
    const uint64_t need = pxn::relay_footprint(g, false) +
                          (host ? uint64_t(g.slots) * g.slot_size : 0);
    if (avail < need) {
        uct_pxn_error_once(pxn::strformat("pxn: %s has %lu MiB free, a relay needs "
                                          "%lu MiB (its control file and a lane's "
                                          "slots); pxn offers nothing "
                                          "(UCX_PXN_REGISTRY_DIR)", dir.c_str(),
                                          avail >> 20, (need + (1 << 20) - 1) >> 20));
        return UCS_ERR_NO_MEMORY;
    }
    std::unique_ptr<pxn::Registry> registry;
    return pxn::Registry::open(*settings, &registry);
}

static ucs_status_t uct_pxn_md_open_impl(uct_component_t *component,
                                         const char *md_name,
                                         const uct_pxn_md_config_t *config,
                                         uct_md_h *md_p)
{
    std::string error;
    auto settings = std::make_unique<pxn::Settings>();
    ucs_status_t status = uct_pxn_md_settings(config, settings.get(), &error);
    if (status != UCS_OK) {
        uct_pxn_error_once("pxn: invalid configuration: " + error);
        return status;
    }
    if (!pxn::pxn_requested(*settings, getenv("UCX_TLS"))) {
        uct_pxn_error_once("pxn: not enabled in this process: UCX_TLS does not "
                           "name pxn and UCX_PXN_ENABLE is not 'y'");
        return UCS_ERR_UNSUPPORTED;
    }

    auto inner = std::make_unique<pxn::uct::InnerMd>();
    status     = pxn::uct::InnerMd::open(md_name, settings->net_tls, inner.get());
    if (status != UCS_OK) {
        return status;
    }
    /* The home device in another inner md: its md registers. */
    std::unique_ptr<pxn::uct::InnerMd> home;
    if (!settings->home_device.empty() &&
        (inner->device(settings->home_device) == nullptr)) {
        status = pxn::uct::InnerMd::open_for_device(settings->home_device,
                                                    settings->net_tls, &home);
        if (status != UCS_OK) {
            uct_pxn_error_once("pxn: UCX_PXN_HOME_DEVICE=" + settings->home_device +
                               " is not a device of any inner md of "
                               "UCX_PXN_NET_TLS: pxn offers nothing");
            return status;
        }
    }

    /* once per configuration: a second md or context of the process
     * neither checks nor logs again */
    {
        static std::mutex   lock;
        static std::string  checked_env;
        static ucs_status_t checked = UCS_ERR_LAST;
        static pxn::Geometry fitted;
        const std::string env = uct_pxn_config_environment() + md_name;
        std::lock_guard<std::mutex> guard(lock);
        if ((checked == UCS_ERR_LAST) || (env != checked_env)) {
            checked     = uct_pxn_md_check_room(settings.get(),
                                                (home != nullptr) ? *home : *inner);
            checked_env = env;
            fitted      = settings->geometry;
        }
        if (checked != UCS_OK) {
            return checked;
        }
        settings->geometry = fitted;
    }

    auto *md = static_cast<uct_pxn_md_t*>(ucs_malloc(sizeof(uct_pxn_md_t),
                                                     "uct_pxn_md_t"));
    if (md == nullptr) {
        ucs_error("pxn: failed to allocate md");
        return UCS_ERR_NO_MEMORY;
    }

    md->super.ops       = uct_pxn_md_ops();
    md->super.component = component;
    md->settings        = settings.release();
    md->inner           = inner.release();
    md->reg             = (home != nullptr) ? home.release() : md->inner;
    *md_p               = &md->super;
    return UCS_OK;
}

ucs_status_t uct_pxn_md_open(uct_component_t *component, const char *md_name,
                             const uct_md_config_t *config,
                             uct_md_h *md_p) noexcept
{
    try {
        return uct_pxn_md_open_impl(component, md_name,
                                    ucs_derived_of(config, uct_pxn_md_config_t),
                                    md_p);
    } catch (const std::bad_alloc &) {
        ucs_error("pxn: out of memory opening the md");
        return UCS_ERR_NO_MEMORY;
    }
}

/* The environment pxn's configuration comes from: a second context of the
 * process with the same one reads nothing again (and logs nothing again,
 * UCX's own "Invalid value" lines included). */
static std::string uct_pxn_config_environment()
{
    std::vector<std::string> vars;
    for (char **v = environ; *v != nullptr; ++v) {
        if ((strncmp(*v, "UCX_PXN_", 8) == 0) || (strncmp(*v, "UCX_TLS=", 8) == 0)) {
            vars.emplace_back(*v);
        }
    }
    std::sort(vars.begin(), vars.end());
    std::string all;
    for (const auto &v : vars) {
        all += v + '\n';
    }
    return all;
}

ucs_status_t uct_pxn_read_settings(uct_component_t *component,
                                   pxn::Settings *settings)
{
    static std::mutex    lock;
    static std::string   read_env;
    static bool          read_once = false;
    static ucs_status_t  read_status;
    static pxn::Settings read_settings;
    const std::string env = uct_pxn_config_environment();
    std::lock_guard<std::mutex> guard(lock);
    if (read_once && (env == read_env)) {
        *settings = read_settings;
        return read_status;
    }

    uct_md_config_t *config;
    ucs_status_t status = uct_md_config_read(component, NULL, NULL, &config);
    if (status == UCS_OK) {
        std::string error;
        status = uct_pxn_md_settings(ucs_derived_of(config, uct_pxn_md_config_t),
                                     settings, &error);
        uct_config_release(config);
        if (status != UCS_OK) {
            uct_pxn_error_once("pxn: invalid configuration: " + error);
        }
    }
    read_once     = true;
    read_env      = env;
    read_status   = status;
    read_settings = *settings;
    return status;
}

ucs_status_t uct_pxn_query_md_resources(uct_component_t *component,
                                        uct_md_resource_desc_t **resources_p,
                                        unsigned *num_resources_p) noexcept
{
    *resources_p     = nullptr;
    *num_resources_p = 0;
    try {
        pxn::Settings settings;
        if (uct_pxn_read_settings(component, &settings) != UCS_OK) {
            /* pxn stays out of the way; the error above says why. */
            return UCS_OK;
        }
        if (!pxn::pxn_requested(settings, getenv("UCX_TLS"))) {
            ucs_debug("pxn: not enabled (UCX_TLS does not name pxn, "
                      "UCX_PXN_ENABLE is not 'y')");
            return UCS_OK;
        }
        const auto mds = pxn::uct::list_inner_mds(settings.net_tls);
        if (mds.empty()) {
            std::string tls;
            for (const auto &tl : settings.net_tls) {
                tls += (tls.empty() ? "" : ",") + tl;
            }
            uct_pxn_warn_once("pxn: none of UCX_PXN_NET_TLS=" + tls +
                               " is usable here: pxn offers no memory domain");
            return UCS_OK;
        }
        auto *resources = static_cast<uct_md_resource_desc_t*>(
                ucs_calloc(mds.size(), sizeof(uct_md_resource_desc_t),
                           "pxn md resources"));
        if (resources == nullptr) {
            return UCS_ERR_NO_MEMORY;
        }
        for (size_t i = 0; i < mds.size(); ++i) {
            ucs_strncpy_zero(resources[i].md_name,
                             pxn::uct::pxn_md_name(mds[i].md_name).c_str(),
                             sizeof(resources[i].md_name));
        }
        *resources_p     = resources;
        *num_resources_p = mds.size();
        return UCS_OK;
    } catch (const std::bad_alloc &) {
        return UCS_ERR_NO_MEMORY;
    }
}

ucs_status_t uct_pxn_rkey_unpack(uct_component_t *, const void *rkey_buffer,
                                 uct_rkey_t *rkey_p, void **handle_p) noexcept
{
    auto *in            = static_cast<const uint8_t*>(rkey_buffer);
    const size_t length = in[0] | (size_t(in[1]) << 8);
    auto *rkey          = static_cast<uct_pxn_rkey_t*>(
            ucs_malloc(sizeof(uct_pxn_rkey_t) + length, "pxn rkey"));
    if (rkey == nullptr) {
        return UCS_ERR_NO_MEMORY;
    }
    rkey->cache_lane  = nullptr;
    rkey->cache_gen   = 0;
    rkey->cache_index = 0;
    rkey->length      = static_cast<uint16_t>(length);
    memcpy(rkey->packed, in + kPxnRkeyHeader, length);
    *rkey_p   = reinterpret_cast<uct_rkey_t>(rkey);
    *handle_p = nullptr;
    return UCS_OK;
}

int uct_pxn_rkey_order(uct_rkey_t rkey1, uct_rkey_t rkey2)
{
    auto *a = reinterpret_cast<const uct_pxn_rkey_t*>(rkey1);
    auto *b = reinterpret_cast<const uct_pxn_rkey_t*>(rkey2);
    if (a->length != b->length) {
        return (a->length < b->length) ? -1 : 1;
    }
    return memcmp(a->packed, b->packed, a->length);
}

ucs_status_t uct_pxn_rkey_release(uct_component_t *, uct_rkey_t rkey,
                                  void *) noexcept
{
    ucs_free(reinterpret_cast<void*>(rkey));
    return UCS_OK;
}
