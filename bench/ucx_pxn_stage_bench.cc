/*
 * ucx_pxn_stage_bench: the GPU staging hop of one lane, measured alone on one
 * GPU with the real pxn::uct::CudaStager (docs/gpu.md has results):
 *
 *   hop       contiguous slot-sized pieces through the lane (copy, doorbell,
 *             relay pickup, credit back) against a raw loop of the same
 *             copies into the same slots (across GPUs: peer copies, as
 *             cudaMemcpyPeerAsync makes them);
 *   scatter   pieces gathered from blocks of 4 KiB..256 KiB (every other
 *             block of a buffer) by the automatic policy (SM gather kernel)
 *             and by the copy engine alone, against contiguous pieces;
 *   shapes    pieces of the shapes real traffic makes (random 4 KiB-1 MiB
 *             blocks from random offsets, fixed sizes with sources and
 *             destinations misaligned, one contiguous block) staged with
 *             UCX_PXN_COPY=auto, ce and sm side by side: auto against the
 *             better of the two, and how many pieces auto gave the kernel;
 *   copyout   GET replies out of the slots into GPU memory, a slot's worth
 *             of replies of each size per piece: the stager's copies (by
 *             copy engine or scatter kernel, a ring of slots in flight,
 *             each slot back when its event is done) against one copy per
 *             reply, waited for per piece (cuMemcpyAsync, cuStreamSynchronize);
 *   latency   doorbell-to-pickup latency p50/p99 of single small pieces,
 *             GPU doorbell (cuStreamWriteValue64) against CPU doorbell
 *             (event query, then a store from the CPU);
 *   compute   a matrix multiply alone and while the lane stages at full
 *             rate: its slowdown, and the staging rate it leaves.
 *
 *   ucx_pxn_stage_bench [--slot-size 8M] [--slots 18] [--seconds 1]
 *       [--blocks 4K,16K,64K,256K] [--samples 2000] [--latency-sizes 4K,1M]
 *       [--gather-ctas 32,128] [--matmul-n 4096] [--sender-gpu 0] [--relay-gpu 0]
 *       [--shapes random,4K,4K+3,4101+3,64K,64K+3,1M,1M+3,8M,8M+3] [--seed 1]
 *       [--copyout-sizes 4K,64K,1M,8M]
 *       [--phases hop,scatter,shapes,copyout,latency,compute]
 *
 * A shape "L+S" is one slot of L-byte blocks whose sources lie S bytes past
 * 16-byte alignment (their destinations follow each other in the slot).
 *
 * The processes and the lane: stage_rig.h. Each mode's last piece is read
 * back and compared byte by byte.
 */
#include <bench/bench_units.h>
#include "stage_rig.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <sys/mman.h>
#include <vector>

extern "C" const unsigned char pxn_stage_bench_kernels_fatbin[];

namespace {

using pxn_tools::human;
using pxn_tools::parse_size;
using pxn_tools::parse_sizes;
using pxn::CopyChoice;
using pxn::uct::CudaStager;
using pxn_tools::Block;
using pxn_tools::Rig;
using pxn_tools::RigShared;
using pxn_tools::scattered;

constexpr unsigned kMatmulTile = 32; /* stage_bench_kernels.cu */

struct Options {
    pxn_tools::RigOptions rig;
    std::vector<uint64_t> blocks    = {4096, 16384, 65536, 262144};
    unsigned              samples   = 2000;
    std::vector<uint64_t> latency_sizes = {4096, 1u << 20};
    std::vector<uint64_t> ctas      = {32, 128}; /* gather grid bounds */
    unsigned              matmul_n  = 4096;
    std::vector<std::string> shapes = {"random", "4K", "4K+3", "4101+3", "64K",
                                       "64K+3", "1M", "1M+3", "8M", "8M+3"};
    uint64_t              seed      = 1;
    std::vector<uint64_t> copyout_sizes = {4096, 65536, 1u << 20, 8u << 20};
    std::vector<std::string> phases = {"hop", "scatter", "shapes", "copyout",
                                       "latency", "compute"};

    bool phase(const char *name) const
    {
        return std::find(phases.begin(), phases.end(), name) != phases.end();
    }
};

/* The matrix multiply alone, then while the lane stages (scattered 4 KiB
 * blocks through the gather kernel, and contiguous pieces through the copy
 * engine) until it finishes. */
void run_compute(Rig &rig, const Options &opt)
{
    const pxn::uct::CudaDriver *cu = rig.cu();
    const unsigned n               = opt.matmul_n;
    const uint64_t size = uint64_t(n) * n * sizeof(float);
    CUdeviceptr a, b, c;
    CUmodule module;
    CUfunction matmul;
    CUstream mstream;
    CUevent start, end;
    RIG_CHECK_CU(cu, cu->cuModuleLoadData(&module, pxn_stage_bench_kernels_fatbin));
    RIG_CHECK_CU(cu, cu->cuModuleGetFunction(&matmul, module, "pxn_bench_matmul"));
    RIG_CHECK_CU(cu, cu->cuMemAlloc(&a, size));
    RIG_CHECK_CU(cu, cu->cuMemAlloc(&b, size));
    RIG_CHECK_CU(cu, cu->cuMemAlloc(&c, size));
    RIG_CHECK_CU(cu, cu->cuMemsetD8(a, 0x3c, size)); /* 0.0115f */
    RIG_CHECK_CU(cu, cu->cuMemsetD8(b, 0x3c, size));
    RIG_CHECK_CU(cu, cu->cuStreamCreate(&mstream, CU_STREAM_NON_BLOCKING));
    RIG_CHECK_CU(cu, cu->cuEventCreate(&start, CU_EVENT_DEFAULT));
    RIG_CHECK_CU(cu, cu->cuEventCreate(&end, CU_EVENT_DEFAULT));

    void *args[] = {&a, &b, &c, const_cast<unsigned*>(&n)};
    const auto launch = [&](unsigned count) {
        RIG_CHECK_CU(cu, cu->cuEventRecord(start, mstream));
        for (unsigned i = 0; i < count; ++i) {
            RIG_CHECK_CU(cu, cu->cuLaunchKernel(matmul, n / kMatmulTile,
                                                n / kMatmulTile, 1, kMatmulTile,
                                                kMatmulTile, 1, 0, mstream, args,
                                                nullptr));
        }
        RIG_CHECK_CU(cu, cu->cuEventRecord(end, mstream));
    };
    const auto elapsed_ms = [&](unsigned count) {
        RIG_CHECK_CU(cu, cu->cuEventSynchronize(end));
        float ms;
        RIG_CHECK_CU(cu, cu->cuEventElapsedTime(&ms, start, end));
        return double(ms) / count;
    };

    launch(3);
    const double calibrate = elapsed_ms(3);
    const unsigned count   = std::max(5u, unsigned(opt.rig.seconds * 1e3 / calibrate));
    launch(count);
    const double alone = elapsed_ms(count);
    const double tflops = 2.0 * n * n * double(n) / (alone * 1e-3) / 1e12;
    printf("  matmul %ux%u FP32 alone: %.2f ms per multiply (%.1f TFLOP/s), "
           "%u multiplies\n", n, n, alone, tflops, count);
    printf("  gather kernel: CTAs of %u threads; the GPU has %d SMs\n",
           pxn::uct::kGatherThreads, rig.sms());
    printf("  %-34s %12s %10s %14s\n", "staging during the multiplies",
           "ms/multiply", "slowdown", "staging GB/s");

    struct Mode {
        std::string        name;
        unsigned           ctas;
        std::vector<Block> blocks;
    };
    std::vector<Mode> modes;
    for (uint64_t ctas : opt.ctas) {
        modes.push_back({"4K blocks, gather, " + std::to_string(ctas) + " CTAs",
                         unsigned(ctas), scattered(4096, opt.rig.slot_size)});
    }
    modes.push_back({"contiguous, copy engine", 0, {{0, opt.rig.slot_size}}});
    for (const Mode &m : modes) {
        rig.open(CopyChoice::kAuto, true, std::max(1u, m.ctas));
        launch(count);
        const double gbps = rig.stream(m.blocks, [&](uint64_t) {
            return cu->cuEventQuery(end) == CUDA_ERROR_NOT_READY;
        }).gbps;
        const double with = elapsed_ms(count);
        printf("  %-34s %12.2f %9.1f%% %14.1f\n", m.name.c_str(), with,
               (with / alone - 1) * 100, gbps);
    }
    cu->cuEventDestroy(start);
    cu->cuEventDestroy(end);
    cu->cuStreamDestroy(mstream);
    cu->cuMemFree(a);
    cu->cuMemFree(b);
    cu->cuMemFree(c);
    cu->cuModuleUnload(module);
}

/* ---- phases ----------------------------------------------------------- */

void run_hop(Rig &bench, const Options &opt)
{
    printf("\n== staging hop: %s contiguous pieces, %u slots ==\n",
           human(opt.rig.slot_size).c_str(), opt.rig.slots);
    bench.open(CopyChoice::kAuto, true);
    const double raw = bench.raw(opt.rig.slot_size);
    const std::vector<Block> piece = {{0, opt.rig.slot_size}};
    const Rig::Rate gpu = bench.stream(piece);
    bench.open(CopyChoice::kAuto, false);
    const Rig::Rate cpu = bench.stream(piece);
    printf("  %-40s %10s %8s %12s\n", "path", "GB/s", "vs raw", "host us/pc");
    printf("  %-40s %10.1f %8s\n", "raw copy loop (same copies, same slots)",
           raw, "1.00");
    printf("  %-40s %10.1f %8.2f %12.1f\n", "lane, GPU doorbell", gpu.gbps,
           gpu.gbps / raw, gpu.host_us);
    printf("  %-40s %10.1f %8.2f %12.1f\n", "lane, CPU doorbell (event)",
           cpu.gbps, cpu.gbps / raw, cpu.host_us);
}

void run_scatter(Rig &bench, const Options &opt)
{
    printf("\n== scattered blocks staged into %s pieces (every other block) ==\n",
           human(opt.rig.slot_size).c_str());
    bench.open(CopyChoice::kAuto, true);
    const double contiguous = bench.stream({{0, opt.rig.slot_size}}).gbps;
    printf("  contiguous pieces (copy engine): %.1f GB/s\n", contiguous);
    printf("  %-6s %6s", "block", "blocks");
    for (uint64_t ctas : opt.ctas) {
        printf(" %15s %7s", ("gather " + std::to_string(ctas) + " GB/s").c_str(),
               "vs cont");
    }
    printf(" %10s %13s %7s\n", "host us/pc", "copy eng GB/s", "vs cont");
    for (uint64_t block : opt.blocks) {
        const std::vector<Block> blocks = scattered(block, opt.rig.slot_size);
        printf("  %-6s %6zu", human(block).c_str(), blocks.size());
        double host_us = 0;
        for (uint64_t ctas : opt.ctas) {
            bench.open(CopyChoice::kAuto, true, unsigned(ctas));
            const Rig::Rate sm = bench.stream(blocks);
            host_us              = (host_us == 0) ? sm.host_us : host_us;
            printf(" %15.1f %7.3f", sm.gbps, sm.gbps / contiguous);
        }
        bench.open(CopyChoice::kCe, true);
        const double ce = bench.stream(blocks).gbps;
        printf(" %10.1f %13.2f %7.4f\n", host_us, ce, ce / contiguous);
    }
}

/* The blocks of shape `name` ("random", "L" or "L+S"); empty if unknown. */
std::vector<Block> shape_blocks(const std::string &name, const Options &opt)
{
    if (name == "random") {
        return pxn_tools::random_blocks(opt.seed, opt.rig.slot_size);
    }
    const size_t plus = name.find('+');
    uint64_t length   = 0, shift = 0;
    if (!parse_size(name.substr(0, plus), &length) || (length > opt.rig.slot_size) ||
        ((plus != std::string::npos) &&
         (!parse_size(name.substr(plus + 1), &shift) || (shift >= 16)))) {
        return {};
    }
    return pxn_tools::shifted(length, shift, opt.rig.slot_size);
}

void run_shapes(Rig &bench, const Options &opt)
{
    printf("\n== piece shapes, UCX_PXN_COPY=auto|ce|sm (%s pieces, %u CTAs) ==\n",
           human(opt.rig.slot_size).c_str(), unsigned(opt.ctas.front()));
    printf("  %-8s %6s %10s %8s %10s %10s %10s %10s\n", "shape", "segs",
           "auto GB/s", "kernel", "ce GB/s", "sm GB/s", "auto/best", "host us/pc");
    for (const std::string &name : opt.shapes) {
        const std::vector<Block> blocks = shape_blocks(name, opt);
        double gbps[3];
        double kernel_share = 0, host_us = 0;
        const CopyChoice choices[3] = {CopyChoice::kAuto, CopyChoice::kCe,
                                       CopyChoice::kSm};
        for (int i = 0; i < 3; ++i) {
            bench.open(choices[i], true, unsigned(opt.ctas.front()));
            const Rig::Rate r = bench.stream(blocks);
            gbps[i] = r.gbps;
            if (i == 0) {
                const double sm = double(bench.stager().gather_pieces());
                kernel_share    = sm / (sm + bench.stager().ce_pieces());
                host_us         = r.host_us;
            }
        }
        printf("  %-8s %6zu %10.1f %7.0f%% %10.1f %10.1f %10.2f %10.1f\n",
               name.c_str(), blocks.size(), gbps[0], kernel_share * 100, gbps[1],
               gbps[2], gbps[0] / std::max(gbps[1], gbps[2]), host_us);
    }
}

/* GET replies: each piece is one slot's worth of replies of `size` bytes,
 * copied out to every other block of a GPU buffer (one per slot), the
 * stager's way (copy_out per reply, end_out; a ring of slots in flight,
 * each back once its event is done) and the way it was done before, one
 * copy per reply, but waited for before the slot goes back (a plain
 * cuMemcpy does not wait for a device-to-device copy). The last round is
 * compared with the slots. */
void run_copyout(Rig &bench, const Options &opt)
{
    const pxn::uct::CudaDriver *cu = bench.cu();
    const uint32_t slots           = opt.rig.slots;
    const uint64_t slot_size       = opt.rig.slot_size;
    printf("\n== GET replies out of %u slots into GPU memory ==\n", slots);
    printf("  %-7s %8s %11s %9s %7s %11s %9s %7s\n", "reply", "per pc",
           "async GB/s", "kop/s", "kernel", "waited GB/s", "kop/s", "ratio");
    bench.open(CopyChoice::kAuto, true);
    pxn::uct::CudaStager &st = bench.stager();
    CUstream stream;
    CUdeviceptr dest;
    RIG_CHECK_CU(cu, cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    RIG_CHECK_CU(cu, cu->cuMemAlloc(&dest, uint64_t(slots) * 2 * slot_size));
    for (uint64_t size : opt.copyout_sizes) {
        const uint64_t replies = slot_size / size;
        /* reply j of a piece in slot s: slot offset j * size, destination
         * block 2 * j of the buffer of slot s */
        const auto dst = [&](uint32_t slot, uint64_t j) {
            return dest + uint64_t(slot) * 2 * slot_size + 2 * j * size;
        };
        const auto in_slot = [&](uint32_t slot, uint64_t j) {
            return reinterpret_cast<CUdeviceptr>(st.slot(slot)) + j * size;
        };
        uint64_t pieces = 0;
        uint64_t start  = pxn_tools::now_ns();
        while ((pieces < 2ull * slots) ||
               (pxn_tools::seconds_since(start) < opt.rig.seconds)) {
            const uint32_t slot = uint32_t(pieces % slots);
            for (uint64_t j = 0; j < replies; ++j) {
                RIG_CHECK_CU(cu, cu->cuMemcpyAsync(dst(slot, j), in_slot(slot, j),
                                                   size, stream));
            }
            RIG_CHECK_CU(cu, cu->cuStreamSynchronize(stream));
            ++pieces;
        }
        const double waited = pxn_tools::seconds_since(start);
        const uint64_t kernel_before = st.scatter_pieces();
        start = pxn_tools::now_ns();
        for (uint64_t i = 0; i < pieces + slots; ++i) {
            const uint32_t slot = uint32_t(i % slots);
            if (i >= slots) { /* the slot comes back once its copies are done */
                ucs_status_t status;
                while ((status = st.out_status(slot)) == UCS_INPROGRESS) {
                }
                if (status != UCS_OK) {
                    pxn_tools::die("a copy out failed");
                }
            }
            if (i >= pieces) {
                continue;
            }
            for (uint64_t j = 0; j < replies; ++j) {
                if (st.copy_out(slot, j * size, reinterpret_cast<void*>(dst(slot, j)),
                                size) != UCS_OK) {
                    pxn_tools::die("copy_out failed");
                }
            }
            if (st.end_out(slot) != UCS_OK) {
                pxn_tools::die("end_out failed");
            }
        }
        const double async = pxn_tools::seconds_since(start);
        const double kernel = double(st.scatter_pieces() - kernel_before) / pieces;
        std::vector<uint8_t> a(size), b(size);
        for (uint32_t slot = 0; slot < slots; ++slot) {
            for (uint64_t j = 0; j < replies; j += std::max<uint64_t>(1, replies / 7)) {
                RIG_CHECK_CU(cu, cu->cuMemcpy(reinterpret_cast<CUdeviceptr>(a.data()),
                                              dst(slot, j), size));
                RIG_CHECK_CU(cu, cu->cuMemcpy(reinterpret_cast<CUdeviceptr>(b.data()),
                                              in_slot(slot, j), size));
                if (a != b) {
                    pxn_tools::die("a GET reply differs from its slot");
                }
            }
        }
        const double bytes = double(pieces) * replies * size;
        printf("  %-7s %8lu %11.1f %9.1f %6.0f%% %11.1f %9.1f %7.2f\n",
               human(size).c_str(), replies, bytes / async / 1e9,
               pieces * replies / async / 1e3, kernel * 100, bytes / waited / 1e9,
               pieces * replies / waited / 1e3, waited / async);
    }
    cu->cuMemFree(dest);
    cu->cuStreamDestroy(stream);
}

void run_latency(Rig &bench, const Options &opt)
{
    printf("\n== doorbell-to-pickup latency, single pieces (%u samples) ==\n",
           opt.samples);
    printf("  %-8s %-22s %10s %10s\n", "piece", "doorbell", "p50 us", "p99 us");
    for (uint64_t length : opt.latency_sizes) {
        for (bool gpu : {true, false}) {
            bench.open(CopyChoice::kAuto, gpu);
            double p50, p99;
            bench.latency(length, opt.samples, &p50, &p99);
            printf("  %-8s %-22s %10.1f %10.1f\n", human(length).c_str(),
                   gpu ? "GPU (stream write)" : "CPU (event query)", p50, p99);
        }
    }
}

/* The phases; the stager is closed before the relay stops. */
void run(RigShared *sh, const Options &opt)
{
    Rig bench(sh, opt.rig);
    bench.init();
    printf("ucx_pxn_stage_bench: sender on GPU %d (%d SMs), relay's arena on GPU "
           "%d, %u slots of %s, %.1f s per measurement\n", opt.rig.sender_gpu,
           bench.sms(), opt.rig.relay_gpu, opt.rig.slots,
           human(opt.rig.slot_size).c_str(), opt.rig.seconds);
    if (opt.phase("hop")) {
        run_hop(bench, opt);
    }
    if (opt.phase("scatter")) {
        run_scatter(bench, opt);
    }
    if (opt.phase("shapes")) {
        run_shapes(bench, opt);
    }
    if (opt.phase("copyout")) {
        run_copyout(bench, opt);
    }
    if (opt.phase("latency")) {
        run_latency(bench, opt);
    }
    if (opt.phase("compute")) {
        printf("\n== effect on a concurrent matrix multiply ==\n");
        run_compute(bench, opt);
    }
}

bool parse(int argc, char **argv, Options &opt)
{
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char *v       = (i + 1 < argc) ? argv[i + 1] : nullptr;
        if (v == nullptr) {
            return false;
        }
        ++i;
        if (a == "--slot-size" && parse_size(v, &opt.rig.slot_size)) {
        } else if (a == "--slots" && atoi(v) > 1) {
            opt.rig.slots = atoi(v);
        } else if (a == "--seconds" && atof(v) > 0) {
            opt.rig.seconds = atof(v);
        } else if (a == "--blocks" && parse_sizes(v, &opt.blocks)) {
        } else if (a == "--samples" && atoi(v) > 0) {
            opt.samples = atoi(v);
        } else if (a == "--latency-sizes" && parse_sizes(v, &opt.latency_sizes)) {
        } else if (a == "--gather-ctas" && parse_sizes(v, &opt.ctas)) {
        } else if (a == "--sender-gpu" && atoi(v) >= 0) {
            opt.rig.sender_gpu = atoi(v);
        } else if (a == "--relay-gpu" && atoi(v) >= 0) {
            opt.rig.relay_gpu = atoi(v);
        } else if (a == "--matmul-n" && atoi(v) > 0 && atoi(v) % kMatmulTile == 0) {
            opt.matmul_n = atoi(v);
        } else if (a == "--shapes") {
            opt.shapes.clear();
            for (char *p = strtok(const_cast<char*>(v), ","); p != nullptr;
                 p = strtok(nullptr, ",")) {
                opt.shapes.push_back(p);
            }
        } else if (a == "--seed") {
            opt.seed = strtoull(v, nullptr, 0);
        } else if (a == "--copyout-sizes" && parse_sizes(v, &opt.copyout_sizes)) {
        } else if (a == "--phases") {
            opt.phases.clear();
            for (char *p = strtok(const_cast<char*>(v), ","); p != nullptr;
                 p = strtok(nullptr, ",")) {
                opt.phases.push_back(p);
            }
        } else {
            return false;
        }
    }
    /* Only the phases that run constrain their options: the hop of a
     * small-slot geometry needs no 8M shape. */
    for (uint64_t block : opt.phase("scatter") ? opt.blocks : std::vector<uint64_t>()) {
        if ((opt.rig.slot_size % block) != 0) {
            fprintf(stderr, "block %lu does not divide the slot size\n", block);
            return false;
        }
    }
    for (uint64_t ctas : opt.ctas) {
        if (ctas > pxn::kMaxGatherCtas) {
            fprintf(stderr, "--gather-ctas: at most %u\n", pxn::kMaxGatherCtas);
            return false;
        }
    }
    for (const std::string &name :
         opt.phase("shapes") ? opt.shapes : std::vector<std::string>()) {
        if (shape_blocks(name, opt).empty()) {
            fprintf(stderr, "--shapes: %s is not random, L or L+S (S < 16)\n",
                    name.c_str());
            return false;
        }
    }
    for (uint64_t length :
         opt.phase("copyout") ? opt.copyout_sizes : std::vector<uint64_t>()) {
        if (length > opt.rig.slot_size) {
            fprintf(stderr, "copy-out size %lu exceeds the slot size\n", length);
            return false;
        }
    }
    for (uint64_t length : opt.latency_sizes) {
        if (length > opt.rig.slot_size) {
            fprintf(stderr, "latency size %lu exceeds the slot size\n", length);
            return false;
        }
    }
    return opt.samples + 100 < pxn_tools::kRigRing;
}

} // namespace

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Options opt;
    if (!parse(argc, argv, opt)) {
        fprintf(stderr,
                "usage: ucx_pxn_stage_bench [--slot-size 8M] [--slots 18] "
                "[--seconds 1] [--blocks 4K,16K,64K,256K] [--samples 2000] "
                "[--latency-sizes 4K,1M] [--gather-ctas 32,128] "
                "[--matmul-n 4096 (multiple of 32)] [--sender-gpu N] [--relay-gpu N] "
                "[--shapes random,4K,4K+3,...] [--seed N] [--copyout-sizes 4K,...] "
                "[--phases hop,scatter,shapes,copyout,latency,compute]\n");
        return 2;
    }
    void *area = mmap(nullptr, sizeof(RigShared), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        pxn_tools::die("mmap failed");
    }
    RigShared *sh     = new (area) RigShared();
    const pid_t relay = pxn_tools::start_relay(sh, opt.rig);
    run(sh, opt);
    return pxn_tools::stop_relay(sh, relay) ? 0 : 1;
}

