// The block-parallel acceptance (accept_algorithm.h) run on the host with HostBlock:
// the exact algorithm and reduction order of the CUDA kernel, on any machine. Tests
// compare it with the reference (HostVerifyAccept) here and with the GPU where there is
// one.
#ifndef TANDEM_KERNELS_ACCEPT_EMULATED_VERIFY_ACCEPT_H_
#define TANDEM_KERNELS_ACCEPT_EMULATED_VERIFY_ACCEPT_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/accept/verify_accept.h"

namespace tandem {
namespace accept {

// Same contract as Backend::VerifyAccept with `logits.data` in host memory:
// INVALID_ARGUMENT for a malformed view or a chain outside its rows, per-chain errors in
// VerifyOutcome::status.
absl::Status EmulatedVerifyAccept(const LogitsView& logits, absl::Span<const VerifyChain> chains,
                                  std::vector<VerifyOutcome>* outcomes);

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_EMULATED_VERIFY_ACCEPT_H_
