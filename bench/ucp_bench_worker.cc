#include "ucp_bench_worker.h"

#include "bench_oob.h"
#include "bench_region.h"

#include <cstring>

namespace pxn_tools {

void bench_check(ucs_status_t status, const char *what)
{
    if (status != UCS_OK) {
        bench_fail(kBenchSetup, std::string(what) + ": " + ucs_status_string(status));
    }
}

UcpBenchWorker::UcpBenchWorker(const char *tls, uint64_t features)
{
    ucp_params_t params = {};
    params.field_mask   = UCP_PARAM_FIELD_FEATURES;
    params.features     = features;
    ucp_config_t *config;
    bench_check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
    if (tls != nullptr) {
        bench_check(ucp_config_modify(config, "TLS", tls), "ucp_config_modify(TLS)");
    }
    bench_check(ucp_init(&params, config, &context), "ucp_init");
    ucp_config_release(config);
    ucp_worker_params_t wp = {};
    wp.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode         = UCS_THREAD_MODE_SINGLE;
    bench_check(ucp_worker_create(context, &wp, &worker), "ucp_worker_create");
}

UcpBenchWorker::~UcpBenchWorker()
{
    close_ep();
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
}

ucp_mem_h UcpBenchWorker::map(const BenchRegion &region)
{
    ucp_mem_map_params_t p = {};
    p.field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    p.address     = region.data();
    p.length      = region.size();
    p.memory_type = region.gpu() ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
    ucp_mem_h memh;
    bench_check(ucp_mem_map(context, &p, &memh), "ucp_mem_map");
    return memh;
}

void UcpBenchWorker::unmap(ucp_mem_h memh)
{
    ucp_mem_unmap(context, memh);
}

void UcpBenchWorker::offer(int fd, const BenchRegion &region, ucp_mem_h memh) const
{
    ucp_address_t *addr;
    size_t len;
    bench_check(ucp_worker_get_address(worker, &addr, &len), "ucp_worker_get_address");
    send_blob(fd, addr, len);
    ucp_worker_release_address(worker, addr);
    const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
    send_blob(fd, &base, sizeof(base));
    void *rkey;
    bench_check(ucp_rkey_pack(context, memh, &rkey, &len), "ucp_rkey_pack");
    send_blob(fd, rkey, len);
    ucp_rkey_buffer_release(rkey);
}

ucp_rkey_h UcpBenchWorker::accept(int fd, uint64_t *remote)
{
    const std::vector<uint8_t> address = recv_blob(fd);
    ucp_ep_params_t p = {};
    p.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    p.address         = reinterpret_cast<const ucp_address_t*>(address.data());
    bench_check(ucp_ep_create(worker, &p, &ep), "ucp_ep_create");
    memcpy(remote, recv_blob(fd).data(), sizeof(*remote));
    ucp_rkey_h rkey;
    bench_check(ucp_ep_rkey_unpack(ep, recv_blob(fd).data(), &rkey), "ucp_ep_rkey_unpack");
    return rkey;
}

void UcpBenchWorker::close_ep()
{
    if (ep == nullptr) {
        return;
    }
    ucp_request_param_t p = {};
    ucs_status_ptr_t r    = ucp_ep_close_nbx(ep, &p);
    while (UCS_PTR_IS_PTR(r) && (ucp_request_check_status(r) == UCS_INPROGRESS)) {
        ucp_worker_progress(worker);
    }
    if (UCS_PTR_IS_PTR(r)) {
        ucp_request_free(r);
    }
    ep = nullptr;
}

ucp_request_param_t UcpBenchWorker::param(int mem)
{
    ucp_request_param_t p = {};
    p.op_attr_mask        = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send             = on_done;
    p.user_data           = this;
    if (mem >= 0) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
        p.memory_type   = ucs_memory_type_t(mem);
    }
    return p;
}

void UcpBenchWorker::note(ucs_status_t status)
{
    if (status != UCS_OK) {
        first_failure = (failed++ == 0) ? status : first_failure;
    }
}

void UcpBenchWorker::track(ucs_status_ptr_t r)
{
    UCS_PTR_IS_PTR(r) ? void(++outstanding) : note(UCS_PTR_STATUS(r));
}

void UcpBenchWorker::on_done(void *request, ucs_status_t status, void *user_data)
{
    UcpBenchWorker *self = static_cast<UcpBenchWorker*>(user_data);
    --self->outstanding;
    self->note(status);
    ucp_request_free(request);
}

void UcpBenchWorker::drain()
{
    while (outstanding > 0) {
        ucp_worker_progress(worker);
    }
}

void UcpBenchWorker::flush()
{
    ucp_request_param_t f = param();
    track(ucp_ep_flush_nbx(ep, &f));
    drain();
}

} // namespace pxn_tools
