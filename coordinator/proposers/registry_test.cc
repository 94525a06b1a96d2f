#include "coordinator/proposers/registry.h"

#include <gtest/gtest.h>

namespace tandem::coordinator {
namespace {

using v1::SpeculationMethod;

std::vector<SpeculationMethod> Methods(const std::vector<const Proposer*>& chain) {
  std::vector<SpeculationMethod> out;
  for (const Proposer* p : chain) out.push_back(p->method());
  return out;
}

TEST(ProposerRegistryTest, ServedMethodsAndChainsFollowTheConfiguration) {
  ProposerConfig config;
  config.draft_worker = true;
  ProposerRegistry with_draft(config);
  EXPECT_EQ(with_draft.served_methods(),
            (std::vector<SpeculationMethod>{v1::SPECULATION_METHOD_DRAFT,
                                            v1::SPECULATION_METHOD_PROMPT_LOOKUP,
                                            v1::SPECULATION_METHOD_LOOKAHEAD}));
  EXPECT_EQ(
      with_draft.listed_methods(),
      (std::vector<SpeculationMethod>{
          v1::SPECULATION_METHOD_AUTO, v1::SPECULATION_METHOD_NONE, v1::SPECULATION_METHOD_DRAFT,
          v1::SPECULATION_METHOD_PROMPT_LOOKUP, v1::SPECULATION_METHOD_LOOKAHEAD}));
  // AUTO: the draft first, prompt lookup when it cannot be used; never Lookahead.
  EXPECT_EQ(Methods(with_draft.ChainFor(v1::SPECULATION_METHOD_AUTO)),
            (std::vector<SpeculationMethod>{v1::SPECULATION_METHOD_DRAFT,
                                            v1::SPECULATION_METHOD_PROMPT_LOOKUP}));
  EXPECT_EQ(Methods(with_draft.ChainFor(v1::SPECULATION_METHOD_DRAFT)),
            std::vector<SpeculationMethod>{v1::SPECULATION_METHOD_DRAFT});
  EXPECT_TRUE(with_draft.ChainFor(v1::SPECULATION_METHOD_NONE).empty());

  // Lookahead needs no draft worker.
  ProposerRegistry without(ProposerConfig{});
  EXPECT_EQ(without.served_methods(),
            (std::vector<SpeculationMethod>{v1::SPECULATION_METHOD_PROMPT_LOOKUP,
                                            v1::SPECULATION_METHOD_LOOKAHEAD}));
  EXPECT_EQ(Methods(without.ChainFor(v1::SPECULATION_METHOD_LOOKAHEAD)),
            std::vector<SpeculationMethod>{v1::SPECULATION_METHOD_LOOKAHEAD});
  EXPECT_TRUE(without.ChainFor(v1::SPECULATION_METHOD_DRAFT).empty());
  EXPECT_TRUE(without.ChainFor(v1::SPECULATION_METHOD_MEDUSA).empty());
}

}  // namespace
}  // namespace tandem::coordinator
