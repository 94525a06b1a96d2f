// The block-parallel acceptance and draft sampling (accept_algorithm.h) run on the host
// with HostBlock: the exact algorithms and reduction order of the CUDA kernels, on any
// machine. Tests compare them with the references (HostVerifyAccept, HostSampleDrafts)
// here and with the GPU where there is one.
#ifndef TANDEM_KERNELS_ACCEPT_EMULATED_VERIFY_ACCEPT_H_
#define TANDEM_KERNELS_ACCEPT_EMULATED_VERIFY_ACCEPT_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/verify_accept.h"

namespace tandem {
namespace accept {

// Same contract as Backend::VerifyAccept with `logits.data` in host memory:
// INVALID_ARGUMENT for a malformed view or a chain outside its rows, per-chain errors in
// VerifyOutcome::status.
absl::Status EmulatedVerifyAccept(const LogitsView& logits, absl::Span<const VerifyChain> chains,
                                  std::vector<VerifyOutcome>* outcomes);

// Same contract as Backend::SampleDrafts with `logits.data` in host memory.
absl::Status EmulatedSampleDrafts(const LogitsView& logits, absl::Span<const DraftRow> drafts,
                                  std::vector<DraftProposal>* proposals);

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_EMULATED_VERIFY_ACCEPT_H_
