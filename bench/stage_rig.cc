#include "stage_rig.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace pxn_tools {

using pxn::CopyChoice;
using pxn::uct::CudaDriver;
using pxn::uct::CudaStager;
namespace abi = pxn::abi;

namespace {

constexpr double kStallLimit  = 10.0; /* s without progress: give up */
constexpr double kExportLimit = 60.0; /* s for the relay to export its arena */

int relay_main(RigShared *sh, const RigOptions &opt)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const CudaDriver *cu = CudaDriver::get();
    CUdeviceptr arena = 0;
    CUipcMemHandle handle;
    if ((cu == nullptr) || (cu->use_device(opt.relay_gpu) != UCS_OK) ||
        (cu->cuMemAlloc(&arena, uint64_t(opt.slots) * opt.slot_size) != CUDA_SUCCESS) ||
        (cu->cuIpcGetMemHandle(&handle, arena) != CUDA_SUCCESS)) {
        abi::store_release(sh->ready, uint64_t(2));
        return 1;
    }
    memcpy(sh->handle, &handle, sizeof(handle));
    abi::store_release(sh->ready, uint64_t(1));

    uint64_t seen = 0;
    while (!abi::load_acquire(sh->stop)) {
        const uint64_t doorbell = abi::load_acquire(sh->producer.doorbell);
        if (doorbell == seen) {
            continue;
        }
        const uint64_t t = now_ns();
        for (uint64_t seq = seen + 1; seq <= doorbell; ++seq) {
            sh->pickup_ns[seq % kRigRing] = t;
        }
        seen = doorbell;
        abi::store_release(sh->completed, doorbell);
    }
    cu->cuMemFree(arena);
    return 0;
}

} // namespace

uint64_t now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

double seconds_since(uint64_t start_ns)
{
    return double(now_ns() - start_ns) / 1e9;
}

void die(const char *what)
{
    fprintf(stderr, "ucx_pxn_stage_bench: %s\n", what);
    exit(1);
}

void check_cu(const CudaDriver *cu, CUresult result, const char *call)
{
    if (result != CUDA_SUCCESS) {
        fprintf(stderr, "ucx_pxn_stage_bench: %s: %s\n", call, cu->error(result));
        exit(1);
    }
}

/* Every other block of the source buffer, one slot's worth. */
std::vector<Block> scattered(uint64_t block, uint64_t slot_size)
{
    std::vector<Block> blocks;
    for (uint64_t i = 0; i < slot_size / block; ++i) {
        blocks.push_back({2 * i * block, block});
    }
    return blocks;
}

std::vector<Block> shifted(uint64_t length, uint64_t shift, uint64_t slot_size)
{
    std::vector<Block> blocks;
    for (uint64_t done = 0, i = 0; done < slot_size; ++i) {
        const uint64_t len = std::min(length, slot_size - done);
        blocks.push_back({(2 * i * length) % slot_size + shift, len});
        done += len;
    }
    return blocks;
}

std::vector<Block> random_blocks(uint64_t seed, uint64_t slot_size)
{
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<uint64_t> size(4096, 1 << 20);
    std::vector<Block> blocks;
    for (uint64_t done = 0; done < slot_size;) {
        const uint64_t len = std::min(size(rng), slot_size - done);
        blocks.push_back({rng() % (2 * slot_size - len + 1), len});
        done += len;
    }
    return blocks;
}

pid_t start_relay(RigShared *sh, const RigOptions &options)
{
    const pid_t relay = fork();
    if (relay == 0) {
        _exit(relay_main(sh, options));
    }
    const uint64_t start = now_ns();
    uint64_t ready;
    while ((ready = abi::load_acquire(sh->ready)) == 0) {
        if (seconds_since(start) > kExportLimit) {
            die("the relay did not export its arena within 60 s");
        }
        usleep(1000);
    }
    if (ready != 1) {
        waitpid(relay, nullptr, 0);
        die("the relay could not allocate or export its arena (no usable GPU?)");
    }
    return relay;
}

bool stop_relay(RigShared *sh, pid_t relay)
{
    abi::store_release(sh->stop, uint64_t(1));
    int status = 0;
    waitpid(relay, &status, 0);
    return WIFEXITED(status) && (WEXITSTATUS(status) == 0);
}

Rig::Rig(RigShared *shared, const RigOptions &options) :
    sh_(shared), opt_(options)
{
}

void Rig::init()
{
    cu_ = CudaDriver::get();
    const int device = opt_.sender_gpu;
    if ((cu_ == nullptr) || (cu_->use_device(device) != UCS_OK)) {
        die("no usable GPU (CUDA driver or device missing, or no such GPU)");
    }
    RIG_CHECK_CU(cu_, cu_->cuDeviceGetAttribute(
            &sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    const uint64_t bytes = 2 * opt_.slot_size;
    RIG_CHECK_CU(cu_, cu_->cuMemAlloc(&src_, bytes));
    host_src_.resize(bytes);
    for (uint64_t i = 0; i < bytes; i += 4) {
        uint32_t x = uint32_t(i) * 2654435761u;
        x ^= x >> 15;
        memcpy(&host_src_[i], &x, 4);
    }
    RIG_CHECK_CU(cu_, cu_->cuMemcpy(src_, reinterpret_cast<CUdeviceptr>(
                                                  host_src_.data()), bytes));
    RIG_CHECK_CU(cu_, cu_->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
}

void Rig::open(CopyChoice policy, bool gpu_doorbell, unsigned ctas)
{
    stager_.reset();
    pxn::Geometry geometry;
    geometry.lanes     = 1;
    geometry.slots     = opt_.slots;
    geometry.slot_size = opt_.slot_size;
    CudaStager::Options options;
    options.policy       = policy;
    options.gpu_doorbell = gpu_doorbell;
    options.gather_ctas  = ctas;
    if (CudaStager::open(sh_->handle, opt_.sender_gpu, 0, geometry,
                         &sh_->producer, options, &stager_) != UCS_OK) {
        die("CudaStager::open failed");
    }
    if (gpu_doorbell && !stager_->gpu_doorbell()) {
        die("the GPU doorbell is not supported here");
    }
}

Rig::Rate Rig::stream(const std::vector<Block> &blocks,
                      const std::function<bool(uint64_t)> &more)
{
    uint64_t piece = 0;
    for (const Block &b : blocks) {
        piece += b.length;
    }
    const uint64_t start = now_ns();
    uint64_t pieces      = 0;
    uint64_t host_ns     = 0;
    for (;;) {
        const uint64_t seq  = ++seq_;
        const uint32_t slot = uint32_t((seq - 1) % opt_.slots);
        wait_completed(seq - opt_.slots);
        const uint64_t enqueue = now_ns();
        uint64_t offset        = 0;
        for (const Block &b : blocks) {
            stager_->add(slot, reinterpret_cast<void*>(src_ + b.src_offset),
                         offset, b.length);
            offset += b.length;
        }
        if (stager_->commit(seq, slot, pxn::abi::kOpPut) != UCS_OK) {
            die("commit failed");
        }
        host_ns += now_ns() - enqueue;
        stager_->progress();
        ++pieces;
        if (more ? !more(pieces)
                 : ((pieces >= 2ull * opt_.slots) &&
                    (seconds_since(start) >= opt_.seconds))) {
            break;
        }
    }
    wait_completed(seq_);
    const double elapsed = seconds_since(start);
    verify(uint32_t((seq_ - 1) % opt_.slots), blocks);
    return {double(pieces * piece) / elapsed / 1e9,
            double(host_ns) / pieces / 1e3};
}

double Rig::raw(uint64_t length)
{
    const auto copy = [&](uint64_t i) {
        RIG_CHECK_CU(cu_, cu_->cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(
                                            stager_->slot(i % opt_.slots)),
                                    src_, length, stream_));
    };
    uint64_t start = now_ns();
    for (uint32_t i = 0; i < opt_.slots; ++i) {
        copy(i);
    }
    RIG_CHECK_CU(cu_, cu_->cuStreamSynchronize(stream_));
    const double per_copy = seconds_since(start) / opt_.slots;
    const uint64_t count  = std::max<uint64_t>(2ull * opt_.slots,
                                               uint64_t(opt_.seconds / per_copy));
    start = now_ns();
    for (uint64_t i = 0; i < count; ++i) {
        copy(i);
    }
    RIG_CHECK_CU(cu_, cu_->cuStreamSynchronize(stream_));
    return double(count * length) / seconds_since(start) / 1e9;
}

void Rig::latency(uint64_t length, unsigned samples, double *p50, double *p99)
{
    std::vector<uint64_t> ns;
    const std::vector<Block> piece = {{0, length}};
    for (unsigned i = 0; i < samples + 100; ++i) {
        const uint64_t seq  = ++seq_;
        const uint32_t slot = uint32_t((seq - 1) % opt_.slots);
        sh_->submit_ns[seq % kRigRing] = now_ns();
        stager_->add(slot, reinterpret_cast<void*>(src_), 0, length);
        if (stager_->commit(seq, slot, pxn::abi::kOpPut) != UCS_OK) {
            die("commit failed");
        }
        wait_completed(seq);
        if (i >= 100) { /* warm-up */
            ns.push_back(sh_->pickup_ns[seq % kRigRing] -
                         sh_->submit_ns[seq % kRigRing]);
        }
    }
    std::sort(ns.begin(), ns.end());
    *p50 = ns[ns.size() / 2] / 1e3;
    *p99 = ns[std::min(ns.size() - 1, ns.size() * 99 / 100)] / 1e3;
}

void Rig::wait_completed(uint64_t seq)
{
    if (int64_t(seq) <= 0) {
        return;
    }
    uint64_t last = abi::load_acquire(sh_->completed);
    uint64_t since = now_ns();
    while (last < seq) {
        stager_->progress();
        const uint64_t completed = abi::load_acquire(sh_->completed);
        if (completed != last) {
            last  = completed;
            since = now_ns();
        } else if (seconds_since(since) > kStallLimit) {
            die("the relay stopped picking up pieces");
        }
    }
}

void Rig::verify(uint32_t slot, const std::vector<Block> &blocks)
{
    uint64_t total = 0;
    for (const Block &b : blocks) {
        total += b.length;
    }
    std::vector<uint8_t> got(total);
    RIG_CHECK_CU(cu_, cu_->cuMemcpy(reinterpret_cast<CUdeviceptr>(got.data()),
                           reinterpret_cast<CUdeviceptr>(stager_->slot(slot)),
                           total));
    uint64_t offset = 0;
    for (const Block &b : blocks) {
        if (memcmp(&got[offset], &host_src_[b.src_offset], b.length) != 0) {
            die("staged bytes differ from the source");
        }
        offset += b.length;
    }
}

} // namespace pxn_tools
