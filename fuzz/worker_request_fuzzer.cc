// libFuzzer target: arbitrary bytes as a worker step message. The first byte picks the
// message (Prefill, Draft, Verify, Truncate); the rest is parsed as it and validated
// against fixed limits and a fixed set of cached sequences, as the worker service
// does before touching the model. Every rejection must carry one of the protocol's
// codes and a message; every accepted message must respect the limits (batch rows,
// K, positions inside the context and not past the cache).
#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/stubs/logging.h"
#include "tandem/v1/worker.pb.h"
#include "worker/request_validation.h"
#include "worker/sequence_sampling.h"

namespace {

using tandem::worker::RequestLimits;

// No target-side proposer (serves_target_method unset): next_candidates are refused.
const RequestLimits kLimits{/*vocab_size=*/2048, /*max_batch_tokens=*/256,
                            /*max_speculative_tokens=*/8, /*context_length=*/512,
                            /*serves_target_method=*/nullptr};

absl::StatusOr<int> CachedLength(uint64_t id) {
  static const absl::flat_hash_map<uint64_t, int> cached = {{1, 10}, {2, 0}, {3, 500}};
  auto it = cached.find(id);
  if (it == cached.end()) return absl::NotFoundError("unknown sequence");
  return it->second;
}

int Cached(uint64_t id) { return CachedLength(id).value_or(0); }

void CheckRejection(const absl::Status& status) {
  const absl::StatusCode c = status.code();
  FUZZ_CHECK(c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kNotFound ||
             c == absl::StatusCode::kResourceExhausted);
  FUZZ_CHECK(!status.message().empty());
}

// The sequence whose cache a step entry's start position lies in: its own, or for a
// draft branch (fork_from) the parent's it forks from.
template <typename Sequence>
uint64_t PrefixOwner(const Sequence& s) {
  return s.sequence_id();
}
uint64_t PrefixOwner(const tandem::v1::DraftSequence& s) {
  return s.fork_from() != 0 ? s.fork_from() : s.sequence_id();
}

template <typename Sequence>
void CheckPositions(const Sequence& s, int64_t new_positions) {
  FUZZ_CHECK(!s.tokens().empty());
  for (int t : s.tokens()) FUZZ_CHECK(t >= 0 && t < kLimits.vocab_size);
  FUZZ_CHECK(static_cast<int64_t>(s.start_position()) <= Cached(PrefixOwner(s)));
  FUZZ_CHECK(int64_t{s.start_position()} + new_positions <= kLimits.context_length);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parsing invalid UTF-8 logs an error per input; the fuzzer expects it.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  if (size == 0) return 0;
  const uint8_t kind = data[0] % 4;
  const uint8_t* body = data + 1;
  const int body_size = static_cast<int>(size - 1);
  switch (kind) {
    case 0: {
      tandem::v1::PrefillRequest r;
      if (!r.ParseFromArray(body, body_size)) return 0;
      absl::Status s = tandem::worker::ValidatePrefillRequest(r, kLimits, CachedLength);
      if (!s.ok()) {
        CheckRejection(s);
        return 0;
      }
      int64_t rows = 0;
      for (const auto& seq : r.sequences()) {
        CheckPositions(seq, seq.tokens_size());
        rows += seq.tokens_size();
      }
      FUZZ_CHECK(r.sequences_size() > 0 && rows <= kLimits.max_batch_tokens);
      return 0;
    }
    case 1: {
      tandem::v1::DraftRequest r;
      if (!r.ParseFromArray(body, body_size)) return 0;
      absl::Status s = tandem::worker::ValidateDraftRequest(r, kLimits, CachedLength);
      if (!s.ok()) {
        CheckRejection(s);
        return 0;
      }
      for (const auto& seq : r.sequences()) {
        FUZZ_CHECK(seq.num_draft_tokens() >= 1 &&
                   seq.num_draft_tokens() <= static_cast<uint32_t>(kLimits.max_speculative_tokens));
        FUZZ_CHECK(seq.proposal_top_k() <= 256);
        FUZZ_CHECK(seq.num_top() <= 16);
        // A dynamic tree: within the budget and width, point-mass rules, no branch.
        FUZZ_CHECK(seq.tree_nodes() <= static_cast<uint32_t>(kLimits.max_speculative_tokens));
        FUZZ_CHECK(seq.tree_nodes() > 0 ? seq.tree_width() >= 1 && seq.tree_width() <= 16
                                        : seq.tree_width() == 0);
        FUZZ_CHECK(seq.tree_nodes() == 0 ||
                   (seq.fork_from() == 0 && seq.num_top() == 0 &&
                    (tandem::worker::IsGreedy(seq.sampling()) ||
                     seq.sampling().rule() == tandem::v1::ACCEPTANCE_RULE_COUPLED)));
        CheckPositions(seq, int64_t{seq.tokens_size()} + seq.num_draft_tokens());
      }
      return 0;
    }
    case 2: {
      tandem::v1::VerifyRequest r;
      if (!r.ParseFromArray(body, body_size)) return 0;
      absl::Status s = tandem::worker::ValidateVerifyRequest(r, kLimits, CachedLength);
      if (!s.ok()) {
        CheckRejection(s);
        return 0;
      }
      int64_t rows = 0;
      for (const auto& seq : r.sequences()) {
        FUZZ_CHECK(seq.proposals_size() <= kLimits.max_speculative_tokens);
        FUZZ_CHECK(tandem::worker::ToAcceptanceParams(seq.sampling()).ok());
        for (const auto& p : seq.proposals()) {
          FUZZ_CHECK(p.token() >= 0 && p.token() < kLimits.vocab_size);
          FUZZ_CHECK(p.q_ids_size() == p.q_probs_size() && p.q_ids_size() > 0);
        }
        for (int i = 0; i < seq.proposal_parents_size(); ++i) {
          FUZZ_CHECK(seq.proposal_parents(i) >= -1 && seq.proposal_parents(i) < i);
        }
        CheckPositions(seq, int64_t{seq.tokens_size()} + seq.proposals_size());
        rows += seq.tokens_size() + seq.proposals_size();
      }
      FUZZ_CHECK(rows <= kLimits.max_batch_tokens);
      return 0;
    }
    default: {
      tandem::v1::TruncateRequest r;
      if (!r.ParseFromArray(body, body_size)) return 0;
      absl::Status s = tandem::worker::ValidateTruncateRequest(r, CachedLength);
      if (!s.ok()) {
        CheckRejection(s);
        return 0;
      }
      for (const auto& item : r.items()) {
        FUZZ_CHECK(static_cast<int64_t>(item.length()) <= Cached(item.sequence_id()));
      }
      return 0;
    }
  }
}
