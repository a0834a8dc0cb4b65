/*
 * Mapping of raw device names to canonical rail names
 * (UCX_PXN_RAIL_MAP="mlx5_0:rail0,mlx5_1:rail1").
 *
 * Contract: parse() accepts an empty string (every device is its own rail).
 * Device and rail names are 1..63 characters, no ',' and no whitespace; the
 * last ':' of an entry separates device from rail, so device names with
 * ports ("mlx5_0:1:rail0") work. A device listed twice is an error. A device
 * not listed maps to its own name (its port suffix ":N" removed, so that
 * "mlx5_0:1" and "mlx5_0" are the same NIC).
 */
#ifndef PXN_RAIL_MAP_H_
#define PXN_RAIL_MAP_H_

#include <ucs/type/status.h>

#include <string>
#include <utility>
#include <vector>

namespace pxn {

class RailMap {
public:
    static constexpr size_t kMaxNameLength = 63;

    /* On error returns UCS_ERR_INVALID_PARAM and says why in *error. */
    static ucs_status_t parse(const std::string &text, RailMap *map,
                              std::string *error);

    /* Canonical rail of a device (e.g. "mlx5_0:1" -> "rail0"). */
    std::string rail_of(const std::string &device) const;

    size_t size() const { return entries_.size(); }

private:
    std::vector<std::pair<std::string, std::string>> entries_;
};

} // namespace pxn

#endif
