// Inputs shared by the speculation controller's tests.
#ifndef TANDEM_SPEC_SPECULATION_CONTROLLER_TEST_UTIL_H_
#define TANDEM_SPEC_SPECULATION_CONTROLLER_TEST_UTIL_H_

#include "spec/cost_model.h"
#include "spec/speculation_controller.h"

namespace tandem {
namespace spec {

// One usable option with draft cost c, overhead o and K <= max_k, and
// nu(K) = 1 + slope K.
inline ControllerInputs OneOption(double c, double slope, double o, int max_k = 8) {
  ControllerInputs in;
  in.options.push_back({true, max_k, c, o, nullptr});
  in.verify_cost = LinearVerifyCost(slope);
  return in;
}

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_SPECULATION_CONTROLLER_TEST_UTIL_H_
