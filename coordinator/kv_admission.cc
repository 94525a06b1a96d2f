#include "coordinator/kv_admission.h"

#include "absl/strings/str_cat.h"

namespace tandem::coordinator {

void KvAdmission::SetDraft(KvCapacity draft, bool has_draft) {
  draft_ = draft;
  has_draft_ = has_draft;
}

int KvAdmission::BlocksFor(const KvCapacity& capacity, int prompt, int max_new_tokens) const {
  if (capacity.block_size <= 0) return 0;
  const int tokens = prompt + max_new_tokens + max_k_ + 1;
  return (tokens + capacity.block_size - 1) / capacity.block_size;
}

int KvAdmission::TargetBlocks(int prompt, int max_new_tokens) const {
  return BlocksFor(target_, prompt, max_new_tokens);
}

int KvAdmission::DraftBlocks(int prompt, int max_new_tokens) const {
  if (!has_draft_ || draft_.block_size <= 0) return 0;
  const int per_branch = (max_k_ + 2 + draft_.block_size - 1) / draft_.block_size + 1;
  return BlocksFor(draft_, prompt, max_new_tokens) + draft_branches_ * per_branch;
}

absl::Status KvAdmission::CheckFitsTarget(int prompt, int max_new_tokens) const {
  const int need = TargetBlocks(prompt, max_new_tokens);
  if (target_.total_blocks > 0 && need > target_.total_blocks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request needs ", need, " KV blocks of ", target_.block_size,
                     " tokens (prompt ", prompt, " + max_new_tokens ", max_new_tokens, " + ",
                     max_k_ + 1, " speculative positions) but the target's whole cache holds ",
                     target_.total_blocks, "; shorten it or raise the target's --kv_cache_mb"));
  }
  return absl::OkStatus();
}

KvAdmission::Decision KvAdmission::Decide(int prompt, int max_new_tokens, int target_used,
                                          int draft_used) const {
  Decision d;
  const int t = TargetBlocks(prompt, max_new_tokens);
  if (target_.total_blocks > 0 && target_used + t > target_.total_blocks) return d;
  d.admit = true;
  const int need = DraftBlocks(prompt, max_new_tokens);
  d.use_draft =
      has_draft_ && (draft_.total_blocks <= 0 || draft_used + need <= draft_.total_blocks);
  return d;
}

}  // namespace tandem::coordinator
