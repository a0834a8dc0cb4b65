#include "pxn_node.h"

#include "pxn_cuda.h"
#include "pxn_engine_place.h"
#include "pxn_log.h"

#include <ucs/debug/log_def.h>
#include <ucs/pxn/rail_map.h>
#include <ucs/pxn/topology.h>

#include <algorithm>
#include <pthread.h>

namespace pxn {
namespace uct {

namespace {

std::mutex                                   g_nodes_mutex;
std::map<std::string, std::weak_ptr<Node>>   g_nodes; /* by group */

/* A child forked while another thread held g_nodes_mutex must find it
 * free. */
void guard_nodes_across_fork()
{
    static std::once_flag installed;
    std::call_once(installed, [] {
        pthread_atfork([] { g_nodes_mutex.lock(); },
                       [] { g_nodes_mutex.unlock(); },
                       [] { g_nodes_mutex.unlock(); });
    });
}

std::string rail_of(const Settings &settings, const std::string &device)
{
    RailMap map;
    std::string error;
    RailMap::parse(settings.rail_map, &map, &error); /* validated by the md */
    return map.rail_of(device);
}

} // namespace

ucs_status_t Node::acquire(const Settings &settings, std::shared_ptr<Node> *node_p)
{
    guard_nodes_across_fork();
    std::lock_guard<std::mutex> guard(g_nodes_mutex);
    std::weak_ptr<Node> &slot = g_nodes[settings.group];
    if (((*node_p = slot.lock()) != nullptr) && !(*node_p)->inherited()) {
        return UCS_OK;
    }
    node_p->reset(); /* a parent's copy stays with its owners */
    std::shared_ptr<Node> node(new Node(settings));
    ucs_status_t status = node->start();
    if (status != UCS_OK) {
        return status;
    }
    slot    = node;
    *node_p = std::move(node);
    return UCS_OK;
}

ucs_status_t Node::start()
{
    ucs_status_t status = Registry::open(settings_, &registry_);
    if (status != UCS_OK) {
        return status;
    }
    node_hash_ = name_hash(registry_->node_id());
    for (const InnerMdInfo &md : list_inner_mds(settings_.net_tls)) {
        for (const InnerDevice &dev : md.devices) {
            candidates_.push_back(dev.name);
        }
    }
    const int gpu = (settings_.cuda_device >= 0) ? settings_.cuda_device :
                                                   current_gpu();
    gpu_.store(gpu, std::memory_order_release);
    Engine::Options options;
    /* A process confined to one CPU (a rank bound to its core) shares it
     * with the engine, which inherits it: a spin would only hold that CPU
     * from the application's own threads. */
    options.spin_ns = (thread_cpus().size() == 1) ? 0 :
                      uint64_t(settings_.engine_spin * 1e9);
    options.poll_ns = uint64_t(settings_.engine_poll * 1e9);
    return engine_.start(this, options);
}

Node::~Node()
{
    if (inherited()) {
        abandon();
        return;
    }
    engine_.stop();
    std::vector<std::unique_ptr<RelayService>> relays;
    {
        std::lock_guard<std::mutex> guard(mutex_);
        relays.swap(relays_);
    }
    relays.clear(); /* drains and closes each; their ports go with them */
    mds_.clear();
}

void Node::abandon()
{
    engine_.abandon();
    for (auto &relay : relays_) {
        (void)relay.release(); /* its registry entry, arena and port */
    }
    for (auto &md : mds_) {
        (void)md.release();
    }
    (void)registry_.release();
}

HomeChoice Node::choose(const std::string &device) const
{
    HomeQuery q;
    q.explicit_device = settings_.home_device;
    q.candidates      = candidates_;
    q.iface_device    = device;
    q.gpu_possible    = cuda_available();
    if (gpu() >= 0) {
        q.gpu_bus_id = gpu_bus_id(gpu());
    }
    return choose_home(q);
}

ucs_status_t Node::port_for(const InnerMd &md, const std::string &device,
                            std::shared_ptr<Net> *port)
{
    const InnerDevice *dev = md.device(device);
    if (dev == nullptr) {
        ucs_error("pxn: %s is not a device of inner md %s", device.c_str(),
                  md.info().md_name.c_str());
        return UCS_ERR_NO_DEVICE;
    }
    const std::string key = dev->tl_name + "/" + device;
    if ((*port = port_refs_[key].lock()) != nullptr) {
        return UCS_OK;
    }
    std::unique_ptr<Net> net;
    std::string error;
    ucs_status_t status = UctNet::open(md, dev->tl_name, device,
                                       settings_.connect_model, &net, &error);
    if (status != UCS_OK) {
        if (!error.empty()) {
            error_once(error);
        }
        return status;
    }
    if ((settings_.connect_model == ConnectModel::kIface) &&
        (net->mode() != Net::ConnectMode::kIface)) {
        error_once(strformat("pxn: UCX_PXN_NET_CONNECT=iface but inner %s cannot "
                             "connect to an iface", dev->tl_name.c_str()));
        return UCS_ERR_UNSUPPORTED;
    }
    std::shared_ptr<AmPort> am;
    if (net->am_payload_max(settings_.geometry.slot_size) > 0) {
        am = std::make_shared<AmPort>(net.get());
        AmPort *receiver = am.get();
        net->set_am_receiver([receiver](const void *data, size_t length) {
            receiver->receive(data, length);
        });
    }
    ports_.push_back({dev->tl_name, device, net.get(), net->device_address(),
                      net->iface_address(), am.get(), 0});
    std::weak_ptr<Node> self = weak_from_this();
    port->reset(net.release(), [self, am](Net *n) mutable {
        if (auto node = self.lock()) {
            node->drop_port(n);
        }
        {
            std::lock_guard<std::mutex> guard(n->lock());
            n->set_am_receiver(nullptr);
            am.reset(); /* its inner eps go before the Net */
        }
        delete n;
    });
    port_refs_[key] = *port;
    return UCS_OK;
}

void Node::drop_port(Net *net)
{
    std::lock_guard<std::mutex> guard(mutex_);
    for (Port &p : ports_) {
        if (p.net == net) {
            fold_refused(p); /* its AmPort ends after this */
        }
    }
    ports_.erase(std::remove_if(ports_.begin(), ports_.end(),
                                [&](const Port &p) { return p.net == net; }),
                 ports_.end());
}

ucs_status_t Node::attach_inbox(Net *port, AmInbox *inbox, uint32_t *cookie,
                                AmPort **am)
{
    std::lock_guard<std::mutex> guard(mutex_);
    for (const Port &p : ports_) {
        if ((p.net == port) && (p.am != nullptr)) {
            *cookie = p.am->attach(inbox);
            *am     = p.am;
            return UCS_OK;
        }
    }
    return UCS_ERR_UNSUPPORTED;
}

void Node::detach_inbox(Net *port, uint32_t cookie)
{
    std::lock_guard<std::mutex> guard(mutex_);
    for (const Port &p : ports_) {
        if ((p.net == port) && (p.am != nullptr)) {
            p.am->detach(cookie);
        }
    }
    engine_.wake(); /* it tells the relays (AmPort::pump) */
}

/* Caller holds mutex_. An inner md that has `device`, or nullptr. */
const InnerMd *Node::md_of(const std::string &device)
{
    for (const auto &md : mds_) {
        if (md->device(device) != nullptr) {
            return md.get();
        }
    }
    std::unique_ptr<InnerMd> md;
    if (InnerMd::open_for_device(device, settings_.net_tls, &md) != UCS_OK) {
        return nullptr;
    }
    mds_.push_back(std::move(md));
    return mds_.back().get();
}

ucs_status_t Node::attach(const InnerMd &md, const std::string &device,
                          std::shared_ptr<Net> *port, std::string *home_rail,
                          bool *is_home)
{
    Retired retired; /* declared first: dropped after the unlock */
    std::lock_guard<std::mutex> guard(mutex_);
    const HomeChoice choice = choose(device);
    ucs_status_t status;
    if (!settings_.home_device.empty()) {
        /* UCX_PXN_HOME_DEVICE: every iface of the process is its presence
         * on that device, whatever device UCX opened it on. */
        const InnerMd *home = (md.device(choice.device) != nullptr) ? &md :
                              md_of(choice.device);
        if (home == nullptr) {
            error_once(strformat("pxn: UCX_PXN_HOME_DEVICE=%s is not a device of "
                                 "any inner md of UCX_PXN_NET_TLS",
                                 choice.device.c_str()));
            return UCS_ERR_NO_DEVICE;
        }
        status   = port_for(*home, choice.device, port);
        *is_home = true;
    } else {
        status   = port_for(md, device, port);
        *is_home = choice.deferred || (choice.device == device);
    }
    if (status != UCS_OK) {
        return status;
    }
    if (choice.deferred) {
        ucs_debug("pxn: home of %s: %s", device.c_str(), choice.reason.c_str());
        deferred_.push_back(device);
        home_rail->clear();
        *is_home = true;
        return UCS_OK;
    }
    const std::string rail = rail_of(settings_, choice.device);
    ucs_debug("pxn: home of %s is %s (rail %s): %s", device.c_str(),
              choice.device.c_str(), rail.c_str(), choice.reason.c_str());
    homes_[device] = rail;
    *home_rail     = rail;
    status = start_relay(choice.device,
                         (md.device(choice.device) != nullptr) ? &md : nullptr,
                         &retired);
    if (status == UCS_INPROGRESS) {
        deferred_.push_back(device);
    }
    return UCS_OK; /* without a relay the iface still sends */
}

std::string Node::home_rail(const std::string &device)
{
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = homes_.find(device);
    return (it == homes_.end()) ? std::string() : it->second;
}

ucs_status_t Node::start_relay(const std::string &device, const InnerMd *md,
                               Retired *retired)
{
    const std::string rail = rail_of(settings_, device);
    if (std::any_of(relays_.begin(), relays_.end(),
                    [&](const auto &r) { return r->rail() == rail; }) ||
        (std::find(failed_rails_.begin(), failed_rails_.end(), rail) !=
         failed_rails_.end())) {
        return UCS_OK;
    }
    if (md == nullptr) {
        md = md_of(device);
    }
    ucs_status_t status = UCS_ERR_NO_DEVICE;
    if (md == nullptr) {
        ucs_error("pxn: home device %s is not a device of any inner md (%s)",
                  device.c_str(), "UCX_PXN_HOME_DEVICE, UCX_PXN_NET_TLS");
    } else {
        const bool cuda_md = md->attr().cap.reg_mem_types &
                             UCS_BIT(UCS_MEMORY_TYPE_CUDA);
        if (RelayService::wants_gpu_arena(settings_, cuda_md) && (gpu() < 0) &&
            cuda_available()) {
            ucs_debug("pxn: the relay of rail %s waits for the process's GPU "
                      "(GPU arena)", rail.c_str());
            return UCS_INPROGRESS;
        }
        std::shared_ptr<Net> net;
        status = port_for(*md, device, &net);
        if (status == UCS_OK) {
            RelayService::Params params;
            params.registry          = registry_.get();
            params.net               = net;
            params.md_registers_cuda = cuda_md;
            /* an md that registers nothing reaches host memory without */
            params.md_reaches_host   =
                    !(md->attr().cap.flags & UCT_MD_FLAG_REG) ||
                    (md->attr().cap.reg_mem_types & UCS_BIT(UCS_MEMORY_TYPE_HOST));
            params.rail              = rail;
            params.device            = device;
            params.gpu               = gpu();
            params.is_local          = [this](const Bytes &dev, const Bytes &iface) {
                return is_local(dev, iface);
            };
            GpuScope scope(params.gpu);
            std::unique_ptr<RelayService> relay;
            status = RelayService::open(params, settings_, &relay);
            if (status == UCS_OK) {
                relays_.push_back(std::move(relay));
                return UCS_OK;
            }
            retired->push_back(std::move(net)); /* maybe its last holder */
        }
    }
    failed_rails_.push_back(rail);
    warn_once(strformat("pxn: this process relays for nobody (%s: %s; the "
                        "line above says why); it sends through others",
                        device.c_str(), ucs_status_string(status)));
    return status;
}

void Node::notice_gpu(int gpu)
{
    int unknown = -1;
    if ((gpu < 0) || !gpu_.compare_exchange_strong(unknown, gpu)) {
        return;
    }
    ucs_debug("pxn: this process uses GPU %d", gpu);
    deferred_ready_.store(true, std::memory_order_release);
    engine_.wake();
}

void Node::notice_process_gpu(const void *ptr)
{
    std::vector<std::shared_ptr<Node>> waiting;
    {
        std::lock_guard<std::mutex> guard(g_nodes_mutex);
        for (auto &entry : g_nodes) {
            std::shared_ptr<Node> node = entry.second.lock();
            if ((node != nullptr) && (node->gpu() < 0) && !node->inherited()) {
                waiting.push_back(std::move(node));
            }
        }
    }
    if (waiting.empty()) {
        return; /* no driver call when no node waits */
    }
    const int gpu = gpu_of(ptr);
    for (const auto &node : waiting) {
        node->notice_gpu(gpu);
    }
}

/* Engine thread, mutex_ held: the relays that waited for the GPU. */
void Node::start_deferred(Retired *retired)
{
    deferred_ready_.store(false, std::memory_order_relaxed);
    if ((engine_gpu_ != gpu()) && (use_gpu(gpu()) == UCS_OK)) {
        engine_gpu_ = gpu();
        place_engine_thread(settings_, engine_gpu_, engine_cpus_);
    }
    std::vector<std::string> devices;
    devices.swap(deferred_);
    for (const std::string &device : devices) {
        const HomeChoice choice = choose(device);
        if (choice.deferred) {
            deferred_.push_back(device); /* the GPU is known: cannot happen */
            continue;
        }
        const std::string rail = rail_of(settings_, choice.device);
        ucs_debug("pxn: home of %s is %s (rail %s): %s", device.c_str(),
                  choice.device.c_str(), rail.c_str(), choice.reason.c_str());
        homes_[device] = rail;
        if (start_relay(choice.device, nullptr, retired) == UCS_INPROGRESS) {
            deferred_.push_back(device);
        }
    }
}

bool Node::is_local(const Bytes &dev, const Bytes &iface) const
{
    return std::any_of(ports_.begin(), ports_.end(), [&](const Port &p) {
        return (p.dev_addr == dev) && (iface.empty() || (p.iface_addr == iface));
    });
}

ucs_status_t Node::sender_for(const void *worker, std::shared_ptr<Sender> *sender_p)
{
    std::lock_guard<std::mutex> guard(mutex_);
    std::weak_ptr<Sender> &slot = senders_[worker];
    if ((*sender_p = slot.lock()) != nullptr) {
        return UCS_OK;
    }
    std::unique_ptr<Sender> sender;
    ucs_status_t status = Sender::create(shared_from_this(), &sender);
    if (status != UCS_OK) {
        return status;
    }
    *sender_p = std::shared_ptr<Sender>(std::move(sender));
    slot      = *sender_p;
    return UCS_OK;
}

} // namespace uct
} // namespace pxn
