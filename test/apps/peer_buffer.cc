#include "peer_buffer.h"

#ifdef PXN_HAVE_CUDA
#include <uct/pxn/pxn_cuda.h>
#endif
#ifdef PXN_UCX_MKEY_PACK_ADDRESS
#include <uct/api/v2/uct_v2.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace pxn_tools {

namespace {

#ifdef PXN_HAVE_CUDA
/* The GPU this application uses, made current the way an application
 * does: $PXN_PEER_GPU, else the GPU the tests give pxn
 * ($UCX_PXN_CUDA_DEVICE), else 0. */
const pxn::uct::CudaDriver *cuda()
{
    const pxn::uct::CudaDriver *cu = pxn::uct::CudaDriver::get();
    const char *peer = getenv("PXN_PEER_GPU");
    const char *pxn  = getenv("UCX_PXN_CUDA_DEVICE");
    int device       = peer ? atoi(peer) : (pxn ? atoi(pxn) : 0);
    if ((cu == nullptr) || (cu->use_device(std::max(device, 0)) != UCS_OK)) {
        return nullptr;
    }
    return cu;
}
#endif

int hex_digit(char c)
{
    if ((c >= '0') && (c <= '9')) {
        return c - '0';
    }
    if ((c >= 'a') && (c <= 'f')) {
        return c - 'a' + 10;
    }
    if ((c >= 'A') && (c <= 'F')) {
        return c - 'A' + 10;
    }
    return -1;
}

} // namespace

uint8_t pattern_byte(uint64_t seed, uint64_t index)
{
    uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull + index * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    return static_cast<uint8_t>(x >> 56);
}

std::string PeerBuffer::alloc(uct_md_h md, const uct_md_attr_t &md_attr,
                              size_t size, bool on_gpu)
{
    release(md);
    size_ = size;
    memory_.assign(size + 2 * kCanary, kCanaryByte);
#ifdef PXN_HAVE_CUDA
    if (on_gpu) {
        CUdeviceptr ptr;
        if ((cuda() == nullptr) ||
            (cuda()->cuMemAlloc(&ptr, memory_.size()) != CUDA_SUCCESS)) {
            return "err no GPU memory";
        }
        gpu_ = reinterpret_cast<uint8_t*>(ptr);
        gpu_sync(true);
    }
#else
    if (on_gpu) {
        return "err built without CUDA";
    }
#endif
    std::string rkey = "-";
    const ucs_memory_type_t type = on_gpu ? UCS_MEMORY_TYPE_CUDA :
                                            UCS_MEMORY_TYPE_HOST;
    /* Register only what the md can (cuda_ipc: GPU memory only); a source
     * the md cannot register needs no memh for pxn's staging copy. */
    if ((md_attr.cap.flags & UCT_MD_FLAG_REG) &&
        (md_attr.cap.reg_mem_types & UCS_BIT(type))) {
        ucs_status_t status = uct_md_mem_reg(md, data(), size,
                                             UCT_MD_MEM_ACCESS_ALL, &memh_);
        if (status != UCS_OK) {
            return std::string("err ") + ucs_status_string(status);
        }
        std::vector<uint8_t> packed(md_attr.rkey_packed_size);
        /* An md without rkeys (cma, tcp) has nothing to pack, and UCX
         * refuses a null buffer. Otherwise with the buffer's address where
         * UCX takes one (UCP does): an md that registers lazily looks the
         * buffer up only when packing (cuda_ipc of 1.18 on), and
         * uct_md_mkey_pack gives it none. */
        if (!packed.empty()) {
#ifdef PXN_UCX_MKEY_PACK_ADDRESS
            const uct_md_mkey_pack_params_t params = {};
            status = uct_md_mkey_pack_v2(md, memh_, data(), size, &params,
                                         packed.data());
#else
            status = uct_md_mkey_pack(md, memh_, packed.data());
#endif
            if (status != UCS_OK) {
                return std::string("err ") + ucs_status_string(status);
            }
        }
        rkey = hex(packed.data(), packed.size());
    }
    return "alloc " + std::to_string(reinterpret_cast<uintptr_t>(data())) + " " +
           rkey;
}

void PeerBuffer::release(uct_md_h md)
{
    if (memh_ != UCT_MEM_HANDLE_NULL) {
        uct_md_mem_dereg(md, memh_);
        memh_ = UCT_MEM_HANDLE_NULL;
    }
#ifdef PXN_HAVE_CUDA
    if (gpu_ != nullptr) {
        cuda()->cuMemFree(reinterpret_cast<CUdeviceptr>(gpu_));
        gpu_ = nullptr;
    }
#endif
}

void PeerBuffer::fill(uint64_t seed)
{
    for (size_t i = 0; i < size_; ++i) {
        host()[i] = pattern_byte(seed, i);
    }
    if (gpu_ != nullptr) {
        gpu_sync(true);
    }
}

void PeerBuffer::load(const void *src, size_t length)
{
    std::memcpy(host(), src, std::min(length, size_));
    if (gpu_ != nullptr) {
        gpu_sync(true);
    }
}

std::string PeerBuffer::check(uint64_t seed, size_t offset, size_t length)
{
    if ((offset > size_) || (length > size_ - offset)) {
        return "err bad arguments";
    }
    if (gpu_ != nullptr) {
        gpu_sync(false);
    }
    for (size_t i = 0; i < kCanary; ++i) {
        if ((memory_[i] != kCanaryByte) ||
            (memory_[kCanary + size_ + i] != kCanaryByte)) {
            return "canary";
        }
    }
    for (size_t i = offset; i < offset + length; ++i) {
        if (host()[i] != pattern_byte(seed, i)) {
            return "bad " + std::to_string(i);
        }
    }
    return "ok";
}

void PeerBuffer::gpu_sync(bool to_gpu)
{
#ifdef PXN_HAVE_CUDA
    const auto host_view = reinterpret_cast<CUdeviceptr>(memory_.data());
    const auto device    = reinterpret_cast<CUdeviceptr>(gpu_);
    if (to_gpu) {
        cuda()->cuMemcpy(device, host_view, memory_.size());
    } else {
        cuda()->cuMemcpy(host_view, device, memory_.size());
    }
#else
    (void)to_gpu;
#endif
}

std::string hex(const void *data, size_t length)
{
    static const char digits[] = "0123456789abcdef";
    std::string out;
    const auto *p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < length; ++i) {
        out += digits[p[i] >> 4];
        out += digits[p[i] & 15];
    }
    return out.empty() ? "-" : out;
}

std::vector<uint8_t> unhex(const std::string &text)
{
    std::vector<uint8_t> out;
    if (text == "-") {
        return out;
    }
    for (size_t i = 0; i + 1 < text.size(); i += 2) {
        const int hi = hex_digit(text[i]), lo = hex_digit(text[i + 1]);
        if ((hi < 0) || (lo < 0)) {
            return {};
        }
        out.push_back(static_cast<uint8_t>(hi * 16 + lo));
    }
    return out;
}

} // namespace pxn_tools
