/*
 * Inner memory domains: the UCT mds of the transports pxn wraps for the
 * network hop (UCX_PXN_NET_TLS). pxn exposes one md per inner md
 * ("pxn_<inner md name>") and registers memory with the inner md, so that
 * the relay's inner transport can write into it.
 *
 * Only UCT's public API is used here: the inner transport is a black box.
 */
#ifndef PXN_UCT_PXN_NET_MD_H_
#define PXN_UCT_PXN_NET_MD_H_

#include <uct/api/uct.h>

#include <memory>
#include <string>
#include <vector>

namespace pxn {
namespace uct {

/* A network device of an inner md and the inner transport pxn uses on it:
 * the first of UCX_PXN_NET_TLS that the md offers on that device. */
struct InnerDevice {
    std::string       name;      /* e.g. "mlx5_0:1", "eth0" */
    std::string       tl_name;   /* e.g. "rc_mlx5", "tcp" */
    uct_device_type_t type;
    ucs_sys_device_t  sys_device;
};

/* An inner md that offers at least one of UCX_PXN_NET_TLS. */
struct InnerMdInfo {
    uct_component_h          component;
    std::string              md_name;
    std::vector<InnerDevice> devices;
};

/* Lists inner mds, in the order UCX lists components. Never fails: an md
 * that cannot be opened or queried is skipped (logged at debug level). */
std::vector<InnerMdInfo> list_inner_mds(const std::vector<std::string> &net_tls);

/* Whether inner md `md` offers transport `tl_name` on `device`. */
bool md_offers(uct_md_h md, const std::string &tl_name,
               const std::string &device);

/* The pxn md name of an inner md ("pxn_" + name), or "" when too long. */
std::string pxn_md_name(const std::string &inner_md_name);

/* An opened inner md. The md itself stays open until the process exits,
 * shared by every InnerMd of it (pxn_net_md.cc says why). */
class InnerMd {
public:
    /* Opens the inner md behind pxn md `pxn_md_name`. */
    static ucs_status_t open(const std::string &pxn_md_name,
                             const std::vector<std::string> &net_tls,
                             InnerMd *md);
    /* Opens the inner md that has network device `device`.
     * UCS_ERR_NO_DEVICE: none has it. */
    static ucs_status_t open_for_device(const std::string &device,
                                        const std::vector<std::string> &net_tls,
                                        std::unique_ptr<InnerMd> *md);

    uct_md_h               md() const { return md_; }
    uct_component_h        component() const { return info_.component; }
    const InnerMdInfo     &info() const { return info_; }
    const uct_md_attr_t   &attr() const { return attr_; }
    /* The inner device named `name`, or nullptr. */
    const InnerDevice     *device(const std::string &name) const;

private:
    uct_md_h      md_ = nullptr;
    InnerMdInfo   info_;
    uct_md_attr_t attr_{};
};

} // namespace uct
} // namespace pxn

#endif
