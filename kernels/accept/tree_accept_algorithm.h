// The acceptance of one verified token tree as block-parallel code: the semantics of
// spec::ProcessLogits + spec::AcceptTree + spec::CommittedLogProb (spec/tree_acceptance.h),
// written against a `Block` (row_sampling.h) like AcceptChain (accept_algorithm.h), so
// it runs in the CUDA kernel (kernels/cuda/accept_kernels.cu, one block per sequence)
// and, on the host, with HostBlock. AcceptSequence picks the chain or the tree form.
//
// Tree k's rows: first_row + 0 = p_root, first_row + v + 1 = p after node v. Per rule:
//   greedy, coupled  walk from the root: process p_v, t = argmax / GumbelSample at
//                    position + depth(v); follow the child whose token is t, else emit t.
//   rejection        walk from the root: at v, the children in rank order against the
//                    residual P (p_v, then max(0, P - q_c) renormalised per refusal:
//                    SubtractQ, two alternating workspaces so a residual without mass
//                    keeps P), draws keyed (seed, sample_index + depth(v), rank); when
//                    all are refused the kResample sample from P.
//   lossy rules      the nodes in parent order: each reached node's row is processed
//                    once and its children tested (PassesLossyTest, i = depth, K = D);
//                    node_values[j] holds the path likelihood of a passing node (NaN:
//                    not reached); the best node is the deepest, then likeliest, then
//                    lowest index, as spec's index-order scan; then the correction or
//                    bonus from its row. Log-probabilities, when asked, re-process the
//                    path's rows.
// Differences from the reference are those of AcceptChain (the order of double sums),
// plus the device's log in the lossy rules' likelihood ties.
#ifndef TANDEM_KERNELS_ACCEPT_TREE_ACCEPT_ALGORITHM_H_
#define TANDEM_KERNELS_ACCEPT_TREE_ACCEPT_ALGORITHM_H_

#include <cstdint>

#include "kernels/accept/accept_algorithm.h"
#include "kernels/accept/packed_types.h"
#include "kernels/accept/row_sampling.h"
#include "spec/host_device.h"
#include "spec/philox.h"

namespace tandem {
namespace accept {
namespace detail {

// A tree of `view` (sequence c) and what its acceptance writes.
template <class Block>
class TreeWalk {
 public:
  TANDEM_HOST_DEVICE TreeWalk(Block& block, const BatchView& view, int c)
      : block_(block),
        view_(view),
        chain_(view.chains[c]),
        c_(c),
        n_(view.logits.vocab),
        k_(chain_.num_proposals),
        probs_(view.probs + size_t(c) * n_),
        w_(view.weights + size_t(c) * n_),
        r_(view.residual == nullptr ? nullptr : view.residual + size_t(c) * n_),
        parents_(view.parents + chain_.proposal_begin),
        tokens_(view.tokens + chain_.proposal_begin),
        values_(view.node_values + chain_.proposal_begin) {}

  TANDEM_HOST_DEVICE void Run() {
    switch (chain_.rule) {
      case kRuleGreedy:
      case kRuleCoupled:
        return FollowTargetTokens(chain_.rule == kRuleCoupled);
      case kRuleRejection:
        return RecursiveRejection();
      default:
        return LongestPassingPath();
    }
  }

 private:
  TANDEM_HOST_DEVICE int Depth(int node) const {
    int depth = 0;
    for (int v = node; v >= 0; v = parents_[v]) ++depth;
    return depth;
  }
  TANDEM_HOST_DEVICE bool HasChild(int v) const {
    for (int j = v + 1; j < k_; ++j) {
      if (parents_[j] == v) return true;
    }
    return false;
  }
  // probs <- the processed distribution after node v (-1: the root).
  TANDEM_HOST_DEVICE void Process(int v) {
    const size_t row = size_t(chain_.first_row) + size_t(v + 1);
    const BatchView& view = view_;
    ProcessRow(
        block_, n_, [&view, row](int i) { return view.logits.At(row, i); }, chain_.sampling, probs_,
        w_);
  }
  // Commits `token` drawn from the row after v (probs holds it) as committed token
  // number committed_; node >= 0 also records it as accepted node number accepted_.
  TANDEM_HOST_DEVICE void Commit(int v, int token, int node) {
    double logprob = 0.0;
    if (chain_.want_logprobs) {
      const size_t row = size_t(chain_.first_row) + size_t(v + 1);
      const BatchView& view = view_;
      logprob = CommittedLogProb(
          block_, n_, [&view, row](int i) { return view.logits.At(row, i); }, probs_, token,
          !(chain_.sampling.temperature > 0.0f));
    }
    if (block_.leader()) {
      view_.out_tokens[chain_.output_begin + committed_] = token;
      view_.out_logprobs[chain_.output_begin + committed_] = static_cast<float>(logprob);
      if (node >= 0) view_.out_path[chain_.output_begin + accepted_] = node;
    }
    ++committed_;
    if (node >= 0) ++accepted_;
  }
  // Writes the status: success, or no mass in the distribution after node v.
  TANDEM_HOST_DEVICE void Finish(bool ok, int v) {
    if (!block_.leader()) return;
    PackedStatus status;
    status.error_index = ok ? -1 : v + 1;
    status.num_committed = ok ? committed_ : 0;
    status.num_accepted = ok ? accepted_ : 0;
    view_.out_status[c_] = status;
  }
  TANDEM_HOST_DEVICE int ChildWithToken(int v, int token) const {
    for (int j = v + 1; j < k_; ++j) {
      if (parents_[j] == v && tokens_[j] == token) return j;
    }
    return -1;
  }

  TANDEM_HOST_DEVICE void FollowTargetTokens(bool coupled) {
    for (int v = -1;;) {
      Process(v);
      int token = coupled
                      ? GumbelArgMax(block_, n_, probs_, chain_.seed, chain_.position + accepted_)
                      : ArgMax(block_, n_, [&](int i) { return double(probs_[i]); });
      if (token < 0) return Finish(false, v);
      const int child = ChildWithToken(v, token);
      if (child < 0) {
        // Greedy emits the argmax only if it is positive (spec::EmitToken).
        if (!coupled && !(probs_[token] > 0.0f)) return Finish(false, v);
        Commit(v, token, -1);
        return Finish(true, v);
      }
      Commit(v, token, child);
      v = child;
    }
  }

  TANDEM_HOST_DEVICE void RecursiveRejection() {
    for (int v = -1;;) {
      Process(v);
      const uint64_t index = chain_.sample_index + accepted_;
      // P: probs until the first refusal with mass left, then `current` / mass.
      bool from_probs = true;
      double mass = 1.0;
      double *current = w_, *next = r_;
      int accepted = -1;
      uint32_t rank = 0;
      for (int j = v + 1; j < k_ && accepted < 0; ++j) {
        if (parents_[j] != v) continue;
        const int token = tokens_[j];
        const double q_token = QProbOf(view_, chain_.proposal_begin + j, token);
        const double u = spec::philox::Uniform(chain_.seed, kStreamAccept, index, rank++);
        const double p_token = from_probs ? double(probs_[token]) : current[token] / mass;
        const double ratio = p_token / q_token;
        if (u < (ratio < 1.0 ? ratio : 1.0)) {
          accepted = j;
          break;
        }
        const double left = SubtractQ(block_, view_, chain_.proposal_begin + j, n_, probs_,
                                      from_probs, current, mass, next);
        if (left > 0.0) {
          double* swap = current;
          current = next;
          next = swap;
          mass = left;
          from_probs = false;
        }
      }
      if (accepted >= 0) {
        Commit(v, tokens_[accepted], accepted);
        v = accepted;
        continue;
      }
      const double u = spec::philox::Uniform(chain_.seed, kStreamResample, index, 0);
      const double* p = current;
      const float* pf = probs_;
      const int token = from_probs ? SampleInverseCdf(
                                         block_, n_, [&](int i) { return double(pf[i]); }, u)
                                   : SampleInverseCdf(
                                         block_, n_, [&](int i) { return p[i]; }, u);
      if (token < 0) return Finish(false, v);
      Commit(v, token, -1);
      return Finish(true, v);
    }
  }

  // Marks every node not reached (node_values NaN), then scores the children of each
  // reached node; returns the best node (-1: the root).
  TANDEM_HOST_DEVICE int BestPassingNode(int max_depth) {
    double* values = values_;
    block_.ForEach(k_, [&](int j) { values[j] = FromBits(0x7ff8000000000000ULL); });
    int best = -1, best_depth = 0;
    double best_value = 0.0;
    for (int v = -1; v < k_; ++v) {
      if ((v >= 0 && IsNan(values[v])) || !HasChild(v)) continue;
      Process(v);
      const double base = v < 0 ? 0.0 : values[v];
      const int depth = Depth(v) + 1;
      for (int j = v + 1; j < k_; ++j) {
        if (parents_[j] != v) continue;
        const int token = tokens_[j];
        const double p_token = probs_[token];
        const double q_token = QProbOf(view_, chain_.proposal_begin + j, token);
        if (!PassesLossyTest(block_, chain_, n_, probs_, p_token, q_token, depth, max_depth)) {
          continue;
        }
        const double value = base + Log(p_token);
        block_.ForEach(1, [&](int) { values[j] = value; });
        if (best < 0 || depth > best_depth ||
            (depth == best_depth && (value > best_value || (value == best_value && j < best)))) {
          best = j;
          best_depth = depth;
          best_value = value;
        }
      }
    }
    return best;
  }

  TANDEM_HOST_DEVICE void LongestPassingPath() {
    int max_depth = 0;
    for (int j = 0; j < k_; ++j) {
      const int depth = Depth(j);
      if (depth > max_depth) max_depth = depth;
    }
    const int best = BestPassingNode(max_depth);
    // The path root side first: node at depth d is the (depth(best) - d)-th ancestor.
    const int length = best < 0 ? 0 : Depth(best);
    for (int d = 0; d < length; ++d) {
      int node = best;
      for (int up = d + 1; up < length; ++up) node = parents_[node];
      if (chain_.want_logprobs) Process(parents_[node]);
      Commit(parents_[node], tokens_[node], node);
    }
    Process(best);
    const bool correction = HasChild(best);
    const bool use_argmax = correction && chain_.rule == kRuleTypical;
    const int token =
        EmitFromRow(block_, chain_, n_, probs_, use_argmax, chain_.sample_index + length);
    if (token < 0) return Finish(false, best);
    Commit(best, token, -1);
    Finish(true, best);
  }

  Block& block_;
  const BatchView& view_;
  const PackedChain chain_;
  const int c_, n_, k_;
  float* probs_;
  double *w_, *r_;
  const int32_t* parents_;
  const int32_t* tokens_;
  double* values_;
  int committed_ = 0, accepted_ = 0;
};

}  // namespace detail

// Runs the acceptance of tree `c` of `view` (chain.is_tree) on `block` and writes its
// outputs: out_tokens / out_logprobs / out_path slots and out_status[c] (error_index =
// the row, v + 1, of a distribution after node v without mass).
template <class Block>
TANDEM_HOST_DEVICE void AcceptTree(Block& block, const BatchView& view, int c) {
  detail::TreeWalk<Block> walk(block, view, c);
  walk.Run();
}

// AcceptTree for a tree, AcceptChain for a chain.
template <class Block>
TANDEM_HOST_DEVICE void AcceptSequence(Block& block, const BatchView& view, int c) {
  if (view.chains[c].is_tree) {
    AcceptTree(block, view, c);
  } else {
    AcceptChain(block, view, c);
  }
}

}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_TREE_ACCEPT_ALGORITHM_H_
