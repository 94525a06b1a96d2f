#include "coordinator/fake_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/proposers/candidates.h"
#include "worker/draft_tree.h"
#include "worker/request_validation.h"

namespace tandem::coordinator {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser.
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t ContextHash(const std::vector<int32_t>& context) {
  uint64_t h = Mix(context.size());
  const size_t from = context.size() > 3 ? context.size() - 3 : 0;
  for (size_t i = from; i < context.size(); ++i) h = Mix(h ^ static_cast<uint32_t>(context[i]));
  return h;
}

constexpr int kFirstId = 3;  // Ids 0..2 are <unk>, <s>, </s> in the bundled tokenizer.

}  // namespace

int32_t FakeTargetNext(const std::vector<int32_t>& context, int vocab_size) {
  return kFirstId + static_cast<int32_t>(ContextHash(context) % (vocab_size - kFirstId));
}

int32_t FakeDraftNext(const std::vector<int32_t>& context, int vocab_size, double error_rate) {
  const int32_t target = FakeTargetNext(context, vocab_size);
  const double u = static_cast<double>(Mix(ContextHash(context) ^ 0x5eed) >> 11) * 0x1.0p-53;
  if (u >= error_rate) return target;
  return kFirstId + (target - kFirstId + 1) % (vocab_size - kFirstId);
}

std::vector<int32_t> FakeGreedyReference(const std::vector<int32_t>& prompt, int n,
                                         int vocab_size) {
  std::vector<int32_t> context = prompt;
  for (int i = 0; i < n; ++i) context.push_back(FakeTargetNext(context, vocab_size));
  return std::vector<int32_t>(context.begin() + prompt.size(), context.end());
}

FakeWorker::FakeWorker(FakeWorkerOptions options, std::string name)
    : options_(options), name_(std::move(name)) {}

absl::StatusOr<v1::DescribeResponse> FakeWorker::Describe() {
  absl::MutexLock lock(&mu_);
  if (down_) return absl::UnavailableError(absl::StrCat(name_, " is down"));
  v1::DescribeResponse d;
  d.set_role(options_.draft ? v1::WORKER_ROLE_DRAFT : v1::WORKER_ROLE_TARGET);
  d.mutable_model()->set_vocab_size(options_.vocab_size);
  d.set_tp_size(1);
  d.set_kv_block_size(options_.kv_block_size);
  d.set_kv_total_blocks(options_.kv_total_blocks);
  d.set_max_batch_tokens(options_.max_batch_tokens);
  d.set_max_speculative_tokens(options_.max_speculative_tokens);
  d.set_context_length(options_.context_length);
  d.set_bos_token_id(1);
  d.set_eos_token_id(2);
  d.set_instance_id(absl::StrCat(name_, "-", instance_));
  return d;
}

bool FakeWorker::IsServing() {
  absl::MutexLock lock(&mu_);
  return !down_;
}

void FakeWorker::SetDown(bool down, bool restart) {
  absl::MutexLock lock(&mu_);
  down_ = down;
  if (restart) {
    caches_.clear();
    ++instance_;
  }
}

void FakeWorker::FailNextSteps(absl::Status status, int count) {
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < count; ++i) failures_.push_back(status);
}

FakeWorker::Counters FakeWorker::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

std::string FakeWorker::last_rejection() const {
  absl::MutexLock lock(&mu_);
  return last_rejection_;
}

absl::Status FakeWorker::StepPreamble() {
  if (down_) return absl::UnavailableError(absl::StrCat(name_, " is down"));
  if (!failures_.empty()) {
    absl::Status s = failures_.front();
    failures_.pop_front();
    ++counters_.injected_failures;
    return s;
  }
  return absl::OkStatus();
}

absl::Status FakeWorker::Admit(const absl::Status& valid) {
  if (!valid.ok() && !absl::IsNotFound(valid)) {
    ++counters_.rejected;
    last_rejection_ = valid.ToString();
  }
  return valid;
}

absl::Status FakeWorker::CheckKv() const {
  int64_t blocks = 0;
  for (const auto& [id, cache] : caches_) {
    blocks +=
        (static_cast<int64_t>(cache.size()) + options_.kv_block_size - 1) / options_.kv_block_size;
  }
  if (blocks > options_.kv_total_blocks) {
    return absl::ResourceExhaustedError(absl::StrCat(name_, ": KV cache full (", blocks,
                                                     " blocks needed, ", options_.kv_total_blocks,
                                                     " held)"));
  }
  return absl::OkStatus();
}

void FakeWorker::Feed(uint64_t id, uint32_t start, const std::vector<int32_t>& tokens) {
  std::vector<int32_t>& cache = caches_[id];
  cache.resize(std::min<size_t>(cache.size(), start));
  cache.insert(cache.end(), tokens.begin(), tokens.end());
}

namespace {

worker::CachedLengthFn CachedLengths(const std::map<uint64_t, std::vector<int32_t>>& caches) {
  return [&caches](uint64_t id) -> absl::StatusOr<int> {
    auto it = caches.find(id);
    if (it == caches.end()) return absl::NotFoundError("unknown sequence");
    return static_cast<int>(it->second.size());
  };
}

}  // namespace

absl::StatusOr<v1::PrefillResponse> FakeWorker::Prefill(const v1::PrefillRequest& request) {
  absl::SleepFor(options_.step_delay);
  absl::MutexLock lock(&mu_);
  ++counters_.prefill_calls;
  if (absl::Status s = StepPreamble(); !s.ok()) return s;
  worker::RequestLimits limits{options_.vocab_size, options_.max_batch_tokens,
                               options_.max_speculative_tokens, options_.context_length,
                               /*serves_target_method=*/nullptr};
  limits.serves_target_method = [this](v1::SpeculationMethod method) {
    const auto& served = options_.target_methods;
    return std::find(served.begin(), served.end(), method) != served.end();
  };
  if (absl::Status s =
          Admit(worker::ValidatePrefillRequest(request, limits, CachedLengths(caches_)));
      !s.ok()) {
    return s;
  }
  const auto saved = caches_;
  v1::PrefillResponse response;
  for (const v1::PrefillSequence& p : request.sequences()) {
    Feed(p.sequence_id(), p.start_position(), {p.tokens().begin(), p.tokens().end()});
    response.add_cached_lengths(caches_[p.sequence_id()].size());
  }
  if (absl::Status kv = CheckKv(); !kv.ok()) {
    caches_ = saved;
    return Admit(kv);
  }
  for (const auto& [id, cache] : caches_) {
    counters_.max_position = std::max<int>(counters_.max_position, cache.size() - 1);
  }
  return response;
}

absl::StatusOr<v1::DraftResponse> FakeWorker::Draft(const v1::DraftRequest& request) {
  absl::SleepFor(options_.step_delay);
  absl::MutexLock lock(&mu_);
  ++counters_.draft_calls;
  if (absl::Status s = StepPreamble(); !s.ok()) return s;
  if (!options_.draft) return Admit(absl::FailedPreconditionError("Draft on a target"));
  worker::RequestLimits limits{options_.vocab_size, options_.max_batch_tokens,
                               options_.max_speculative_tokens, options_.context_length,
                               /*serves_target_method=*/nullptr};
  limits.serves_target_method = [this](v1::SpeculationMethod method) {
    const auto& served = options_.target_methods;
    return std::find(served.begin(), served.end(), method) != served.end();
  };
  if (absl::Status s = Admit(worker::ValidateDraftRequest(request, limits, CachedLengths(caches_)));
      !s.ok()) {
    return s;
  }
  const auto saved = caches_;
  for (const v1::DraftSequence& d : request.sequences()) {  // Forks first, as a real worker.
    if (d.fork_from() == 0) continue;
    const std::vector<int32_t>& parent = caches_.at(d.fork_from());
    caches_[d.sequence_id()].assign(parent.begin(), parent.begin() + d.start_position());
  }
  v1::DraftResponse response;
  for (const v1::DraftSequence& d : request.sequences()) {
    Feed(d.sequence_id(), d.start_position(), {d.tokens().begin(), d.tokens().end()});
    std::vector<int32_t>& cache = caches_[d.sequence_id()];
    v1::DraftedSequence* out = response.add_sequences();
    out->set_sequence_id(d.sequence_id());
    if (d.tree_nodes() > 0) {
      DraftTree(d, cache, out);
      continue;
    }
    for (uint32_t i = 0; i < d.num_draft_tokens(); ++i) {
      const int32_t t = FakeDraftNext(cache, options_.vocab_size, options_.draft_error_rate);
      *out->add_proposals() = PointMassProposal(t);
      if (d.num_top() > 0) *out->add_top() = DraftTop(cache, t, d.num_top());
      counters_.max_position = std::max<int>(counters_.max_position, cache.size());
      if (i + 1 < d.num_draft_tokens()) cache.push_back(t);  // The last one is not fed.
    }
    out->set_cached_length(cache.size());
  }
  if (absl::Status kv = CheckKv(); !kv.ok()) {
    caches_ = saved;
    return Admit(kv);
  }
  return response;
}

absl::StatusOr<v1::VerifyResponse> FakeWorker::Verify(const v1::VerifyRequest& request) {
  absl::SleepFor(options_.step_delay);
  absl::MutexLock lock(&mu_);
  ++counters_.verify_calls;
  if (absl::Status s = StepPreamble(); !s.ok()) return s;
  if (options_.draft) return Admit(absl::FailedPreconditionError("Verify on a draft"));
  worker::RequestLimits limits{options_.vocab_size, options_.max_batch_tokens,
                               options_.max_speculative_tokens, options_.context_length,
                               /*serves_target_method=*/nullptr};
  limits.serves_target_method = [this](v1::SpeculationMethod method) {
    const auto& served = options_.target_methods;
    return std::find(served.begin(), served.end(), method) != served.end();
  };
  if (absl::Status s =
          Admit(worker::ValidateVerifyRequest(request, limits, CachedLengths(caches_)));
      !s.ok()) {
    return s;
  }
  const auto saved = caches_;
  v1::VerifyResponse response;
  for (const v1::VerifySequence& v : request.sequences()) {
    Feed(v.sequence_id(), v.start_position(), {v.tokens().begin(), v.tokens().end()});
    std::vector<int32_t>& cache = caches_[v.sequence_id()];
    v1::VerifiedSequence* out = response.add_sequences();
    out->set_sequence_id(v.sequence_id());
    // Greedy along the tree (a chain: node i's parent is i - 1): the child of the last
    // accepted node that holds the target's token, until none does.
    int accepted = 0, parent = -1;
    counters_.max_position = std::max<int>(
        counters_.max_position, v.start_position() + v.tokens_size() + v.proposals_size() - 1);
    for (bool found = true; found;) {
      found = false;
      const int32_t t = FakeTargetNext(cache, options_.vocab_size);
      for (int i = parent + 1; i < v.proposals_size(); ++i) {
        const int p = v.proposal_parents_size() > 0 ? v.proposal_parents(i) : i - 1;
        if (p != parent || v.proposals(i).token() != t) continue;
        cache.push_back(t);
        out->add_committed(t);
        ++accepted;
        parent = i;
        found = true;
        break;
      }
    }
    out->add_committed(FakeTargetNext(cache, options_.vocab_size));
    out->set_num_accepted(accepted);
    out->set_cached_length(cache.size());
    if (v.has_next_candidates()) {
      counters_.next_candidate_requests += 1;
      v1::NextCandidates* next = out->mutable_next_candidates();
      next->set_method(v.next_candidates().method());
      std::vector<int32_t> context = cache;
      context.push_back(out->committed(out->committed_size() - 1));
      for (uint32_t i = 0; i < v.next_candidates().max_nodes(); ++i) {
        context.push_back(FakeTargetNext(context, options_.vocab_size));
        *next->add_proposals() = PointMassProposal(context.back());
      }
    }
  }
  if (absl::Status kv = CheckKv(); !kv.ok()) {
    caches_ = saved;
    return Admit(kv);
  }
  return response;
}

void FakeWorker::DraftTree(const v1::DraftSequence& d, const std::vector<int32_t>& cache,
                           v1::DraftedSequence* out) {
  worker::DraftTreeBuilder tree(d.tree_width(), d.num_draft_tokens(), d.tree_nodes());
  while (tree.NeedsDistributions()) {
    std::vector<spec::SparseDistribution> top;
    for (int i = 0; i < tree.frontier_size(); ++i) {
      std::vector<int32_t> context = cache;
      const std::vector<int32_t> path = tree.FrontierPath(i);
      context.insert(context.end(), path.begin(), path.end());
      const int32_t proposal =
          FakeDraftNext(context, options_.vocab_size, options_.draft_error_rate);
      const v1::TopTokens t = DraftTop(context, proposal, d.tree_width());
      top.push_back({{t.ids().begin(), t.ids().end()}, {t.probs().begin(), t.probs().end()}});
      counters_.max_position = std::max<int>(counters_.max_position, context.size());
    }
    tree.Grow(top);
  }
  worker::WriteDraftTree(tree.Result(), out);
  out->set_cached_length(cache.size());  // Only the committed context stays cached.
}

v1::TopTokens FakeWorker::DraftTop(const std::vector<int32_t>& context, int32_t proposal,
                                   int n) const {
  const int32_t target = FakeTargetNext(context, options_.vocab_size);
  const int span = options_.vocab_size - kFirstId;
  const auto other = [&](int32_t t, int step) { return kFirstId + (t - kFirstId + step) % span; };
  int32_t second = target;
  if (target == proposal || !options_.top_has_target) {
    second = other(proposal, 2);
    if (second == target) second = other(proposal, 3);
  }
  int32_t third = other(second, 5);
  if (third == proposal || third == target) third = other(second, 7);
  v1::TopTokens top;
  const std::pair<int32_t, float> entries[] = {{proposal, 0.6f}, {second, 0.3f}, {third, 0.1f}};
  for (int i = 0; i < n && i < 3; ++i) {
    top.add_ids(entries[i].first);
    top.add_probs(entries[i].second);
  }
  return top;
}

std::vector<uint64_t> FakeWorker::live_sequences() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, cache] : caches_) ids.push_back(id);
  return ids;
}

absl::Status FakeWorker::Release(const std::vector<uint64_t>& sequence_ids) {
  absl::MutexLock lock(&mu_);
  ++counters_.release_calls;
  if (down_) return absl::UnavailableError(absl::StrCat(name_, " is down"));
  for (uint64_t id : sequence_ids) counters_.released_sequences += caches_.erase(id);
  return absl::OkStatus();
}

absl::StatusOr<v1::WorkerStats> FakeWorker::GetStats() {
  absl::MutexLock lock(&mu_);
  if (down_) return absl::UnavailableError(absl::StrCat(name_, " is down"));
  v1::WorkerStats st;
  st.set_active_sequences(caches_.size());
  st.set_kv_total_blocks(options_.kv_total_blocks);
  return st;
}

}  // namespace tandem::coordinator
