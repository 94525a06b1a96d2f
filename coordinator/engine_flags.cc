#include "coordinator/engine_flags.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/pipeline_mode.h"
#include "coordinator/prompt_lookup.h"
#include "coordinator/proposers/medusa_proposer.h"

ABSL_FLAG(int, max_queue, 256, "Requests waiting for admission before RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_running, 64, "Sequences decoding at once (continuous batch size).");
ABSL_FLAG(bool, pipelining, true,
          "Overlap draft and target work: micro-batch ping-pong when drafting is a real "
          "share of the step time, else optimistic drafting ahead while verifying.");
ABSL_FLAG(bool, optimistic, true,
          "Pre-draft the next step while the target verifies (the speculation cache), when "
          "pipelining at low concurrency.");
ABSL_FLAG(int, predraft_branches, 1,
          "Verification outcomes pre-drafted per sequence while the target verifies, 1..31: "
          "1 = only the all-accepted one (the bonus token guessed), more = also after the "
          "likeliest rejections (the draft's top tokens), each on a branch of its cache.");
ABSL_FLAG(int, optimistic_max_batch, 16, "Running sequences up to which to draft ahead.");
ABSL_FLAG(bool, predraft_plain_steps, true,
          "When pre-drafting: a sequence without pre-drafted candidates decodes plain in a "
          "phase the target verifies others in, while the draft drafts its next step keyed "
          "on the target's token, instead of waiting out that phase for a fresh draft.");
ABSL_FLAG(int, draft_tree_siblings, 0,
          "Draft-model token trees for greedy and coupled requests, 0..15: up to this many "
          "of the draft's next likeliest tokens as leaf siblings of each drafted token, "
          "each only when its expected tokens pay for its verify row (measured nu), "
          "within --max_k nodes; 0 = chains.");
ABSL_FLAG(int, draft_tree_nodes, 0,
          "Dynamic draft-model trees for greedy and coupled requests (EAGLE-2 expansion on "
          "the draft worker): the node budget per step, 0..256 (a request's "
          "speculation.draft_tree_nodes overrides it), within the workers' "
          "max_speculative_tokens; the controller drafts a tree instead of the chain on the "
          "steps where its measured acceptance pays for its draft and verify cost, and nodes "
          "beyond K are kept only when their path probability pays for their verify row "
          "(measured nu); 0 = chains (or --draft_tree_siblings).");
ABSL_FLAG(int, draft_tree_width, 4,
          "Dynamic draft trees: nodes expanded per depth and children per node, 1..16.");
ABSL_FLAG(std::string, pipeline_mode, "auto",
          "Mode of pipelined phases: auto (chosen every phase from the measured draft and "
          "verify call-time fits: sequential, lockstep or ping-pong, whichever is predicted "
          "fastest), or one of sequential, lockstep, ping_pong to force it.");
ABSL_FLAG(double, pipeline_switch_margin, 0.05,
          "auto: another pipelining mode replaces the current one only when predicted at "
          "least this fraction faster.");
ABSL_FLAG(double, pipeline_min_gain, 0.02,
          "auto: a pipelined mode runs only while predicted at least this fraction faster "
          "than sequential steps.");
ABSL_FLAG(int, pipeline_min_hold_phases, 8,
          "auto: phases a pipelining mode runs before another may replace it (a mode "
          "predicted slower than sequential is left at once).");
ABSL_FLAG(int, max_k, 8, "Largest draft length K.");
ABSL_FLAG(int, prompt_lookup_branches, 1,
          "Distinct continuations of the matched n-gram prompt lookup proposes at once: 1 = "
          "a chain (the latest occurrence's), 2..16 = a token tree of the latest occurrences' "
          "continuations (depth K, at most min(K * branches, --max_k) nodes).");
ABSL_FLAG(int, medusa_nodes, tandem::coordinator::kDefaultMedusaNodes,
          "Medusa (when the target has heads): candidate tree nodes per step for requests "
          "that do not fix num_speculative_tokens, 1..--max_k.");
ABSL_FLAG(int, speculation_max_batch, 12,
          "Above this many running sequences, adaptive-K requests decode without speculation.");
ABSL_FLAG(int, planning_batch_window, 3,
          "Speculation is priced and capped (--speculation_max_batch) at the largest running "
          "count of this many phases, the current one included, so that the one-phase dip "
          "between a finished request and the next does not switch drafts on; 1: the "
          "current count.");
ABSL_FLAG(int, catch_up_min_tokens, 16,
          "A draft more than this many tokens behind a sequence is fed them (draft prefill) "
          "while the sequence decodes plain; shorter lags are fed by the draft call.");
ABSL_FLAG(int, prefill_chunk, 256, "Prompt tokens prefilled per sequence and step.");
ABSL_FLAG(int, proposal_top_k, 32, "Support size of the draft's sparse proposal distribution.");
ABSL_FLAG(int, max_new_tokens_limit, 4096, "Largest max_new_tokens a request may ask for.");
ABSL_FLAG(double, step_timeout_s, 30, "Deadline of one worker step RPC.");
ABSL_FLAG(double, target_recovery_timeout_s, 60,
          "How long requests wait for an unavailable target group before failing.");
ABSL_FLAG(double, worker_wait_s, 120, "How long to wait for the workers at start-up.");
ABSL_FLAG(bool, strict_worker_batches, false,
          "Exit when a worker rejects a batch the coordinator built (INVALID_ARGUMENT, "
          "RESOURCE_EXHAUSTED, ...: a coordinator bug) instead of stepping those sequences "
          "once without the draft; for tests.");
ABSL_FLAG(bool, measured_costs, true,
          "The speculation controller uses cost terms fitted to the measured draft and "
          "verify call times (c, nu(K), o at the current batch size); false = always the "
          "fixed --draft_cost, --verify_cost_slope and --overhead_cost (which are also "
          "the terms used until enough calls were measured).");
ABSL_FLAG(double, draft_cost, 0.1,
          "Fixed cost model: c = T(draft token) / T(target step) of the draft model.");
ABSL_FLAG(double, verify_cost_slope, 0.15, "Fixed cost model: nu(K) = 1 + slope * K.");
ABSL_FLAG(double, overhead_cost, 0.1,
          "Fixed cost model: o = draft call overhead per step / T(target step).");
ABSL_FLAG(double, speculation_switch_margin, 0.05,
          "Relative modelled gain the controller needs to change method or K "
          "(hysteresis); a choice that models a loss is dropped at once.");
ABSL_FLAG(double, speculation_enter_margin, 0.15,
          "Modelled gain the controller needs to turn speculation on from plain decoding "
          "(S >= 1 + margin; above the cost model's measured error).");
ABSL_FLAG(double, speculation_tree_margin, 0.15,
          "Relative modelled gain a tree option needs over a chain or plain decoding to be "
          "chosen (its S is ranked at S / (1 + margin): a tree's estimate is the most "
          "optimistic); 0 ranks trees as modelled.");
ABSL_FLAG(double, speculation_probe_fraction, 1.0 / 32,
          "Largest share of a lone sequence's time the controller may spend probing a method "
          "or K whose acceptance estimate is uncertain (a batch of n: 1/n of it; 0 = never "
          "probe): what exploration costs where no speculation pays.");

namespace tandem::coordinator {
namespace {

// --pipeline_mode: "auto" leaves `forced` unset; a mode label sets it. False otherwise.
bool ParsePipelineMode(const std::string& flag, std::optional<PipelineMode>* forced) {
  if (flag == "auto") return true;
  for (PipelineMode m :
       {PipelineMode::kSequential, PipelineMode::kLockstep, PipelineMode::kPingPong}) {
    if (flag == PipelineModeLabel(m)) {
      *forced = m;
      return true;
    }
  }
  return false;
}

// OK when lo <= value <= hi, else INVALID_ARGUMENT naming --`name`.
absl::Status CheckRange(const char* name, int value, int lo, int hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, "=", value, ": expected ", lo, "..", hi));
}

// Batching and pipelining: the planner's options and the mode selector's.
absl::Status SetPlanning(EngineOptions* eo) {
  eo->max_running = absl::GetFlag(FLAGS_max_running);
  eo->max_queue = absl::GetFlag(FLAGS_max_queue);
  eo->target_recovery_timeout = absl::Seconds(absl::GetFlag(FLAGS_target_recovery_timeout_s));
  PlannerOptions& p = eo->planner;
  p.pipelining = absl::GetFlag(FLAGS_pipelining);
  p.optimistic = absl::GetFlag(FLAGS_optimistic);
  p.optimistic_max_batch = absl::GetFlag(FLAGS_optimistic_max_batch);
  p.predraft_plain_steps = absl::GetFlag(FLAGS_predraft_plain_steps);
  p.predraft_branches = absl::GetFlag(FLAGS_predraft_branches);
  p.draft_tree_siblings = absl::GetFlag(FLAGS_draft_tree_siblings);
  p.draft_tree_nodes = absl::GetFlag(FLAGS_draft_tree_nodes);
  p.draft_tree_width = absl::GetFlag(FLAGS_draft_tree_width);
  p.max_k = absl::GetFlag(FLAGS_max_k);
  p.speculation_max_batch = absl::GetFlag(FLAGS_speculation_max_batch);
  p.planning_batch_window = std::max(1, absl::GetFlag(FLAGS_planning_batch_window));
  p.catch_up_min_tokens = std::max(0, absl::GetFlag(FLAGS_catch_up_min_tokens));
  p.prefill_chunk = absl::GetFlag(FLAGS_prefill_chunk);
  p.prefill_budget = 2 * absl::GetFlag(FLAGS_prefill_chunk);
  p.proposal_top_k = absl::GetFlag(FLAGS_proposal_top_k);
  eo->pipeline_hysteresis.switch_margin =
      std::max(0.0, absl::GetFlag(FLAGS_pipeline_switch_margin));
  eo->pipeline_hysteresis.min_gain = std::max(0.0, absl::GetFlag(FLAGS_pipeline_min_gain));
  eo->pipeline_hysteresis.min_hold_phases =
      std::max(0, absl::GetFlag(FLAGS_pipeline_min_hold_phases));
  if (!ParsePipelineMode(absl::GetFlag(FLAGS_pipeline_mode), &eo->forced_pipeline_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pipeline_mode=", absl::GetFlag(FLAGS_pipeline_mode),
                     ": expected auto, sequential, lockstep or ping_pong"));
  }
  for (const absl::Status& s : {CheckRange("predraft_branches", p.predraft_branches, 1, 31),
                                CheckRange("draft_tree_siblings", p.draft_tree_siblings, 0, 15),
                                CheckRange("draft_tree_nodes", p.draft_tree_nodes, 0, 256),
                                CheckRange("draft_tree_width", p.draft_tree_width, 1, 16)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The proposers' options, the speculation controller's and the cost model's.
absl::Status SetSpeculation(EngineOptions* eo) {
  eo->prompt_lookup_branches = absl::GetFlag(FLAGS_prompt_lookup_branches);
  eo->medusa_nodes = std::max(1, absl::GetFlag(FLAGS_medusa_nodes));
  eo->controller.max_k = absl::GetFlag(FLAGS_max_k);
  eo->controller.switch_margin = absl::GetFlag(FLAGS_speculation_switch_margin);
  eo->controller.enter_margin = absl::GetFlag(FLAGS_speculation_enter_margin);
  eo->controller.tree_margin = absl::GetFlag(FLAGS_speculation_tree_margin);
  eo->controller.probe_fraction = absl::GetFlag(FLAGS_speculation_probe_fraction);
  eo->fixed_costs.draft_cost = absl::GetFlag(FLAGS_draft_cost);
  eo->fixed_costs.verify_cost = spec::LinearVerifyCost(absl::GetFlag(FLAGS_verify_cost_slope));
  eo->fixed_costs.overhead = absl::GetFlag(FLAGS_overhead_cost);
  eo->measured_costs = absl::GetFlag(FLAGS_measured_costs);
  eo->strict_worker_batches = absl::GetFlag(FLAGS_strict_worker_batches);
  for (const absl::Status& s : {CheckRange("prompt_lookup_branches", eo->prompt_lookup_branches, 1,
                                           PromptLookupOptions::kMaxBranches),
                                spec::ValidateControllerConfig(eo->controller),
                                spec::ValidateCostModel(eo->fixed_costs, eo->controller.max_k)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EngineOptions> EngineOptionsFromFlags(std::vector<int> stop_token_ids) {
  EngineOptions eo;
  eo.stop_token_ids = std::move(stop_token_ids);
  if (absl::Status s = SetPlanning(&eo); !s.ok()) return s;
  if (absl::Status s = SetSpeculation(&eo); !s.ok()) return s;
  return eo;
}

}  // namespace tandem::coordinator
