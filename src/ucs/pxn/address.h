/*
 * pxn addresses as UCP exchanges them, within UCX's v1 address limits
 * (device 31 bytes, iface 63, ep 255).
 *
 * Device address: identifies the node and rail of a pxn iface, plus the
 *   inner device address of its device:
 *     u64 node hash | u32 rail | u8 len | inner device address
 *   rail: the rail hash (31 bits) | bit 31 (kDeviceHome): the device is its
 *   process's home device, the NIC near its GPU: only such ifaces are
 *   targets of pxn (a process receives where its GPU is near).
 * Iface address: the inner iface address (CONNECT_TO_IFACE inner
 *   transports; empty for others) and the iface's AM cookie (am_frame.h;
 *   0 where the iface receives no active messages):
 *     u8 len | inner iface address | u32 AM cookie
 * Ep address (CONNECT_TO_EP inner transports):
 *     u8 len | own inner ep address (the target end of routes to us)
 *     u8 n   | n x { u32 rail hash | u8 len | relay inner device address |
 *                   u8 len | relay inner ep address }
 *   one entry per local relay, the relay's pre-created inner ep for routes
 *   from this ep: the peer connects to the entry of its own rail.
 *
 * All multi-byte fields little-endian. unpack() functions validate every
 * length against the buffer and return false on malformed input.
 */
#ifndef PXN_ADDRESS_H_
#define PXN_ADDRESS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pxn {

constexpr size_t kMaxDeviceAddress = 31;
constexpr size_t kMaxIfaceAddress  = 63;
constexpr size_t kMaxEpAddress     = 255;

constexpr uint32_t kRailHashMask = 0x7fffffff;
constexpr uint32_t kDeviceHome    = 0x80000000;

/* FNV-1a 64; rails use the low 31 bits. */
uint64_t name_hash(const std::string &name);
inline uint32_t rail_hash(const std::string &rail)
{
    return static_cast<uint32_t>(name_hash(rail)) & kRailHashMask;
}

using Bytes = std::vector<uint8_t>;

struct DeviceAddress {
    uint64_t node_hash = 0;
    uint32_t rail_hash = 0;
    bool     home      = true;
    Bytes    inner;

    /* Packed size, or 0 if it would exceed kMaxDeviceAddress. */
    size_t packed_size() const;
    void   pack(uint8_t *out) const;
    /* `size` is an upper bound: UCP passes no length. */
    static bool unpack(const uint8_t *in, size_t size, DeviceAddress *addr);
};

struct RelayEpAddress {
    uint32_t rail_hash;
    Bytes    device;
    Bytes    ep;
};

struct EpAddress {
    Bytes                       own;    /* target end of routes to us */
    std::vector<RelayEpAddress> relays;

    size_t packed_size() const;
    void   pack(uint8_t *out) const;
    static bool unpack(const uint8_t *in, size_t size, EpAddress *addr);
    /* The relay entry for `rail`, or nullptr. */
    const RelayEpAddress *relay_for(uint32_t rail) const;
};

/* Iface address: u8 len | bytes | u32 AM cookie; 0 when too long. */
size_t iface_address_size(size_t inner_len);
void   pack_iface_address(const Bytes &inner, uint32_t am_cookie, uint8_t *out);
/* `am_cookie` may be nullptr. */
bool   unpack_iface_address(const uint8_t *in, size_t size, Bytes *inner,
                            uint32_t *am_cookie = nullptr);

} // namespace pxn

#endif
