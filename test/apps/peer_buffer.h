/*
 * One buffer of ucx_pxn_peer: host memory (or GPU memory with a host view)
 * between two 4 KiB canaries, optionally registered with the peer's md, and
 * a byte pattern per seed to fill it with and check it against.
 *
 * Lifetime: release() (the md must still be open) before the md closes;
 * the destructor frees only the host view. Not thread-safe: the peer's one
 * command thread owns it.
 */
#ifndef PXN_TOOLS_PEER_BUFFER_H_
#define PXN_TOOLS_PEER_BUFFER_H_

#include <uct/api/uct.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pxn_tools {

/* The byte at `index` of the pattern of `seed`. */
uint8_t pattern_byte(uint64_t seed, uint64_t index);

class PeerBuffer {
public:
    static constexpr size_t  kCanary     = 4096;
    static constexpr uint8_t kCanaryByte = 0xca;

    /* (Re)allocates `size` bytes, canaries set and the buffer filled with
     * kCanaryByte; registers it when `md` can register that memory type.
     * Answers "alloc <address> <packed rkey hex | ->" or "err <why>". */
    std::string alloc(uct_md_h md, const uct_md_attr_t &md_attr, size_t size,
                      bool on_gpu);
    /* Deregisters and frees GPU memory. */
    void        release(uct_md_h md);

    void        fill(uint64_t seed);
    /* The buffer's first `length` bytes become those of `src` (host). */
    void        load(const void *src, size_t length);
    /* "ok", "canary" (either canary changed), "bad <first bad index>",
     * "err bad arguments" (range outside the buffer). */
    std::string check(uint64_t seed, size_t offset, size_t length);

    /* Where operations read and write (GPU memory when allocated there). */
    uint8_t  *data() { return (gpu_ ? gpu_ : memory_.data()) + kCanary; }
    size_t    size() const { return size_; }
    uct_mem_h memh() const { return memh_; }

private:
    uint8_t *host() { return memory_.data() + kCanary; }
    /* GPU buffer <-> host view, canaries included. */
    void     gpu_sync(bool to_gpu);

    std::vector<uint8_t> memory_; /* canary | buffer | canary (host view) */
    uint8_t             *gpu_  = nullptr; /* same layout in GPU memory */
    uct_mem_h            memh_ = UCT_MEM_HANDLE_NULL;
    size_t               size_ = 0;
};

/* Lowercase hex of a blob, "-" when empty; and back. */
std::string          hex(const void *data, size_t length);
std::vector<uint8_t> unhex(const std::string &text);

} // namespace pxn_tools

#endif
