#include "fail_alloc.h"

#include <cstdlib>
#include <new>

namespace {

/* allocations of this thread left before the armed one; 0: disarmed */
thread_local unsigned long t_left  = 0;
thread_local bool          t_fired = false;

void *allocate(std::size_t size, std::size_t align)
{
    if ((t_left != 0) && (--t_left == 0)) {
        t_fired = true;
        throw std::bad_alloc();
    }
    for (;;) { /* the standard's loop over the new handler */
        const std::size_t n = (size == 0) ? 1 : size;
        void *p = (align == 0) ? std::malloc(n) :
                  std::aligned_alloc(align, (n + align - 1) / align * align);
        if (p != nullptr) {
            return p;
        }
        std::new_handler handler = std::get_new_handler();
        if (handler == nullptr) {
            throw std::bad_alloc();
        }
        handler();
    }
}

} // namespace

namespace pxn_tools {

void fail_alloc_arm(unsigned long nth)
{
    t_left  = nth;
    t_fired = false;
}

bool fail_alloc_disarm()
{
    t_left = 0;
    return t_fired;
}

} // namespace pxn_tools

void *operator new(std::size_t size) { return allocate(size, 0); }
void *operator new[](std::size_t size) { return allocate(size, 0); }
void *operator new(std::size_t size, std::align_val_t align)
{
    return allocate(size, static_cast<std::size_t>(align));
}
void *operator new[](std::size_t size, std::align_val_t align)
{
    return allocate(size, static_cast<std::size_t>(align));
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept
{
    std::free(p);
}
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept
{
    std::free(p);
}
