#include "route_codec.h"

namespace pxn {

namespace {

/* Shared bytes one by one through the abi helpers: the other process may
 * write them at any time. */
void store_bytes(uint8_t *dest, const Bytes &src)
{
    for (size_t i = 0; i < src.size(); ++i) {
        abi::store_relaxed(dest[i], src[i]);
    }
}

void load_bytes(const uint8_t *src, size_t length, Bytes *dest)
{
    dest->resize(length);
    for (size_t i = 0; i < length; ++i) {
        (*dest)[i] = abi::load_relaxed(src[i]);
    }
}

bool kind_is_known(uint32_t kind)
{
    return (kind >= abi::kRouteToIface) && (kind <= abi::kRouteRelease);
}

} // namespace

ucs_status_t post_route_request(abi::RouteRequest *request, uint64_t gen,
                                const RouteMessage &m)
{
    if ((m.dev.size() > abi::kDevAddrMax) ||
        (m.iface.size() > abi::kIfaceAddrMax) ||
        (m.ep.size() > abi::kEpAddrMax)) {
        return UCS_ERR_INVALID_PARAM;
    }
    abi::store_relaxed(request->kind, uint32_t(m.kind));
    abi::store_relaxed(request->route, m.route);
    abi::store_relaxed(request->dev_addr_len, uint16_t(m.dev.size()));
    abi::store_relaxed(request->iface_addr_len, uint16_t(m.iface.size()));
    abi::store_relaxed(request->ep_addr_len, uint16_t(m.ep.size()));
    abi::store_relaxed(request->reserved0, uint16_t(0));
    store_bytes(request->dev_addr, m.dev);
    store_bytes(request->iface_addr, m.iface);
    store_bytes(request->ep_addr, m.ep);
    abi::store_release(request->request_gen, gen);
    return UCS_OK;
}

ucs_status_t read_route_request(const abi::RouteRequest *request,
                                RouteMessage *m)
{
    const uint32_t kind      = abi::load_relaxed(request->kind);
    const uint16_t dev_len   = abi::load_relaxed(request->dev_addr_len);
    const uint16_t iface_len = abi::load_relaxed(request->iface_addr_len);
    const uint16_t ep_len    = abi::load_relaxed(request->ep_addr_len);
    m->route                 = abi::load_relaxed(request->route);
    if (!kind_is_known(kind) || (abi::load_relaxed(request->reserved0) != 0) ||
        (dev_len > abi::kDevAddrMax) || (iface_len > abi::kIfaceAddrMax) ||
        (ep_len > abi::kEpAddrMax)) {
        return UCS_ERR_INVALID_PARAM;
    }
    m->kind = static_cast<abi::RouteKind>(kind);
    /* What each kind carries, and nothing else. */
    const bool shape_ok =
            (m->kind == abi::kRouteToIface) ?
            ((dev_len != 0) && (ep_len == 0)) :
            (m->kind == abi::kRouteConnectEp) ?
            ((dev_len != 0) && (iface_len == 0) && (ep_len != 0)) :
            ((dev_len == 0) && (iface_len == 0) && (ep_len == 0));
    if (!shape_ok) {
        return UCS_ERR_INVALID_PARAM;
    }
    load_bytes(request->dev_addr, dev_len, &m->dev);
    load_bytes(request->iface_addr, iface_len, &m->iface);
    load_bytes(request->ep_addr, ep_len, &m->ep);
    return UCS_OK;
}

void post_route_reply(abi::RouteReply *reply, uint64_t gen,
                      const RouteAnswer &a)
{
    /* u8 n | relay device address (n bytes) | relay ep address */
    const size_t addr_len = a.relay_dev.empty() && a.relay_ep.empty() ? 0 :
                            1 + a.relay_dev.size() + a.relay_ep.size();
    const bool fits       = (a.relay_dev.size() <= UINT8_MAX) &&
                            (addr_len <= abi::kEpAddrMax);
    abi::store_relaxed(reply->status,
                       int32_t(fits ? a.status : UCS_ERR_BUFFER_TOO_SMALL));
    abi::store_relaxed(reply->route, a.route);
    abi::store_relaxed(reply->ep_addr_len, uint16_t(fits ? addr_len : 0));
    if (fits && (addr_len != 0)) {
        abi::store_relaxed(reply->ep_addr[0], uint8_t(a.relay_dev.size()));
        store_bytes(reply->ep_addr + 1, a.relay_dev);
        store_bytes(reply->ep_addr + 1 + a.relay_dev.size(), a.relay_ep);
    }
    abi::store_release(reply->reply_gen, gen);
}

bool read_route_reply(const abi::RouteReply *reply, uint64_t gen,
                      RouteAnswer *a)
{
    if (abi::load_acquire(reply->reply_gen) != gen) {
        return false;
    }
    const int32_t raw     = abi::load_relaxed(reply->status);
    const uint16_t length = abi::load_relaxed(reply->ep_addr_len);
    /* Casting a value outside the enum's range would be undefined. */
    a->status = ((raw <= UCS_OK) && (raw > UCS_ERR_LAST)) ?
                static_cast<ucs_status_t>(raw) : UCS_ERR_IO_ERROR;
    a->route  = abi::load_relaxed(reply->route);
    a->relay_dev.clear();
    a->relay_ep.clear();
    if (length == 0) {
        return true;
    }
    const uint8_t dev_len = abi::load_relaxed(reply->ep_addr[0]);
    if ((length > abi::kEpAddrMax) || (size_t(dev_len) + 1 > length)) {
        a->status = UCS_ERR_INVALID_ADDR;
        return true;
    }
    load_bytes(reply->ep_addr + 1, dev_len, &a->relay_dev);
    load_bytes(reply->ep_addr + 1 + dev_len, length - 1 - dev_len, &a->relay_ep);
    return true;
}

} // namespace pxn
