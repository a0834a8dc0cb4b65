/*
 * The way in from UCX: every function UCX calls that reaches code which may
 * allocate (ops tables, class init and cleanup, component ops) runs that
 * code through uct_pxn_entry(), so that no std::bad_alloc ends the
 * application in std::terminate at a noexcept boundary.
 *
 * Contract of uct_pxn_entry(what, body):
 * - runs body() once and returns its result;
 * - if body throws std::bad_alloc (or a type derived from it), logs one
 *   ucs_error line naming `what` (the UCT function, "uct_ep_put_zcopy") and
 *   returns the UCT failure of body's return type: UCS_ERR_NO_MEMORY for
 *   ucs_status_t and ssize_t, UCS_STATUS_PTR(UCS_ERR_NO_MEMORY) for a
 *   pointer, 0 for other integers (no work done, not reachable, not
 *   connected), nothing for void;
 * - body is responsible for leaving its objects consistent when an
 *   allocation inside it fails (allocate before changing state); the
 *   guard only stops the exception;
 * - any other exception is a bug and still ends in std::terminate.
 */
#ifndef UCT_PXN_ENTRY_H_
#define UCT_PXN_ENTRY_H_

extern "C" {
#include <ucs/type/status.h>
}

#include <sys/types.h>

#include <new>
#include <type_traits>
#include <utility>

/* The one log line of a failed allocation under `what`. */
void uct_pxn_entry_no_memory(const char *what) noexcept;

template <typename Result> Result uct_pxn_entry_failure() noexcept
{
    if constexpr (std::is_void_v<Result>) {
        return;
    } else if constexpr (std::is_same_v<Result, ucs_status_t> ||
                         std::is_same_v<Result, ssize_t>) {
        return UCS_ERR_NO_MEMORY;
    } else if constexpr (std::is_pointer_v<Result>) {
        return static_cast<Result>(UCS_STATUS_PTR(UCS_ERR_NO_MEMORY));
    } else {
        static_assert(std::is_integral_v<Result>, "an entry point's result");
        return Result(0);
    }
}

template <typename Body>
auto uct_pxn_entry(const char *what, Body &&body) noexcept -> decltype(body())
{
    try {
        return std::forward<Body>(body)();
    } catch (const std::bad_alloc &) {
        uct_pxn_entry_no_memory(what);
        return uct_pxn_entry_failure<decltype(body())>();
    }
}

#endif
