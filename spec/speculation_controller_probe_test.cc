// The controller's probes: a probe paid while its worker catches up is completed once,
// expensive probes are rarer, a probe pays its switch cost whole, and a short request
// takes no probe its remaining tokens could not repay.
#include <gtest/gtest.h>

#include "spec/speculation_controller.h"
#include "spec/speculation_controller_test_util.h"

namespace tandem {
namespace spec {
namespace {

TEST(SpeculationControllerTest, ADeferredProbeIsPaidOnceAndCompletedNext) {
  ControllerConfig config;
  config.probe_fraction = 1;  // A probe may run every step.
  SpeculationController controller(config);
  // Option 0 pays and becomes the incumbent; option 1 has no evidence: a probe.
  ControllerInputs in = OneOption(0.0, 0.02, 0.0);
  in.options.push_back({true, 8, 0.0, 0.0, nullptr});
  ControllerChoice first = controller.Choose(in);
  controller.Observe(first, first.option, first.k, first.k);
  const ControllerChoice probe = controller.Choose(in);
  ASSERT_TRUE(probe.probe);
  EXPECT_FALSE(probe.prepaid);
  EXPECT_GE(probe.cost, 1.0);
  ControllerChoice deferred = probe;
  deferred.deferred = true;  // Its worker is fed first: paid now, completed next.
  controller.Observe(deferred, -1, 0, 0);
  const ControllerChoice again = controller.Choose(in);
  EXPECT_TRUE(again.probe);
  EXPECT_TRUE(again.prepaid);
  EXPECT_EQ(again.option, probe.option);
  controller.Observe(again, again.option, again.k, 0);
  EXPECT_FALSE(controller.Choose(in).probe);  // Spent: one refill does not cover it.
}

TEST(SpeculationControllerTest, ExpensiveProbesAreRarer) {
  // One uncertain option, probed as often as the bucket allows: each probe is deferred
  // once (its worker catches up) and then completed without evidence (it stays
  // uncertain). The bucket refills by 1 a step and each probe drains its cost: 1 plain
  // step without a switch cost, 1.2 with one. In a batch of n the bucket refills by
  // 1/n^2 a step: a probe slows the whole batch's step to find a gain for one sequence.
  auto probes = [](double switch_cost, int batch = 1) {
    ControllerConfig config;
    config.probe_fraction = 1;
    config.initial_acceptance = 0.1;  // Mean S below the enter margin, optimistic above.
    SpeculationController controller(config);
    ControllerInputs in = OneOption(0.0, 0.0, 0.0);
    in.options[0].switch_cost = switch_cost;
    in.batch = batch;
    int n = 0;
    for (int t = 0; t < 120; ++t) {
      ControllerChoice c = controller.Choose(in);
      if (c.probe && !c.prepaid) {
        ++n;
        EXPECT_NEAR(c.cost, 1 + switch_cost, 1e-9);
      }
      c.deferred = c.probe && !c.prepaid;
      controller.Observe(c, -1, 0, 0);
    }
    return n;
  };
  const int cheap = probes(0), expensive = probes(0.2);
  EXPECT_NEAR(cheap, 60, 2);         // Every other step.
  EXPECT_NEAR(expensive, 40, 2);     // Every third step.
  EXPECT_NEAR(probes(0, 2), 24, 2);  // Every fifth step (4 fills of 1/4, the cap at 1 loses one).
  EXPECT_NEAR(probes(0, 4), 7, 1);   // Every 17th step (16 fills of 1/16, and the deferral).
}

TEST(SpeculationControllerTest, AProbePaysItsSwitchCostWhole) {
  ControllerConfig config;
  config.probe_fraction = 1;
  SpeculationController controller(config);
  ControllerInputs in = OneOption(0.0, 0.02, 0.0);
  in.options.push_back({true, 8, 0.0, 0.0, nullptr});
  in.tokens_left = 100000;
  ControllerChoice first = controller.Choose(in);
  controller.Observe(first, first.option, first.k, first.k);
  ASSERT_TRUE(controller.Choose(in).probe);
  in.options[1].switch_cost = 10;  // Spread over 10^5 tokens it is nothing; whole, too much.
  EXPECT_FALSE(controller.Choose(in).probe);
}

TEST(SpeculationControllerTest, AProbeMustBeRepayableWithinTheTokensLeft) {
  // An uncertain option whose probe costs 1.2 plain steps (a catch-up of 0.2), the
  // bucket filling by 1/32 a step: it reaches 1 at step 32, when a 36-token request could
  // collect only 4/32 more (1.125 < 1.2: never probes) and a 40-token one 8/32 (probes
  // once), when the server knows the method. Without the rule both would probe into a
  // debt they never repay.
  auto probes = [](int tokens, bool server_knows = true) {
    ControllerConfig config;
    config.initial_acceptance = 0.1;  // Mean S below the enter margin, optimistic above.
    SpeculationController controller(config);
    ControllerInputs in = OneOption(0.0, 0.0, 0.0);
    in.options[0].switch_cost = 0.2;
    // The server knows the method (its estimate, 0.1, from 100 trials).
    PositionAcceptance server(8, 1.0);
    for (int i = 0; i < 100; ++i) server.Observe(1, i % 10 == 0 ? 1 : 0);
    if (server_knows) in.options[0].server = &server;
    int n = 0;
    for (int t = 0; t < tokens; ++t) {
      in.tokens_left = tokens - t;
      ControllerChoice c = controller.Choose(in);
      if (c.probe && !c.prepaid) {
        ++n;
        EXPECT_NEAR(c.cost, 1.2, 1e-9);
      }
      // Deferred once (its worker catches up), then completed without evidence: it
      // stays uncertain.
      c.deferred = c.probe && !c.prepaid;
      controller.Observe(c, -1, 0, 0);
    }
    return n;
  };
  EXPECT_EQ(probes(36), 0);
  EXPECT_EQ(probes(40), 1);
  // A server that has seen little of the method lets the short request probe into
  // debt: what the probe finds seeds every later request's estimate.
  EXPECT_EQ(probes(36, false), 1);
  const int long_run = probes(1024);
  EXPECT_GE(long_run, 20);
  EXPECT_LE(long_run, 1024 / 32);  // At most probe_fraction of its steps.
}

}  // namespace
}  // namespace spec
}  // namespace tandem
