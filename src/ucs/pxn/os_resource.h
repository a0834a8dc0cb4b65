/*
 * RAII owners of operating-system resources used by the registry: a file
 * descriptor and a shared file mapping.
 *
 * Contract: both are move-only and release their resource in the destructor
 * (close / munmap); release errors are ignored because nothing useful can be
 * done about them. Neither is thread-safe; the object that owns one decides
 * who may touch it.
 */
#ifndef PXN_OS_RESOURCE_H_
#define PXN_OS_RESOURCE_H_

#include <ucs/type/status.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace pxn {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd &&other) noexcept : fd_(other.release()) {}
    UniqueFd &operator=(UniqueFd &&other) noexcept
    {
        if (this != &other) {
            reset(other.release());
        }
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd &operator=(const UniqueFd&) = delete;

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }

    /* Gives up ownership without closing. */
    int release()
    {
        const int fd = fd_;
        fd_          = -1;
        return fd;
    }

    void reset(int fd = -1);

private:
    int fd_ = -1;
};

/* A MAP_SHARED, read-write mapping of the first `length` bytes of a file. */
class SharedMapping {
public:
    SharedMapping() = default;
    ~SharedMapping() { reset(); }
    SharedMapping(SharedMapping &&other) noexcept;
    SharedMapping &operator=(SharedMapping &&other) noexcept;
    SharedMapping(const SharedMapping&) = delete;
    SharedMapping &operator=(const SharedMapping&) = delete;

    /* The caller has checked (fstat) that the file has at least `length`
     * bytes: touching a page beyond the end of a file raises SIGBUS. Logs
     * the failure naming `what`. */
    ucs_status_t map(int fd, size_t length, const std::string &what);
    void reset();

    uint8_t *data() const { return static_cast<uint8_t*>(addr_); }
    size_t length() const { return length_; }
    bool valid() const { return addr_ != nullptr; }

private:
    void   *addr_   = nullptr;
    size_t length_  = 0;
};

} // namespace pxn

#endif
