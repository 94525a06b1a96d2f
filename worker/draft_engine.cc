#include "worker/draft_engine.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/accept/draft_sample.h"
#include "model/output_consumers.h"
#include "worker/draft_tree.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {

DraftEngine::DraftEngine(ModelExecutor* executor, const DraftEngineOptions& options)
    : executor_(executor), options_(options) {}

absl::Status DraftEngine::CheckCapacity(const v1::DraftRequest& request) const {
  const KvCacheStats kv = executor_->kv_stats();
  const auto blocks = [&](int64_t length) { return (length + kv.block_size - 1) / kv.block_size; };
  int64_t needed = 0;
  for (const v1::DraftSequence& seq : request.sequences()) {
    const int64_t k = std::max<int64_t>(seq.num_draft_tokens(), 1);
    const bool tree = seq.tree_nodes() > 0;
    // A tree's sequence keeps the committed tokens; each of its branches (two depths of
    // tree_width at a time) writes one block: a copy of a shared partial one, or a new one.
    if (tree) needed += 2 * int64_t{seq.tree_width()};
    const int64_t end = int64_t{seq.start_position()} + seq.tokens_size() + (tree ? 0 : k - 1);
    if (seq.fork_from() != 0) {
      // A branch shares its parent's blocks below start_position; writing a shared
      // partial block copies it first.
      const bool copy = seq.start_position() % kv.block_size != 0;
      needed += blocks(end) - blocks(seq.start_position()) + (copy ? 1 : 0);
      continue;
    }
    absl::StatusOr<int> cached = executor_->CachedLength(seq.sequence_id());
    const int64_t held = cached.ok() ? blocks(*cached) : 0;
    needed += blocks(end) - held;
  }
  if (needed > kv.free_blocks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache full: drafting needs ", needed, " more blocks of ", kv.block_size,
                     " tokens but only ", kv.free_blocks, " of ", kv.total_blocks,
                     " are free; release or shorten sequences"));
  }
  return absl::OkStatus();
}

absl::Status DraftEngine::NoLogitsError(const v1::DraftSequence& seq, uint64_t position) {
  return absl::InternalError(absl::StrCat("draft: sequence ", seq.sequence_id(),
                                          " has no finite logits at position ", position));
}

absl::Status DraftEngine::ForkBranches(const v1::DraftRequest& request) {
  for (const v1::DraftSequence& seq : request.sequences()) {
    if (seq.fork_from() == 0) continue;
    absl::Status status =
        executor_->Fork(seq.fork_from(), seq.sequence_id(), static_cast<int>(seq.start_position()));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// A sequence's share of one forward pass: its logit rows are [first_row, first_row + rows).
struct PassEntry {
  int seq = 0;
  int first_row = 0;
  int rows = 0;
};

// One pass under construction: the batch and each sequence's logit rows in it.
struct DraftEngine::Pass {
  std::vector<SequenceInput> batch;
  std::vector<PassEntry> entries;
  int rows = 0;

  void Add(int seq, SequenceInput in) {
    const int n = static_cast<int>(in.logit_indices.size());
    entries.push_back({seq, rows, n});
    rows += n;
    batch.push_back(std::move(in));
  }
  // One row per input (a tree's frontier, each node on its branch), as one entry.
  void AddRows(int seq, std::vector<SequenceInput> inputs) {
    entries.push_back({seq, rows, static_cast<int>(inputs.size())});
    rows += static_cast<int>(inputs.size());
    for (SequenceInput& in : inputs) batch.push_back(std::move(in));
  }
};

// The call's progress: the response so far, each sequence's next draft row settings
// (sampling, q size, seed, position of its next proposal) and its tree (trees only).
struct DraftEngine::DraftState {
  v1::DraftResponse response;
  std::vector<DraftRow> next_draft;
  std::vector<std::unique_ptr<DraftTreeBuilder>> trees;
};

namespace {

bool IsTree(const v1::DraftSequence& seq) { return seq.tree_nodes() > 0; }

// The worker-internal id of the branch that holds frontier node `slot` of `depth` of
// sequence `id`'s tree: bit 63 (no client id has it: the coordinator's use bits below
// 56), the depth's parity and the slot in bits 56..60, the id below. Two depths' branches
// live at a time (a node's branch forks from its parent's).
uint64_t TreeBranchId(uint64_t id, int depth, int slot) {
  const uint64_t tag = uint64_t((depth % 2) * 16 + slot);
  return (uint64_t{1} << 63) | (tag << 56) | (id & ((uint64_t{1} << 56) - 1));
}

}  // namespace

absl::StatusOr<v1::DraftResponse> DraftEngine::Draft(const v1::DraftRequest& request) {
  if (absl::Status status = CheckCapacity(request); !status.ok()) return status;
  if (absl::Status status = ForkBranches(request); !status.ok()) return status;
  absl::StatusOr<v1::DraftResponse> response = RunPasses(request);
  ReleaseTreeBranches(request);  // On success and on error alike.
  return response;
}

absl::StatusOr<v1::DraftResponse> DraftEngine::RunPasses(const v1::DraftRequest& request) {
  const int n = request.sequences_size();
  const double forward_ms_before = executor_->times().forward_ms;

  DraftState state;
  state.next_draft.resize(n);
  state.trees.resize(n);
  Pass pass;
  for (int s = 0; s < n; ++s) {
    const v1::DraftSequence& seq = request.sequences(s);
    state.response.add_sequences()->set_sequence_id(seq.sequence_id());
    DraftRow& row = state.next_draft[s];
    row.sampling = ToSamplingConfig(seq.sampling());
    row.q_size = seq.proposal_top_k() > 0 ? static_cast<int>(seq.proposal_top_k())
                                          : options_.default_proposal_top_k;
    row.coupled = seq.sampling().rule() == v1::ACCEPTANCE_RULE_COUPLED;
    row.seed = seq.sampling().seed();
    row.position = uint64_t{seq.start_position()} + seq.tokens_size();
    row.top = static_cast<int>(seq.num_top());
    if (IsTree(seq)) {
      row.q_size = 1;  // Tree nodes are point masses; only the top tokens matter.
      row.top = static_cast<int>(seq.tree_width());
      state.trees[s] = std::make_unique<DraftTreeBuilder>(seq.tree_width(), seq.num_draft_tokens(),
                                                          seq.tree_nodes());
    }
    SequenceInput in;
    in.seq_id = seq.sequence_id();
    in.start_position = static_cast<int>(seq.start_position());
    in.tokens.assign(seq.tokens().begin(), seq.tokens().end());
    // (No tokens: the model rejects the pass.)
    if (!in.tokens.empty()) in.logit_indices = {static_cast<int32_t>(in.tokens.size()) - 1};
    pass.Add(s, std::move(in));
  }
  for (int i = 0; !pass.batch.empty(); ++i) {
    std::vector<DraftRow> drafts;
    for (const PassEntry& e : pass.entries) {
      for (int r = 0; r < e.rows; ++r) {
        drafts.push_back(state.next_draft[e.seq]);
        drafts.back().row = e.first_row + r;
      }
    }
    std::vector<DraftProposal> proposals;
    DraftSampleConsumer sample(drafts, &proposals);
    if (absl::Status status = executor_->Forward(pass.batch, sample); !status.ok()) return status;
    Pass next;
    for (const PassEntry& e : pass.entries) {
      const v1::DraftSequence& seq = request.sequences(e.seq);
      absl::Span<const DraftProposal> rows(proposals.data() + e.first_row, e.rows);
      absl::Status status = IsTree(seq) ? GrowTree(seq, e.seq, rows, &state, &next)
                                        : ExtendChain(seq, e.seq, i, rows[0], &state, &next);
      if (!status.ok()) return status;
    }
    pass = std::move(next);
  }
  return Finish(request, std::move(state), forward_ms_before);
}

absl::Status DraftEngine::ExtendChain(const v1::DraftSequence& seq, int s, int i,
                                      const DraftProposal& proposal, DraftState* state,
                                      Pass* next) {
  if (!proposal.status.ok()) return NoLogitsError(seq, state->next_draft[s].position);
  v1::DraftedSequence* drafted = state->response.mutable_sequences(s);
  v1::ProposedToken* out = drafted->add_proposals();
  out->set_token(proposal.token);
  out->mutable_q_ids()->Assign(proposal.q.ids.begin(), proposal.q.ids.end());
  out->mutable_q_probs()->Assign(proposal.q.probs.begin(), proposal.q.probs.end());
  if (seq.num_top() > 0) {
    v1::TopTokens* top = drafted->add_top();
    top->mutable_ids()->Assign(proposal.top.ids.begin(), proposal.top.ids.end());
    top->mutable_probs()->Assign(proposal.top.probs.begin(), proposal.top.probs.end());
  }
  // Feed this proposal when the sequence needs another one.
  if (static_cast<uint32_t>(i + 1) < seq.num_draft_tokens()) {
    SequenceInput in;
    in.seq_id = seq.sequence_id();
    in.start_position = static_cast<int>(state->next_draft[s].position);
    in.tokens = {proposal.token};
    in.logit_indices = {0};
    next->Add(s, std::move(in));
  }
  ++state->next_draft[s].position;
  return absl::OkStatus();
}

absl::Status DraftEngine::GrowTree(const v1::DraftSequence& seq, int s,
                                   absl::Span<const DraftProposal> rows, DraftState* state,
                                   Pass* next) {
  std::vector<spec::SparseDistribution> top;
  for (const DraftProposal& proposal : rows) {
    if (!proposal.status.ok()) return NoLogitsError(seq, state->next_draft[s].position);
    top.push_back(state->next_draft[s].coupled ? CoupledChildren(proposal.token, proposal.top)
                                               : proposal.top);
  }
  DraftTreeBuilder& tree = *state->trees[s];
  tree.Grow(top);
  if (!tree.NeedsDistributions()) return absl::OkStatus();
  // Each frontier node is fed on its own branch, forked from its parent's (the root's:
  // the sequence, holding the committed context), so it attends to its path only.
  const int committed = static_cast<int>(seq.start_position()) + seq.tokens_size();
  std::vector<SequenceInput> inputs;
  for (int i = 0; i < tree.frontier_size(); ++i) {
    const DraftTreeFrontierNode node = tree.FrontierNode(i);
    const uint64_t parent = node.parent_slot < 0
                                ? seq.sequence_id()
                                : TreeBranchId(seq.sequence_id(), node.depth - 1, node.parent_slot);
    SequenceInput in;
    in.seq_id = TreeBranchId(seq.sequence_id(), node.depth, i);
    in.start_position = committed + node.depth - 1;
    absl::Status status = executor_->Fork(parent, in.seq_id, in.start_position);
    if (!status.ok()) return status;
    in.tokens = {node.token};
    in.logit_indices = {0};
    inputs.push_back(std::move(in));
  }
  ++state->next_draft[s].position;
  next->AddRows(s, std::move(inputs));
  return absl::OkStatus();
}

void DraftEngine::ReleaseTreeBranches(const v1::DraftRequest& request) {
  for (const v1::DraftSequence& seq : request.sequences()) {
    if (!IsTree(seq)) continue;
    for (int depth = 0; depth < 2; ++depth) {
      for (uint32_t slot = 0; slot < seq.tree_width(); ++slot) {
        const uint64_t id = TreeBranchId(seq.sequence_id(), depth, static_cast<int>(slot));
        if (executor_->CachedLength(id).ok()) executor_->Release(id).IgnoreError();
      }
    }
  }
}

absl::StatusOr<v1::DraftResponse> DraftEngine::Finish(const v1::DraftRequest& request,
                                                      DraftState state, double forward_ms_before) {
  for (int s = 0; s < request.sequences_size(); ++s) {
    const v1::DraftSequence& seq = request.sequences(s);
    if (state.trees[s] != nullptr) {
      WriteDraftTree(state.trees[s]->Result(), state.response.mutable_sequences(s));
    }
    absl::StatusOr<int> cached = executor_->CachedLength(seq.sequence_id());
    state.response.mutable_sequences(s)->set_cached_length(cached.ok() ? *cached : 0);
  }
  state.response.set_compute_ms(
      static_cast<float>(executor_->times().forward_ms - forward_ms_before));
  return std::move(state.response);
}

}  // namespace worker
}  // namespace tandem
