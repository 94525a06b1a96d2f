#include "coordinator/planning_batch.h"

#include <algorithm>

namespace tandem::coordinator {

PlanningBatch::PlanningBatch(int window) : window_(std::max(1, window)) {}

int PlanningBatch::Next(int running) {
  recent_.push_back(std::max(0, running));
  while (static_cast<int>(recent_.size()) > window_) recent_.pop_front();
  return *std::max_element(recent_.begin(), recent_.end());
}

}  // namespace tandem::coordinator
