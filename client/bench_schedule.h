// Which configurations `tandem bench` measures, and in what order with --repeat.
#ifndef TANDEM_CLIENT_BENCH_SCHEDULE_H_
#define TANDEM_CLIENT_BENCH_SCHEDULE_H_

#include <optional>
#include <string>
#include <vector>

#include "client/request_options.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::client {

struct ConfigKey {
  v1::SpeculationMethod method = v1::SPECULATION_METHOD_NONE;
  v1::Pipelining pipelining = v1::PIPELINING_DEFAULT;
  int concurrency = 1;
  v1::AcceptanceRule rule = v1::ACCEPTANCE_RULE_DEFAULT;
  // The A/A control (`tandem bench --aa-control`): plain decoding (method NONE) sent
  // exactly like `none`, but a separate configuration that is never any row's baseline;
  // its ratio to `none` of the same round is the run's own noise floor.
  bool aa_control = false;
  // Draft rows of a `--tree-nodes` list of several budgets: this row's dynamic tree node
  // budget (0 = chains, kServerTreeNodes = the server's); unset otherwise (a single
  // --tree-nodes value applies to every draft row).
  std::optional<int> tree_nodes;
  bool operator==(const ConfigKey& o) const {
    return method == o.method && pipelining == o.pipelining && concurrency == o.concurrency &&
           rule == o.rule && aa_control == o.aa_control && tree_nodes == o.tree_nodes;
  }
};

// The row's name in tables, JSON and messages: the method's ("draft"), with its tree
// budget where the key has one ("draft tree=0", "draft tree=server"), or "none (A/A)"
// for the A/A control.
std::string ConfigLabel(const ConfigKey& key);

// Every (method, rule, pipelining, concurrency) in the order the results table lists
// them: method-major, then acceptance rule, then pipelining, then concurrency.
// Pipelining does not apply to plain decoding, so `none` appears once per rule and
// concurrency, with PIPELINING_DEFAULT (the rule still applies: `none` samples by it).
// With `aa_control`, each rule's `none` rows are followed by its A/A control rows, one
// per concurrency level (only when `methods` has `none`). With two or more
// `draft_tree_nodes` budgets, each draft row is measured once per budget (in their order,
// innermost after pipelining); other methods ignore them.
std::vector<ConfigKey> BenchConfigs(const std::vector<v1::SpeculationMethod>& methods,
                                    const std::vector<v1::AcceptanceRule>& rules,
                                    const std::vector<v1::Pipelining>& pipelining,
                                    const std::vector<int>& concurrency, bool aa_control = false,
                                    const std::vector<int>& draft_tree_nodes = {});

// One measurement: configuration configs[config] in round `round` (0-based), its
// chunk `chunk` of the round's requests (0 when rounds are not split).
struct ScheduledRun {
  int round = 0;
  int config = 0;
  int chunk = 0;
};

// The requests of chunk `chunk` (0-based) when a configuration's `requests` per round
// are split into `chunks` (>= 1) nearly equal parts: the first request number into
// *first and the count into *count (the first requests % chunks chunks get one more).
void ChunkRequests(int requests, int chunks, int chunk, int* first, int* count);

// Interleaved order of `repeats` (>= 1; fewer counts as 1) rounds: each round measures
// every configuration once, so drift on a noisy machine hits every configuration
// alike. Within a round the configurations are grouped by concurrency (in the order
// the levels first appear in `configs`), so each speculative run is measured next to
// the `none` run it is compared with; inside a group even rounds keep `configs`'
// order and odd rounds reverse it (A B C, C B A, A B C, ...), so no configuration
// always runs first or last in its group (a position effect, such as a run that
// follows a heavier one, cancels over pairs of rounds). A/A controls go to the end of
// their group, the far end from `none` (last when `none` runs first, first when the
// order is reversed), so no row is further in time from its `none` than the control:
// the control's spread covers the drift every row of the group sees.
// With `chunks` > 1 (`tandem bench --chunks`) each configuration's requests of a round
// are split into that many chunks, and a group runs its configurations chunk by chunk
// (pass p = round * chunks + chunk in the forward order for even p, reversed for odd
// p: A1 B1 C1 C2 B2 A2 A3 ...), so each configuration is measured within seconds of the
// others many times per round and slower drift cancels in their ratios.
std::vector<ScheduledRun> InterleavedSchedule(const std::vector<ConfigKey>& configs, int repeats,
                                              int chunks = 1);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_SCHEDULE_H_
