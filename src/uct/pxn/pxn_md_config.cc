/*
 * pxn's configuration: the UCX_PXN_* table (defaults and help as
 * `ucx_info -cf` shows them, docs/configuration.md), its strict readers of
 * counts, and what becomes of it: pxn::Settings, read once per
 * environment.
 */
#include "pxn_md.h"

#include "pxn_log.h"

extern "C" {
#include <ucs/debug/log.h>
#include <ucs/sys/string.h> /* UCS_MEMUNITS_* */
}

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

static const char *uct_pxn_enable_names[]        = {"auto", "y", "n", NULL};
static const char *uct_pxn_connect_model_names[] = {"auto", "iface", "ep", "wired", NULL};
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
     "through pxn's ep address, as rc needs), 'wired' (pxn connects to\n"
     "interfaces and carries active messages; each relay wires its own\n"
     "ep-to-ep inner connection to a target over a to-iface transport of the\n"
     "same device: dc or ud beside rc, tcp beside tcp), or 'auto' (iface when\n"
     "the inner transport supports it, else wired where such a transport\n"
     "opens, else ep).",
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

    {"PIECE_OPS", "64",
     "Segments after which a sender's open piece goes out while its ring has\n"
     "a slot for the next piece, instead of filling on until the slot is\n"
     "full, the relay is idle or 50 us pass: the relay then works while the\n"
     "application posts (gets and zero-copy puts complete only through it).\n"
     "0: no such limit. 0..65536.",
     ucs_offsetof(uct_pxn_md_config_t, piece_ops), UCS_CONFIG_TYPE_ULONG},

    {"PIECE_BYTES", "auto",
     "Bytes at which a sender's piece is full and goes out (a larger\n"
     "operation goes on in the next): the relay forwards the first part of\n"
     "an operation while the sender copies the rest, instead of the two\n"
     "taking turns slot by slot. The ring's last slot fills up to SLOT_SIZE\n"
     "unless the operation staged has at least this much left. auto: 256K\n"
     "where the relay's arena is host memory, 0 with a GPU arena. 0 or inf:\n"
     "pieces fill up to SLOT_SIZE. 4K..1G.",
     ucs_offsetof(uct_pxn_md_config_t, piece_bytes), UCS_CONFIG_TYPE_MEMUNITS},

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

    {"RELAY_SGL", "y",
     "The relay forwards the slices of a piece (up to 64) with one\n"
     "scatter-gather operation where the inner transport has one\n"
     "(put_sgl_zcopy, get_sgl_zcopy: UCX master's cuda_ipc). n: one inner\n"
     "operation per slice.",
     ucs_offsetof(uct_pxn_md_config_t, relay_sgl), UCS_CONFIG_TYPE_BOOL},

    {"INITIAL_SEQ", "0",
     "Sequence number a sender's new lane counts from (testing: a value near\n"
     "the limit, 18446744069414584319, makes lanes drain and re-establish\n"
     "themselves under a new epoch within a few pieces). After such a\n"
     "re-establishment lanes count from 0.",
     ucs_offsetof(uct_pxn_md_config_t, initial_seq), UCS_CONFIG_TYPE_ULONG},

    {"ENGINE_SPIN", "50us",
     "After its last piece of work the engine thread (relays, inner progress)\n"
     "keeps looking for more this long without pause, then blocks until a\n"
     "sender's doorbell or an inner event wakes it; not on a CPU that others\n"
     "want (it waited 200us for one: no spin for a second). It never yields\n"
     "its core while runnable (docs/relay-engine.md). 0..10ms.",
     ucs_offsetof(uct_pxn_md_config_t, engine_spin), UCS_CONFIG_TYPE_TIME},

    {"ENGINE_POLL", "20us",
     "While work is expected that no event announces (completions of an inner\n"
     "transport without an event fd, a doorbell a GPU stream will ring), the\n"
     "engine thread sleeps this long between rounds, leaving the core to\n"
     "others. 1us..10ms.",
     ucs_offsetof(uct_pxn_md_config_t, engine_poll), UCS_CONFIG_TYPE_TIME},

    {"AM_POLL", "y",
     "The application's progress of an iface that receives active messages\n"
     "through relays (once a relay announced a flow to it) also polls the\n"
     "inner transport for them, when the engine thread is not polling it at\n"
     "that moment: a message then waits for no\n"
     "engine thread to be scheduled (one that shares a core with a busy-polling\n"
     "rank waits for it). 'n': only the engine thread receives them, and the\n"
     "application's progress makes no system call for them.",
     ucs_offsetof(uct_pxn_md_config_t, am_poll), UCS_CONFIG_TYPE_BOOL},

    {"ENGINE_CPUS", "auto",
     "CPUs the engine thread runs on: 'auto' (those of the process's CPUs that\n"
     "are local to its GPU, as NCCL places its proxy thread; all of them\n"
     "when the GPU is not known), 'inherit' (the process's CPUs), or a list\n"
     "such as 0-3,8 (of which those the process may use).",
     ucs_offsetof(uct_pxn_md_config_t, engine_cpus), UCS_CONFIG_TYPE_STRING},

    {"ENGINE_NICE", "inherit",
     "Nice value of the engine thread: 'inherit' (the process's), or -20..19.\n"
     "Below the process's own it needs CAP_SYS_NICE or RLIMIT_NICE; refused,\n"
     "the thread keeps the process's and one warning says so.",
     ucs_offsetof(uct_pxn_md_config_t, engine_nice), UCS_CONFIG_TYPE_STRING},

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
        {"PIECE_OPS", config->piece_ops, &settings->piece_ops},
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
    static_assert((pxn::kPieceBytesAuto == UCS_MEMUNITS_AUTO) &&
                  (pxn::kPieceBytesInf == UCS_MEMUNITS_INF), "memory units");
    s.piece_bytes        = config->piece_bytes;
    s.relay_slice_merge  = config->relay_slice_merge;
    s.relay_sgl          = (config->relay_sgl != 0);
    s.am_poll            = (config->am_poll != 0);
    s.engine_spin        = config->engine_spin;
    s.engine_poll        = config->engine_poll;
    s.engine_cpus        = config->engine_cpus;
    s.engine_nice        = config->engine_nice;
    return pxn::validate(s, error);
}

/* The environment pxn's configuration comes from: a second context of the
 * process with the same one reads nothing again (and logs nothing again,
 * UCX's own "Invalid value" lines included). */
std::string uct_pxn_config_environment()
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

