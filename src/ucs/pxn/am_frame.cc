#include "am_frame.h"

#include <cstring>
#include <initializer_list>

namespace pxn {

namespace {

size_t write_header(void *out, size_t capacity, size_t length,
                    AmFrameKind kind, uint8_t am_id, uint32_t cookie,
                    uint64_t source)
{
    if (capacity < length) {
        return 0;
    }
    AmFrameHeader header{};
    header.kind   = kind;
    header.am_id  = am_id;
    header.cookie = cookie;
    header.source = source;
    std::memcpy(out, &header, sizeof(header));
    return length;
}

/* One u8-length-prefixed address at *pos, which must end within `end`. */
bool read_address(const uint8_t *&pos, const uint8_t *end, Bytes *address)
{
    if (pos >= end) {
        return false;
    }
    const size_t length = *pos++;
    if (size_t(end - pos) < length) {
        return false;
    }
    address->assign(pos, pos + length);
    pos += length;
    return true;
}

/* u8-length-prefixed addresses from `pos` to the frame's `end`, in order,
 * with nothing after them. */
bool read_addresses(const uint8_t *pos, const uint8_t *end,
                    std::initializer_list<Bytes*> addresses)
{
    for (Bytes *address : addresses) {
        if (!read_address(pos, end, address)) {
            return false;
        }
    }
    return pos == end;
}

/* A header, `fixed` bytes, then u8-length-prefixed addresses: the frame's
 * length, or 0 when `capacity` is too small or an address is longer than
 * 255 bytes. */
size_t write_addressed(void *out, size_t capacity, AmFrameKind kind,
                       uint32_t cookie, uint64_t source, const void *fixed,
                       size_t fixed_length,
                       std::initializer_list<const Bytes*> addresses)
{
    size_t length = sizeof(AmFrameHeader) + fixed_length;
    for (const Bytes *address : addresses) {
        if (address->size() > UINT8_MAX) {
            return 0;
        }
        length += 1 + address->size();
    }
    if (write_header(out, capacity, length, kind, 0, cookie, source) == 0) {
        return 0;
    }
    auto *pos = static_cast<uint8_t*>(out) + sizeof(AmFrameHeader);
    if (fixed_length != 0) {
        std::memcpy(pos, fixed, fixed_length);
        pos += fixed_length;
    }
    for (const Bytes *address : addresses) {
        *pos++ = uint8_t(address->size());
        if (!address->empty()) {
            std::memcpy(pos, address->data(), address->size());
        }
        pos += address->size();
    }
    return length;
}

} // namespace

ucs_status_t read_am_frame(const void *data, size_t length, AmFrame *frame)
{
    if (length < sizeof(AmFrameHeader)) {
        return UCS_ERR_INVALID_PARAM;
    }
    const auto *bytes = static_cast<const uint8_t*>(data);
    const uint8_t *end = bytes + length;
    const uint8_t *body = bytes + sizeof(AmFrameHeader);
    const size_t body_length = length - sizeof(AmFrameHeader);
    AmFrame f;
    std::memcpy(&f.header, bytes, sizeof(f.header));
    const AmFrameHeader &h = f.header;
    if (h.reserved != 0) {
        return UCS_ERR_INVALID_PARAM;
    }
    switch (h.kind) {
    case kAmData:
        if ((h.am_id >= kAmIdCount) || (h.cookie == 0)) {
            return UCS_ERR_INVALID_PARAM;
        }
        f.payload        = body;
        f.payload_length = body_length;
        break;
    case kAmHello: {
        if ((h.am_id != 0) || (h.cookie == 0) ||
            (body_length < sizeof(AmHello))) {
            return UCS_ERR_INVALID_PARAM;
        }
        std::memcpy(&f.hello, body, sizeof(f.hello));
        if (!read_addresses(body + sizeof(AmHello), end,
                            {&f.relay_dev, &f.relay_iface})) {
            return UCS_ERR_INVALID_PARAM;
        }
        break;
    }
    case kAmGrant:
        if ((h.am_id != 0) || (h.cookie != 0) ||
            (body_length != sizeof(AmGrant))) {
            return UCS_ERR_INVALID_PARAM;
        }
        std::memcpy(&f.grant, body, sizeof(f.grant));
        break;
    case kAmBye:
        if ((h.am_id != 0) || (h.cookie == 0) || (body_length != 0)) {
            return UCS_ERR_INVALID_PARAM;
        }
        break;
    case kAmWire:
    case kAmWired:
    case kAmUnwire:
        if ((h.am_id != 0) || (h.cookie == 0) ||
            !((h.kind == kAmWire) ?
              read_addresses(body, end, {&f.relay_dev, &f.ep, &f.relay_iface}) :
              (h.kind == kAmWired) ?
              read_addresses(body, end, {&f.ep}) :
              read_addresses(body, end, {&f.relay_dev, &f.relay_iface}))) {
            return UCS_ERR_INVALID_PARAM;
        }
        break;
    default:
        return UCS_ERR_INVALID_PARAM;
    }
    *frame = std::move(f);
    return UCS_OK;
}

size_t write_am_data_header(void *out, size_t capacity, uint64_t source,
                            uint32_t cookie, uint8_t am_id)
{
    return write_header(out, capacity, sizeof(AmFrameHeader), kAmData, am_id,
                        cookie, source);
}

size_t write_am_hello(void *out, size_t capacity, uint64_t source,
                      uint32_t cookie, uint64_t relay, const Bytes &relay_dev,
                      const Bytes &relay_iface)
{
    const AmHello hello{relay};
    return write_addressed(out, capacity, kAmHello, cookie, source, &hello,
                           sizeof(hello), {&relay_dev, &relay_iface});
}

size_t write_am_grant(void *out, size_t capacity, uint64_t source,
                      uint64_t granted)
{
    const size_t length = sizeof(AmFrameHeader) + sizeof(AmGrant);
    if (write_header(out, capacity, length, kAmGrant, 0, 0, source) == 0) {
        return 0;
    }
    const AmGrant grant{granted};
    std::memcpy(static_cast<uint8_t*>(out) + sizeof(AmFrameHeader), &grant,
                sizeof(grant));
    return length;
}

size_t write_am_bye(void *out, size_t capacity, uint64_t source,
                    uint32_t cookie)
{
    return write_header(out, capacity, sizeof(AmFrameHeader), kAmBye, 0, cookie,
                        source);
}

size_t write_am_wire(void *out, size_t capacity, uint64_t source,
                     uint32_t cookie, const Bytes &relay_dev,
                     const Bytes &relay_ep, const Bytes &relay_iface)
{
    return write_addressed(out, capacity, kAmWire, cookie, source, nullptr, 0,
                           {&relay_dev, &relay_ep, &relay_iface});
}

size_t write_am_wired(void *out, size_t capacity, uint64_t source,
                      uint32_t cookie, const Bytes &target_ep)
{
    return write_addressed(out, capacity, kAmWired, cookie, source, nullptr,
                           0, {&target_ep});
}

size_t write_am_unwire(void *out, size_t capacity, uint64_t source,
                       uint32_t cookie, const Bytes &relay_dev,
                       const Bytes &relay_iface)
{
    return write_addressed(out, capacity, kAmUnwire, cookie, source, nullptr,
                           0, {&relay_dev, &relay_iface});
}

} // namespace pxn
