// Test fixture of the draft engine tests (draft_engine_test.cc, draft_tree_test.cc): a
// DraftEngine over the wide-vocabulary test checkpoint, and a second copy of the model
// as the independent reference.
#ifndef TANDEM_WORKER_DRAFT_ENGINE_TEST_FIXTURE_H_
#define TANDEM_WORKER_DRAFT_ENGINE_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "worker/draft_engine.h"
#include "worker/test_util.h"

namespace tandem::worker {

class DraftEngineFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = testing::LoadTestExecutor(testing::kWideVocabCheckpoint);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    model_ = *std::move(loaded);
    engine_ = std::make_unique<DraftEngine>(model_.executor.get(), DraftEngineOptions{});
    auto reference = testing::LoadTestModel(testing::kWideVocabCheckpoint);
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = *std::move(reference);
  }

  testing::TestExecutor model_;
  std::unique_ptr<DraftEngine> engine_;
  testing::TestModel reference_;
};

}  // namespace tandem::worker

#endif  // TANDEM_WORKER_DRAFT_ENGINE_TEST_FIXTURE_H_
