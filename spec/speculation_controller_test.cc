#include "spec/speculation_controller.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "spec/cost_model.h"
#include "spec/speculation_controller_test_util.h"

namespace tandem {
namespace spec {
namespace {

TEST(ValidateControllerConfigTest, NamesBadFields) {
  EXPECT_TRUE(ValidateControllerConfig(ControllerConfig()).ok());
  auto bad = [](auto edit, const char* field) {
    ControllerConfig c;
    edit(c);
    const absl::Status s = ValidateControllerConfig(c);
    EXPECT_FALSE(s.ok()) << field;
    EXPECT_NE(std::string(s.message()).find(field), std::string::npos) << s;
  };
  bad([](ControllerConfig& c) { c.max_k = 0; }, "max_k");
  bad([](ControllerConfig& c) { c.initial_acceptance = 1.5; }, "initial_acceptance");
  bad([](ControllerConfig& c) { c.prior_weight = 0; }, "prior_weight");
  bad([](ControllerConfig& c) { c.forgetting = 0; }, "forgetting");
  bad([](ControllerConfig& c) { c.switch_margin = -1; }, "switch_margin");
  bad([](ControllerConfig& c) { c.enter_margin = -0.1; }, "enter_margin");
  bad([](ControllerConfig& c) { c.tree_margin = -0.1; }, "tree_margin");
  bad([](ControllerConfig& c) { c.probe_fraction = 2; }, "probe_fraction");
  bad([](ControllerConfig& c) { c.probe_max_k = 0; }, "probe_max_k");
  bad([](ControllerConfig& c) { c.server_known_trials = -1; }, "server_known_trials");
}

// Costs under which drafting models a gain of a few tens of percent at acceptance 0.6.
ControllerInputs CostlyDraftForEntry() { return OneOption(0.05, 0.1, 0.1); }

TEST(SpeculationControllerTest, FirstChoiceIsTheModelledBestK) {
  ControllerConfig config;
  config.initial_acceptance = 0.8;
  SpeculationController controller(config);
  const ControllerInputs in = OneOption(0.05, 0.02, 0.05);
  // Independent reference: the scalar cost model at the prior's alpha.
  CostModel model{0.05, LinearVerifyCost(0.02), 0.05};
  const DraftLengthChoice expected = BestDraftLength(0.8, model, 8, false);
  const ControllerChoice c = controller.Choose(in);
  EXPECT_EQ(c.option, 0);
  EXPECT_EQ(c.k, expected.k);
  EXPECT_NEAR(c.speedup, expected.speedup, 1e-9);
  EXPECT_FALSE(c.probe);
}

TEST(SpeculationControllerTest, ReportsTheUncalibratedModelNextToTheChargedOne) {
  ControllerConfig config;
  config.initial_acceptance = 0.8;
  const ControllerInputs plain_costs = OneOption(0.05, 0.02, 0.05);
  ControllerInputs charged = plain_costs;
  charged.options[0].cost_factor = 1.2;
  const ControllerChoice free = SpeculationController(config).Choose(plain_costs);
  const ControllerChoice c = SpeculationController(config).Choose(charged);
  ASSERT_EQ(c.option, 0);
  EXPECT_NEAR(free.uncalibrated_speedup, free.speedup, 1e-12);
  // The charged choice costs 1.2 times as much a step; its uncalibrated S is the model's
  // own value at the same K, as if the factor were 1.
  const CostModel model{0.05, LinearVerifyCost(0.02), 0.05};
  EXPECT_NEAR(c.uncalibrated_speedup, ModelledSpeedup(0.8, c.k, model, false), 1e-9);
  EXPECT_NEAR(c.speedup * 1.2, c.uncalibrated_speedup, 1e-9);
  const ControllerChoice off = SpeculationController(config).Choose(OneOption(5, 1, 5));
  EXPECT_EQ(off.option, -1);
  EXPECT_EQ(off.uncalibrated_speedup, 1.0);
}

TEST(SpeculationControllerTest, ATreeIsChargedForItsNodes) {
  ControllerConfig config;
  config.initial_acceptance = 0.8;
  const ControllerInputs chain = OneOption(0.0, 0.05, 0.0);
  ControllerInputs tree = chain;
  tree.options[0].nodes_per_depth = 3.0;  // Three nodes verified per unit of depth.
  const ControllerChoice c1 = SpeculationController(config).Choose(chain);
  const ControllerChoice c3 = SpeculationController(config).Choose(tree);
  ASSERT_GE(c3.k, 1);
  EXPECT_LE(c3.k, c1.k);
  EXPECT_LT(c3.speedup, c1.speedup);
  // Tokens follow the depth, nu the nodes: E(0.8, K) / nu(3K).
  EXPECT_NEAR(c3.speedup, ExpectedTokensPerStep(0.8, c3.k) / (1 + 0.05 * 3 * c3.k), 1e-9);
}

// A chain and a tree of the same proposer, the tree modelling S about 8 % above the
// chain's: chosen only when the tree margin is below that gain, and its reported S is
// the model's either way.
TEST(SpeculationControllerTest, ATreeMustBeatTheChainByTheTreeMargin) {
  ControllerConfig config;
  config.initial_acceptance = 0.8;
  ControllerInputs in = OneOption(0.0, 0.05, 0.0);
  in.options.push_back(in.options[0]);
  in.options[1].tree = true;
  in.options[1].nodes_per_depth = 1.0;   // Same cost per depth...
  in.options[1].cost_factor = 1 / 1.08;  // ...but modelled 8 % cheaper: S 8 % higher.
  const ControllerChoice chain_only =
      SpeculationController(config).Choose(OneOption(0.0, 0.05, 0.0));
  config.tree_margin = 0.15;
  const ControllerChoice with_margin = SpeculationController(config).Choose(in);
  EXPECT_EQ(with_margin.option, 0);
  EXPECT_NEAR(with_margin.speedup, chain_only.speedup, 1e-12);
  config.tree_margin = 0.05;
  const ControllerChoice small_margin = SpeculationController(config).Choose(in);
  EXPECT_EQ(small_margin.option, 1);
  EXPECT_NEAR(small_margin.speedup, chain_only.speedup * 1.08, 1e-9);

  // An incumbent tree is kept against a chain only while its ranked S is within the
  // switch margin: raising the margin to 0.15 moves the choice back to the chain.
  SpeculationController controller(config);
  const ControllerChoice first = controller.Choose(in);
  ASSERT_EQ(first.option, 1);
  controller.Observe(first, -1, 0, 0);   // The tree becomes the incumbent; no evidence.
  in.options[1].cost_factor = 1 / 1.02;  // Now models only 2 % more than the chain.
  config.tree_margin = 0.15;
  SpeculationController strict(config);
  strict.Observe(first, -1, 0, 0);
  EXPECT_EQ(strict.Choose(in).option, 0);
  EXPECT_EQ(controller.Choose(in).option, 1);  // Margin 0.05: 2 % is within hysteresis.
}

TEST(SpeculationControllerTest, AMeasuredCostFactorScalesTheStepNotTheSwitch) {
  ControllerConfig config;
  config.initial_acceptance = 0.8;
  ControllerInputs in = OneOption(0.05, 0.1, 0.1);
  const ControllerChoice plain = SpeculationController(config).Choose(in);
  ASSERT_EQ(plain.option, 0);
  // Steps with this option cost 1.3x their terms: E / (1.3 (K c + nu(K) + o)).
  in.options[0].cost_factor = 1.3;
  const ControllerChoice scaled = SpeculationController(config).Choose(in);
  ASSERT_EQ(scaled.option, 0);
  EXPECT_NEAR(
      scaled.speedup,
      ExpectedTokensPerStep(0.8, scaled.k) / (1.3 * (0.05 * scaled.k + 1 + 0.1 * scaled.k + 0.1)),
      1e-9);
  // A factor that eats the modelled gain turns the option off; one below 1 (a model that
  // realized more than it predicted) lowers the cost as much; <= 0 or NaN counts as 1.
  in.options[0].cost_factor = plain.speedup * 1.01;
  EXPECT_EQ(SpeculationController(config).Choose(in).option, -1);
  in.options[0].cost_factor = 0.8;
  EXPECT_NEAR(SpeculationController(config).Choose(in).speedup, plain.speedup / 0.8, 1e-9);
  for (double bad : {0.0, -1.0, std::nan("")}) {
    in.options[0].cost_factor = bad;
    EXPECT_NEAR(SpeculationController(config).Choose(in).speedup, plain.speedup, 1e-12);
  }
}

TEST(SpeculationControllerTest, PlainIsLeftOnlyForAGainAboveTheEnterMargin) {
  ControllerConfig config;
  config.initial_acceptance = 0.6;
  const ControllerInputs in = CostlyDraftForEntry();
  config.enter_margin = 0;
  const double s = SpeculationController(config).Choose(in).speedup;
  ASSERT_GT(s, 1.05);
  config.enter_margin = s - 1 - 0.01;  // Just below the modelled gain: enter.
  EXPECT_EQ(SpeculationController(config).Choose(in).option, 0);
  config.enter_margin = s - 1 + 0.01;  // Just above it: stay plain, off by the model.
  const ControllerChoice c = SpeculationController(config).Choose(in);
  EXPECT_EQ(c.option, -1);
  EXPECT_TRUE(c.off_by_model);
  // A cost factor below 1 (calibration crediting speculation) does not help it in: with
  // the modelled gain just short of the margin, a factor of 0.9 leaves it plain...
  ControllerInputs credited = in;
  credited.options[0].cost_factor = 0.9;
  SpeculationController controller(config);
  ControllerChoice entry = controller.Choose(credited);
  EXPECT_EQ(entry.option, -1);
  // ...while a speculating incumbent is valued with it (the factor ranks options).
  config.enter_margin = s - 1 - 0.01;
  SpeculationController speculating(config);
  entry = speculating.Choose(credited);
  ASSERT_EQ(entry.option, 0);
  speculating.Observe(entry, 0, entry.k, entry.k);
  const ControllerChoice kept = speculating.Choose(credited);
  EXPECT_EQ(kept.option, 0);
  EXPECT_GT(kept.speedup, speculating.Choose(in).speedup * 1.05);
}

TEST(SpeculationControllerTest, ExpensiveVerifyAtHighBatchTurnsSpeculationOff) {
  // A compute-bound target at a large batch: nu grows by a full step per position.
  SpeculationController controller;
  const ControllerChoice c = controller.Choose(OneOption(0.05, 1.0, 0.05));
  EXPECT_EQ(c.option, -1);
  EXPECT_EQ(c.k, 0);
  EXPECT_TRUE(c.off_by_model);
  // Nothing usable: off, but not by the model.
  ControllerInputs none = OneOption(0.05, 0.02, 0.05);
  none.options[0].usable = false;
  EXPECT_FALSE(controller.Choose(none).off_by_model);
  EXPECT_EQ(controller.Choose(none).option, -1);
}

TEST(SpeculationControllerTest, RespectsTheOptionsCap) {
  ControllerConfig config;
  config.initial_acceptance = 0.95;
  SpeculationController controller(config);
  EXPECT_EQ(controller.Choose(OneOption(0.0, 0.0, 0.0, 3)).k, 3);
}

// Runs `steps` steps: the true acceptance of option i at step t and every position is
// alpha(t, i); each proposal passes with that probability until the first rejection.
struct Trace {
  std::vector<ControllerChoice> choices;
  int Switches() const {
    int n = 0;
    for (size_t t = 1; t < choices.size(); ++t) {
      if (choices[t].probe || choices[t - 1].probe) continue;
      n += (choices[t].option >= 0) != (choices[t - 1].option >= 0) ||
           choices[t].option != choices[t - 1].option;
    }
    return n;
  }
  int Probes(size_t from, size_t to) const {
    int n = 0;
    for (size_t t = from; t < to && t < choices.size(); ++t) n += choices[t].probe;
    return n;
  }
  bool On(size_t t) const { return choices[t].option >= 0; }
};

Trace Simulate(SpeculationController& controller, const ControllerInputs& in, int steps,
               const std::function<double(int, int)>& alpha, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Trace trace;
  for (int t = 0; t < steps; ++t) {
    const ControllerChoice c = controller.Choose(in);
    int accepted = 0;
    while (accepted < c.k && u(rng) < alpha(t, c.option)) ++accepted;
    controller.Observe(c, c.option, c.k, accepted);
    trace.choices.push_back(c);
  }
  return trace;
}

// Costs under which speculation pays only for alpha above about 0.5.
ControllerInputs CostlyDraft() { return OneOption(0.3, 0.1, 0.1); }

TEST(SpeculationControllerTest, TurnsOffWhenAcceptanceCollapsesAndBackOnWhenItRecovers) {
  ControllerConfig config;
  config.probe_fraction = 1.0 / 16;  // Probes here cost about 2 plain steps each.
  SpeculationController controller(config);
  auto alpha = [](int t, int) { return t < 200 ? 0.9 : t < 600 ? 0.02 : 0.9; };
  const Trace trace = Simulate(controller, CostlyDraft(), 1000, alpha);
  EXPECT_TRUE(trace.On(199));
  // Off within 40 steps of the collapse, and off (probes aside) until it recovers.
  int off_at = -1;
  for (int t = 200; t < 600 && off_at < 0; ++t) {
    if (!trace.On(t)) off_at = t;
  }
  ASSERT_GE(off_at, 0);
  EXPECT_LT(off_at, 240);
  int on_while_collapsed = 0;
  for (int t = off_at; t < 600; ++t) on_while_collapsed += trace.On(t) && !trace.choices[t].probe;
  EXPECT_LE(on_while_collapsed, 40);  // Re-tries as own evidence ages: a few per 100.
  // Back on within 150 steps of the recovery, and on to the end.
  int on_at = -1;
  for (int t = 600; t < 1000 && on_at < 0; ++t) {
    if (trace.On(t) && !trace.choices[t].probe && trace.On(t + 1)) on_at = t;
  }
  ASSERT_GE(on_at, 0);
  EXPECT_LT(on_at, 750);
  for (int t = on_at + 20; t < 1000; ++t) EXPECT_TRUE(trace.On(t)) << t;
}

TEST(SpeculationControllerTest, NoOscillationNearBreakEven) {
  // Alpha where S(K) straddles 1 with noise: hysteresis keeps the choice stable.
  for (double alpha : {0.45, 0.5, 0.55, 0.6}) {
    SpeculationController controller;
    const Trace trace = Simulate(
        controller, CostlyDraft(), 2000, [alpha](int, int) { return alpha; }, 7);
    EXPECT_LE(trace.Switches(), 40) << "alpha " << alpha;
  }
}

TEST(SpeculationControllerTest, ExplorationIsBoundedAndOnlyWhenUncertain) {
  // Two options: a good cheap one and a poor one; the poor one is probed only when its
  // own evidence has aged, never more than probe_fraction of the steps.
  ControllerConfig config;
  SpeculationController controller(config);
  ControllerInputs in = OneOption(0.0, 0.05, 0.0);
  in.options.push_back({true, 8, 0.2, 0.1, nullptr});
  auto alpha = [](int, int option) { return option == 0 ? 0.8 : 0.1; };
  const int steps = 3000;
  const Trace trace = Simulate(controller, in, steps, alpha, 3);
  const int probes = trace.Probes(0, steps);
  EXPECT_GT(probes, 0);
  EXPECT_LE(probes, steps * config.probe_fraction + 1);
  for (const ControllerChoice& c : trace.choices) {
    if (c.probe) {
      EXPECT_LE(c.k, config.probe_max_k);
    } else {
      EXPECT_EQ(c.option, 0);
    }
  }
  // With exploration off, never.
  config.probe_fraction = 0;
  SpeculationController quiet(config);
  EXPECT_EQ(Simulate(quiet, in, 500, alpha).Probes(0, 500), 0);
}

TEST(SpeculationControllerTest, PicksTheMethodThatPaysAndFollowsWhenItChanges) {
  // Option 0: the draft model (measured c), option 1: prompt lookup (c = 0). Lookup
  // matches badly at first, then the text turns repetitive and it accepts well.
  SpeculationController controller;
  ControllerInputs in = OneOption(0.15, 0.05, 0.05);
  in.options.push_back({true, 8, 0.0, 0.0, nullptr});
  auto alpha = [](int t, int option) { return option == 0 ? 0.7 : t < 500 ? 0.05 : 0.95; };
  const Trace trace = Simulate(controller, in, 1500, alpha, 5);
  int draft = 0, lookup = 0;
  for (int t = 300; t < 500; ++t) draft += trace.choices[t].option == 0 && !trace.choices[t].probe;
  for (int t = 1200; t < 1500; ++t) lookup += trace.choices[t].option == 1;
  EXPECT_GE(draft, 180);
  EXPECT_GE(lookup, 290);
}

TEST(SpeculationControllerTest, ServerWidePriorSeedsANewSequence) {
  PositionAcceptance server(8, 1.0);
  for (int i = 0; i < 200; ++i) server.Observe(4, 0);  // Everyone sees rejections.
  ControllerInputs in = CostlyDraft();
  in.options[0].server = &server;
  ControllerConfig config;
  config.enter_margin = 0.05;  // Costs under which the default prior pays a little.
  SpeculationController fresh(config);
  EXPECT_LT(fresh.Acceptance(0, 1, &server), 0.05);
  EXPECT_EQ(fresh.Choose(in).option, -1);
  EXPECT_TRUE(fresh.Choose(in).off_by_model);
  in.options[0].server = nullptr;  // Only the default prior: speculate.
  EXPECT_EQ(fresh.Choose(in).option, 0);
}

TEST(SpeculationControllerTest, ALosingIncumbentIsDroppedAtOnce) {
  SpeculationController controller;
  const ControllerInputs cheap = OneOption(0.0, 0.02, 0.0);
  const ControllerChoice on = controller.Choose(cheap);
  ASSERT_EQ(on.option, 0);
  controller.Observe(on, 0, on.k, on.k);
  // The batch grows: the same choice would now cost more than it gains.
  EXPECT_EQ(controller.Choose(OneOption(0.0, 2.0, 0.5)).option, -1);
}

TEST(SpeculationControllerTest, ASwitchCostIsSpreadOverTheTokensLeft) {
  ControllerConfig config;
  config.initial_acceptance = 0.8;
  SpeculationController controller(config);
  ControllerInputs in = OneOption(0.05, 0.02, 0.05);
  const ControllerChoice free_switch = controller.Choose(in);
  ASSERT_EQ(free_switch.option, 0);
  // Catching up costs 20 plain steps: worth it for 1000 tokens, not for 20.
  in.options[0].switch_cost = 20;
  in.tokens_left = 1000;
  const ControllerChoice long_run = controller.Choose(in);
  EXPECT_EQ(long_run.option, 0);
  EXPECT_LT(long_run.speedup, free_switch.speedup);
  in.tokens_left = 20;
  EXPECT_EQ(controller.Choose(in).option, -1);
  EXPECT_TRUE(controller.Choose(in).off_by_model);
  // Unknown tokens left: the cost is paid in one step.
  in.tokens_left = 0;
  EXPECT_EQ(controller.Choose(in).option, -1);
}

}  // namespace
}  // namespace spec
}  // namespace tandem
