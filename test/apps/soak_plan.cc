#include "soak_plan.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace pxn_tools {

bool SoakCaps::parse(const std::string &line, SoakCaps *caps)
{
    std::istringstream in(line);
    std::string word;
    SoakCaps c;
    if (!(in >> word) || (word != "caps") ||
        !(in >> c.put_short >> c.put_bcopy >> c.put_zcopy >> c.get_bcopy >>
          c.get_zcopy)) {
        return false;
    }
    *caps = c;
    return true;
}

std::string SoakOp::command(const std::string &raddr, const std::string &rkey) const
{
    return std::string(get ? "get " : "put ") + kind + " " + raddr + " " + rkey +
           " " + std::to_string(bytes) + " " + std::to_string(chunk) + " " +
           std::to_string(offset);
}

SoakPlanner::SoakPlanner(const SoakCaps &caps, uint64_t buffer_size,
                         uint64_t max_op) :
    caps_(caps), buffer_size_(buffer_size),
    max_op_(std::max<uint64_t>(1, std::min(max_op, buffer_size)))
{
}

bool SoakPlanner::can(bool get) const
{
    return get ? ((caps_.get_bcopy | caps_.get_zcopy) != 0) :
                 ((caps_.put_short | caps_.put_bcopy | caps_.put_zcopy) != 0);
}

uint64_t SoakPlanner::log_uniform(uint64_t lo, uint64_t hi,
                                  std::mt19937_64 &rng) const
{
    if (hi <= lo) {
        return lo;
    }
    std::uniform_real_distribution<double> u(std::log(double(lo)),
                                             std::log(double(hi) + 1.0));
    const auto value = static_cast<uint64_t>(std::exp(u(rng)));
    return std::min(hi, std::max(lo, value));
}

SoakOp SoakPlanner::make_op(bool get, uint64_t offset, uint64_t bytes,
                            std::mt19937_64 &rng) const
{
    /* Smallest chunk that keeps the command within kMaxChunks operations. */
    const uint64_t min_chunk = (bytes + kMaxChunks - 1) / kMaxChunks;
    struct Kind {
        const char *name;
        uint64_t    max;
        unsigned    weight;
    };
    /* zcopy carries most bytes, as in applications; the staged kinds
     * exercise the in-call path. */
    const std::vector<Kind> kinds = get ?
        std::vector<Kind>{{"zcopy", caps_.get_zcopy, 3},
                          {"bcopy", caps_.get_bcopy, 1}} :
        std::vector<Kind>{{"zcopy", caps_.put_zcopy, 4},
                          {"bcopy", caps_.put_bcopy, 2},
                          {"short", caps_.put_short, 1}};
    std::vector<Kind> usable;
    unsigned total = 0;
    for (const Kind &k : kinds) {
        if ((k.max != 0) && (k.max >= min_chunk)) {
            usable.push_back(k);
            total += k.weight;
        }
    }
    SoakOp op{get, "zcopy", offset, bytes, bytes};
    if (usable.empty()) {
        return op; /* callers check can(); zcopy of 1 GiB covers the rest */
    }
    unsigned pick = std::uniform_int_distribution<unsigned>(0, total - 1)(rng);
    const Kind *kind = &usable.front();
    for (const Kind &k : usable) {
        if (pick < k.weight) {
            kind = &k;
            break;
        }
        pick -= k.weight;
    }
    op.kind  = kind->name;
    op.chunk = log_uniform(std::max<uint64_t>(1, min_chunk),
                           std::min(bytes, kind->max), rng);
    return op;
}

std::vector<SoakOp> SoakPlanner::pass(bool get, std::mt19937_64 &rng) const
{
    std::vector<SoakOp> ops;
    if (!can(get) || (buffer_size_ == 0)) {
        return ops;
    }
    ByteCoverage covered;
    const unsigned random_ops =
            std::uniform_int_distribution<unsigned>(1, kRandomOps)(rng);
    for (unsigned i = 0; i < random_ops; ++i) {
        const uint64_t bytes  = log_uniform(1, max_op_, rng);
        const uint64_t offset = std::uniform_int_distribution<uint64_t>(
                0, buffer_size_ - bytes)(rng);
        ops.push_back(make_op(get, offset, bytes, rng));
        covered.add(offset, offset + bytes);
    }
    for (const auto &gap : covered.gaps(buffer_size_)) {
        for (uint64_t at = gap.first; at < gap.second;) {
            const uint64_t bytes = log_uniform(
                    1, std::min(max_op_, gap.second - at), rng);
            ops.push_back(make_op(get, at, bytes, rng));
            at += bytes;
        }
    }
    /* The gap fillers in random order too: offsets not monotonic. */
    std::shuffle(ops.begin() + random_ops, ops.end(), rng);
    return ops;
}

void ByteCoverage::add(uint64_t begin, uint64_t end)
{
    if (begin >= end) {
        return;
    }
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    bool placed = false;
    for (const auto &r : ranges_) {
        if (r.second < begin) {
            merged.push_back(r);
        } else if (end < r.first) {
            if (!placed) {
                merged.emplace_back(begin, end);
                placed = true;
            }
            merged.push_back(r);
        } else {
            begin = std::min(begin, r.first);
            end   = std::max(end, r.second);
        }
    }
    if (!placed) {
        merged.emplace_back(begin, end);
    }
    ranges_.swap(merged);
}

std::vector<std::pair<uint64_t, uint64_t>> ByteCoverage::gaps(uint64_t size) const
{
    std::vector<std::pair<uint64_t, uint64_t>> out;
    uint64_t at = 0;
    for (const auto &r : ranges_) {
        if (r.first >= size) {
            break;
        }
        if (r.first > at) {
            out.emplace_back(at, r.first);
        }
        at = std::max(at, r.second);
    }
    if (at < size) {
        out.emplace_back(at, size);
    }
    return out;
}

} // namespace pxn_tools
