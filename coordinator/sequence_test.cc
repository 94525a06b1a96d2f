// Commit and output logic of a Sequence with the bundled tokenizer: text deltas,
// EOS, max_new_tokens, stop strings, statistics and target cache bookkeeping.
#include "coordinator/sequence.h"

#include <gtest/gtest.h>

#include "coordinator/proposers/prompt_lookup_proposer.h"

namespace tandem::coordinator {
namespace {

class SequenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::Load("models/target");
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
    end_of_turn_ = tokenizer_->PieceToId("<0x00>");  // A second stop id, as Llama-3 has.
    ASSERT_GE(end_of_turn_, 0);
  }

  std::unique_ptr<Sequence> Make(int max_new, std::vector<std::string> stop = {},
                                 bool return_ids = true) {
    ValidatedRequest r;
    r.speculation.method = v1::SPECULATION_METHOD_DRAFT;
    r.stop = std::move(stop);
    r.return_token_ids = return_ids;
    auto prompt = tokenizer_->Encode("def add(a, b):\n", true);
    EXPECT_TRUE(prompt.ok());
    channel_ = std::make_shared<OutputChannel>();
    return std::make_unique<Sequence>(7, r, std::vector<int32_t>(prompt->begin(), prompt->end()),
                                      max_new, tokenizer_.get(),
                                      std::vector<int>{tokenizer_->eos_id(), end_of_turn_},
                                      spec::ControllerConfig(), absl::Now(), channel_);
  }

  std::vector<int> Ids(const std::string& text) {
    auto ids = tokenizer_->Encode(text, false);
    EXPECT_TRUE(ids.ok());
    return *ids;
  }

  static v1::VerifiedSequence Verified(const std::vector<int>& committed, int accepted,
                                       int cached) {
    v1::VerifiedSequence v;
    for (int t : committed) v.add_committed(t);
    v.set_num_accepted(accepted);
    v.set_cached_length(cached);
    return v;
  }

  // Drains the channel: concatenated text, ids, and the final chunk if any.
  std::string Drain(std::vector<int>* ids, OutputChunk* final_chunk) {
    std::string text;
    for (OutputChunk& c : channel_->Pop(absl::ZeroDuration())) {
      text += c.text;
      ids->insert(ids->end(), c.token_ids.begin(), c.token_ids.end());
      if (c.final) *final_chunk = c;
    }
    return text;
  }

  int end_of_turn_ = -1;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::shared_ptr<OutputChannel> channel_;
};

TEST_F(SequenceTest, StreamedTextEqualsTheDecodedContinuation) {
  auto s = Make(100);
  const std::vector<int> body = Ids("    return a + b\n");
  ASSERT_GE(body.size(), 3u);
  const int prompt_len = s->prompt_length();
  // Commit in uneven steps, as verify steps do.
  size_t at = 0;
  int step = 0;
  while (at < body.size()) {
    const size_t n = std::min(body.size() - at, size_t(1 + step++ % 3));
    std::vector<int> committed(body.begin() + at, body.begin() + at + n);
    s->OnVerified(Verified(committed, n - 1, prompt_len + at + n - 1), n - 1, absl::Now());
    at += n;
  }
  std::vector<int> ids;
  OutputChunk final_chunk;
  std::string text = Drain(&ids, &final_chunk);
  EXPECT_EQ(ids, body);
  EXPECT_EQ(text, "    return a + b\n");
  EXPECT_FALSE(s->finished());
  EXPECT_EQ(s->generated(), static_cast<int>(body.size()));
  EXPECT_EQ(s->target_cached, static_cast<int>(s->tokens().size()) - 1);
}

TEST_F(SequenceTest, EosEndsTheSequenceAndLaterTokensAreDropped) {
  auto s = Make(100);
  std::vector<int> committed = Ids("    pass");
  committed.push_back(tokenizer_->eos_id());
  committed.push_back(committed[0]);  // After EOS: must be dropped.
  s->OnVerified(Verified(committed, committed.size() - 1, 0), committed.size() - 1, absl::Now());
  std::vector<int> ids;
  OutputChunk final_chunk;
  std::string text = Drain(&ids, &final_chunk);
  EXPECT_TRUE(s->finished());
  EXPECT_TRUE(final_chunk.final);
  EXPECT_EQ(final_chunk.finish_reason, v1::FINISH_REASON_EOS);
  EXPECT_EQ(text, "    pass");
  EXPECT_EQ(s->generated(), static_cast<int>(committed.size()) - 1);  // EOS counted.
  EXPECT_EQ(final_chunk.stats.generated_tokens(), committed.size() - 1);
}

TEST_F(SequenceTest, EveryStopIdEndsTheSequenceUnlessEosIsIgnored) {
  auto s = Make(100);
  std::vector<int> committed = Ids("    pass");
  const int text_tokens = static_cast<int>(committed.size());
  committed.push_back(end_of_turn_);
  committed.push_back(committed[0]);
  s->OnVerified(Verified(committed, committed.size() - 1, 0), committed.size() - 1, absl::Now());
  std::vector<int> ids;
  OutputChunk final_chunk;
  EXPECT_EQ(Drain(&ids, &final_chunk), "    pass");
  EXPECT_TRUE(s->finished());
  EXPECT_EQ(final_chunk.finish_reason, v1::FINISH_REASON_EOS);
  EXPECT_EQ(s->generated(), text_tokens + 1);
}

TEST_F(SequenceTest, MaxNewTokensTruncatesAStep) {
  auto s = Make(3);
  const std::vector<int> committed = Ids("    return a + b");
  ASSERT_GT(committed.size(), 3u);
  s->OnVerified(Verified(committed, committed.size() - 1, 0), committed.size() - 1, absl::Now());
  std::vector<int> ids;
  OutputChunk final_chunk;
  Drain(&ids, &final_chunk);
  EXPECT_EQ(ids, std::vector<int>(committed.begin(), committed.begin() + 3));
  EXPECT_EQ(final_chunk.finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(s->generated(), 3);
}

TEST_F(SequenceTest, StopStringEndsAndIsNotEmitted) {
  auto s = Make(100, {"+ b"});
  const std::vector<int> committed = Ids("    return a + b\n    x = 1");
  s->OnVerified(Verified(committed, committed.size() - 1, 0), committed.size() - 1, absl::Now());
  std::vector<int> ids;
  OutputChunk final_chunk;
  std::string text = Drain(&ids, &final_chunk);
  EXPECT_EQ(final_chunk.finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_EQ(text, "    return a ");
}

TEST_F(SequenceTest, StatisticsCountProposedAndAcceptedCandidates) {
  auto s = Make(100);
  // The target accepts 1 of 3 candidates, then corrects with 99.
  s->OnVerified(Verified({11, 99}, 1, 0), 3, absl::Now());
  const v1::RequestStats st = s->PublicStats(absl::Now());
  EXPECT_EQ(st.draft_tokens_proposed(), 3u);
  EXPECT_EQ(st.draft_tokens_accepted(), 1u);
  EXPECT_FLOAT_EQ(st.acceptance_rate(), 1.0f / 3);
  EXPECT_FLOAT_EQ(st.mean_accepted_length(), 2.0f);
}

TEST_F(SequenceTest, ATreeCountsItsDepthAsProposedAndTracksNodesPerDepth) {
  auto s = Make(100);
  const PromptLookupProposer trees(/*max_branches=*/2);
  s->AttachProposers({&trees});
  EXPECT_DOUBLE_EQ(s->nodes_per_depth(0, false), 1.0);
  // Two paths of depth 2 (4 nodes); the target accepts 1 along a path, then corrects.
  s->candidates.method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
  for (int t : {11, 12, 13, 14}) s->candidates.tokens.push_back(PointMassProposal(t));
  s->candidates.parents = {-1, 0, -1, 2};
  s->OnVerified(Verified({13, 99}, 1, 0), s->candidates.depth(), absl::Now());
  const v1::RequestStats st = s->PublicStats(absl::Now());
  EXPECT_EQ(st.draft_tokens_proposed(), 2u);
  EXPECT_EQ(st.draft_tokens_accepted(), 1u);
  EXPECT_DOUBLE_EQ(s->nodes_per_depth(0, false), 0.9 + 0.1 * 2);
  EXPECT_DOUBLE_EQ(s->nodes_per_depth(0, true), 1.0);  // Not the tree option's steps.
  EXPECT_EQ(st.tree_steps(), 0u);
}

TEST_F(SequenceTest, ATreeOptionStepIsItsOwnEvidence) {
  auto s = Make(100);
  const PromptLookupProposer trees(/*max_branches=*/2);
  spec::PositionAcceptance chains_prior(8, 1.0), trees_prior(8, 1.0);
  s->AttachProposers({&trees}, {{&chains_prior, &trees_prior}});
  s->candidates.method = v1::SPECULATION_METHOD_PROMPT_LOOKUP;
  s->candidates.tree_option = true;
  for (int t : {11, 12, 13, 14}) s->candidates.tokens.push_back(PointMassProposal(t));
  s->candidates.parents = {-1, 0, -1, 2};
  s->OnVerified(Verified({13, 14, 99}, 2, 0), s->candidates.depth(), absl::Now());
  EXPECT_EQ(s->PublicStats(absl::Now()).tree_steps(), 1u);
  EXPECT_DOUBLE_EQ(s->nodes_per_depth(0, true), 0.9 + 0.1 * 2);
  EXPECT_DOUBLE_EQ(s->nodes_per_depth(0, false), 1.0);
  EXPECT_DOUBLE_EQ(trees_prior.accepts(2), 1.0);  // The server-wide tree evidence.
  EXPECT_DOUBLE_EQ(chains_prior.trials(1), 0.0);
  EXPECT_GT(s->controller().Acceptance(ControllerOptionOf(0, true), 1, &trees_prior),
            s->controller().Acceptance(ControllerOptionOf(0, false), 1, &chains_prior));
}

TEST_F(SequenceTest, AcceptedCountsOnlyWhatReachedTheOutput) {
  // 4 candidates accepted, but max_new_tokens ends the output after 2 tokens.
  auto s = Make(2);
  s->OnVerified(Verified({11, 12, 13, 14, 15}, 4, 0), 4, absl::Now());
  const v1::RequestStats st = s->PublicStats(absl::Now());
  EXPECT_EQ(st.generated_tokens(), 2u);
  EXPECT_EQ(st.draft_tokens_accepted(), 2u);
}

TEST_F(SequenceTest, FailPushesTheErrorOnce) {
  auto s = Make(100);
  s->Fail(absl::UnavailableError("target down"), absl::Now());
  s->Fail(absl::InternalError("second"), absl::Now());
  auto chunks = channel_->Pop(absl::ZeroDuration());
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(chunks[0].final);
  EXPECT_TRUE(absl::IsUnavailable(chunks[0].status));
}

}  // namespace
}  // namespace tandem::coordinator
