#include "address.h"

#include <cstring>

namespace pxn {

namespace {

class Reader {
public:
    Reader(const uint8_t *p, size_t size) : p_(p), left_(size) {}

    template<typename T> bool read(T *v)
    {
        if (left_ < sizeof(T)) {
            return false;
        }
        memcpy(v, p_, sizeof(T));
        p_ += sizeof(T);
        left_ -= sizeof(T);
        return true;
    }

    bool read_bytes(Bytes *b)
    {
        uint8_t len;
        if (!read(&len) || (left_ < len)) {
            return false;
        }
        b->assign(p_, p_ + len);
        p_ += len;
        left_ -= len;
        return true;
    }

private:
    const uint8_t *p_;
    size_t         left_;
};

class Writer {
public:
    explicit Writer(uint8_t *p) : p_(p) {}

    template<typename T> void write(T v)
    {
        memcpy(p_, &v, sizeof(T));
        p_ += sizeof(T);
    }

    void write_bytes(const Bytes &b)
    {
        write(static_cast<uint8_t>(b.size()));
        if (!b.empty()) {
            memcpy(p_, b.data(), b.size());
        }
        p_ += b.size();
    }

private:
    uint8_t *p_;
};

} // namespace

uint64_t name_hash(const std::string &name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : name) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

size_t DeviceAddress::packed_size() const
{
    const size_t size = 8 + 4 + 1 + inner.size();
    return ((inner.size() <= UINT8_MAX) && (size <= kMaxDeviceAddress)) ? size : 0;
}

void DeviceAddress::pack(uint8_t *out) const
{
    Writer w(out);
    w.write(node_hash);
    w.write((rail_hash & kRailHashMask) | (home ? kDeviceHome : 0));
    w.write_bytes(inner);
}

bool DeviceAddress::unpack(const uint8_t *in, size_t size, DeviceAddress *addr)
{
    Reader r(in, size);
    uint32_t rail;
    if (!r.read(&addr->node_hash) || !r.read(&rail) || !r.read_bytes(&addr->inner)) {
        return false;
    }
    addr->rail_hash = rail & kRailHashMask;
    addr->home      = (rail & kDeviceHome) != 0;
    return true;
}

size_t EpAddress::packed_size() const
{
    size_t size = 1 + own.size() + 1;
    if ((own.size() > UINT8_MAX) || (relays.size() > UINT8_MAX)) {
        return 0;
    }
    for (const auto &r : relays) {
        if ((r.device.size() > UINT8_MAX) || (r.ep.size() > UINT8_MAX)) {
            return 0;
        }
        size += 4 + 1 + r.device.size() + 1 + r.ep.size();
    }
    return (size <= kMaxEpAddress) ? size : 0;
}

void EpAddress::pack(uint8_t *out) const
{
    Writer w(out);
    w.write_bytes(own);
    w.write(static_cast<uint8_t>(relays.size()));
    for (const auto &r : relays) {
        w.write(r.rail_hash);
        w.write_bytes(r.device);
        w.write_bytes(r.ep);
    }
}

bool EpAddress::unpack(const uint8_t *in, size_t size, EpAddress *addr)
{
    Reader r(in, size);
    uint8_t n;
    if (!r.read_bytes(&addr->own) || !r.read(&n)) {
        return false;
    }
    addr->relays.resize(n);
    for (auto &relay : addr->relays) {
        if (!r.read(&relay.rail_hash) || !r.read_bytes(&relay.device) ||
            !r.read_bytes(&relay.ep)) {
            return false;
        }
    }
    return true;
}

const RelayEpAddress *EpAddress::relay_for(uint32_t rail) const
{
    for (const auto &r : relays) {
        if (r.rail_hash == rail) {
            return &r;
        }
    }
    return nullptr;
}

size_t iface_address_size(size_t inner_len)
{
    const size_t size = 1 + inner_len + sizeof(uint32_t);
    return (size <= kMaxIfaceAddress) ? size : 0;
}

void pack_iface_address(const Bytes &inner, uint32_t am_cookie, uint8_t *out)
{
    Writer w(out);
    w.write_bytes(inner);
    w.write(am_cookie);
}

bool unpack_iface_address(const uint8_t *in, size_t size, Bytes *inner,
                          uint32_t *am_cookie)
{
    Reader r(in, size);
    uint32_t cookie;
    if (!r.read_bytes(inner) || !r.read(&cookie)) {
        return false;
    }
    if (am_cookie != nullptr) {
        *am_cookie = cookie;
    }
    return true;
}

} // namespace pxn
