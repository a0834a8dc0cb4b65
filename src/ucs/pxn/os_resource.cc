#include "os_resource.h"

#include <ucs/debug/log_def.h>

#include <sys/mman.h>
#include <unistd.h>

namespace pxn {

void UniqueFd::reset(int fd)
{
    if (fd_ >= 0) {
        /* Linux releases the descriptor even when close() reports EINTR:
         * retrying could close a descriptor another thread just got. */
        ::close(fd_);
    }
    fd_ = fd;
}

SharedMapping::SharedMapping(SharedMapping &&other) noexcept :
    addr_(other.addr_), length_(other.length_)
{
    other.addr_   = nullptr;
    other.length_ = 0;
}

SharedMapping &SharedMapping::operator=(SharedMapping &&other) noexcept
{
    if (this != &other) {
        reset();
        addr_         = other.addr_;
        length_       = other.length_;
        other.addr_   = nullptr;
        other.length_ = 0;
    }
    return *this;
}

ucs_status_t SharedMapping::map(int fd, size_t length, const std::string &what)
{
    reset();
    void *addr = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        ucs_error("pxn: mmap of %zu bytes of %s failed: %m", length, what.c_str());
        return UCS_ERR_NO_MEMORY;
    }
    addr_   = addr;
    length_ = length;
    return UCS_OK;
}

void SharedMapping::reset()
{
    if (addr_ != nullptr) {
        munmap(addr_, length_);
        addr_   = nullptr;
        length_ = 0;
    }
}

} // namespace pxn
