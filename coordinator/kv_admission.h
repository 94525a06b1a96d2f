// KV-cache admission policy of the engine, free of I/O.
//
// Every admitted sequence reserves its worst case on each worker: blocks for
// prompt + max_new_tokens + max_k + 1 positions (speculative positions past the
// committed ones included), and on the draft also its pre-drafting branches' own blocks
// (each at most max_k + 2 positions past a shared prefix, one copied partial block). Decisions for
// the request at the head of the queue:
//  * Refuse at once (RESOURCE_EXHAUSTED with the numbers) a request that could never
//    fit the target's whole cache.
//  * Admit when the target has room now. The draft's reservation is taken when the
//    draft has room now; otherwise the sequence runs without the draft (target-only or
//    prompt lookup) instead of blocking the queue on the draft's cache.
//  * Otherwise wait (FIFO: nothing behind it overtakes it) until running sequences
//    finish, within the request's deadline.
#ifndef TANDEM_COORDINATOR_KV_ADMISSION_H_
#define TANDEM_COORDINATOR_KV_ADMISSION_H_

#include "absl/status/status.h"

namespace tandem::coordinator {

// One worker's cache: tokens per block and blocks in the budget (0 blocks = unknown:
// no limit is enforced).
struct KvCapacity {
  int block_size = 0;
  int total_blocks = 0;
};

class KvAdmission {
 public:
  // `max_k`: the most proposals verified per step (reserved past max_new_tokens);
  // `draft_branches`: the branches each sequence may hold on the draft (>= 0).
  explicit KvAdmission(int max_k, int draft_branches = 0)
      : max_k_(max_k), draft_branches_(draft_branches) {}

  void SetTarget(KvCapacity target) { target_ = target; }
  // The draft's capacity; has_draft = false when no draft is configured.
  void SetDraft(KvCapacity draft, bool has_draft);

  // Blocks a sequence of `prompt` + `max_new_tokens` reserves on a worker of `capacity`
  // (0 when the capacity is unknown).
  int BlocksFor(const KvCapacity& capacity, int prompt, int max_new_tokens) const;
  int TargetBlocks(int prompt, int max_new_tokens) const;
  int DraftBlocks(int prompt, int max_new_tokens) const;

  // OK, or RESOURCE_EXHAUSTED naming the blocks needed and held when the request could
  // never fit the target's cache.
  absl::Status CheckFitsTarget(int prompt, int max_new_tokens) const;

  struct Decision {
    bool admit = false;      // False: wait.
    bool use_draft = false;  // The draft's blocks are reserved (only when admitted).
  };
  // For a request that fits the target, with `target_used` / `draft_used` blocks
  // reserved by the running sequences.
  Decision Decide(int prompt, int max_new_tokens, int target_used, int draft_used) const;

 private:
  int max_k_;
  int draft_branches_;
  KvCapacity target_;
  KvCapacity draft_;
  bool has_draft_ = false;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_KV_ADMISSION_H_
