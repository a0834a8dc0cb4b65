/*
 * Stager::open: the implementation for the relay's arena kind. The one
 * place where the sender side meets the build's CUDA choice.
 */
#include "pxn_stager_host.h"

#ifdef PXN_HAVE_CUDA
#include "pxn_stager_cuda.h"
#endif

#include <ucs/debug/log_def.h>

namespace pxn {
namespace uct {

namespace {

Stager::Wrapper g_test_wrapper = nullptr;

ucs_status_t open_for_arena(const Stager::Params &params,
                            std::unique_ptr<Stager> *stager)
{
    const PeerInfo &relay = params.mapping->info();
    switch (relay.arena_kind) {
    case abi::kArenaHostShm:
        return HostStager::open(params, stager);
    case abi::kArenaCudaIpc:
#ifdef PXN_HAVE_CUDA
        return CudaStager::open(params, stager);
#else
        ucs_debug("pxn: relay pid %u stages in GPU memory, which this build "
                  "(without CUDA) cannot write", relay.identity.pid);
        return UCS_ERR_UNSUPPORTED;
#endif
    default:
        ucs_debug("pxn: relay pid %u has an arena of unknown kind %u",
                  relay.identity.pid, relay.arena_kind);
        return UCS_ERR_UNSUPPORTED;
    }
}

} // namespace

ucs_status_t Stager::open(const Params &params, std::unique_ptr<Stager> *stager)
{
    const ucs_status_t status = open_for_arena(params, stager);
    if ((status == UCS_OK) && (g_test_wrapper != nullptr)) {
        *stager = g_test_wrapper(std::move(*stager));
    }
    return status;
}

void Stager::wrap_for_tests(Wrapper wrap)
{
    g_test_wrapper = wrap;
}

} // namespace uct
} // namespace pxn
