#include "client/bench_schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/request_options.h"

namespace tandem::client {

std::string ConfigLabel(const ConfigKey& key) {
  if (key.aa_control) return "none (A/A)";
  if (!key.tree_nodes.has_value()) return MethodName(key.method);
  return absl::StrCat(
      MethodName(key.method), " tree=",
      *key.tree_nodes == kServerTreeNodes ? std::string("server") : absl::StrCat(*key.tree_nodes));
}

std::vector<ConfigKey> BenchConfigs(const std::vector<v1::SpeculationMethod>& methods,
                                    const std::vector<v1::AcceptanceRule>& rules,
                                    const std::vector<v1::Pipelining>& pipelining,
                                    const std::vector<int>& concurrency, bool aa_control,
                                    const std::vector<int>& draft_tree_nodes) {
  std::vector<ConfigKey> configs;
  for (v1::SpeculationMethod method : methods) {
    std::vector<std::optional<int>> trees = {std::nullopt};
    if (method == v1::SPECULATION_METHOD_DRAFT && draft_tree_nodes.size() > 1) {
      trees.assign(draft_tree_nodes.begin(), draft_tree_nodes.end());
    }
    for (v1::AcceptanceRule rule : rules) {
      for (size_t p = 0; p < pipelining.size(); ++p) {
        const bool plain = method == v1::SPECULATION_METHOD_NONE;
        if (plain && p > 0) continue;
        for (const std::optional<int>& tree : trees) {
          for (int c : concurrency) {
            ConfigKey key{method, plain ? v1::PIPELINING_DEFAULT : pipelining[p], c, rule};
            key.tree_nodes = tree;
            configs.push_back(key);
          }
        }
        if (!plain || !aa_control) continue;
        for (int c : concurrency) {
          configs.push_back({method, v1::PIPELINING_DEFAULT, c, rule, /*aa_control=*/true});
        }
      }
    }
  }
  return configs;
}

void ChunkRequests(int requests, int chunks, int chunk, int* first, int* count) {
  chunks = std::max(chunks, 1);
  const int base = requests / chunks, extra = requests % chunks;
  *first = chunk * base + std::min(chunk, extra);
  *count = base + (chunk < extra ? 1 : 0);
}

std::vector<ScheduledRun> InterleavedSchedule(const std::vector<ConfigKey>& configs, int repeats,
                                              int chunks) {
  chunks = std::max(chunks, 1);
  std::vector<int> levels;
  for (const ConfigKey& k : configs) {
    if (std::find(levels.begin(), levels.end(), k.concurrency) == levels.end()) {
      levels.push_back(k.concurrency);
    }
  }
  // Per concurrency level, in configs' order with the A/A controls last.
  std::vector<std::vector<int>> groups;
  for (int level : levels) {
    groups.emplace_back();
    for (size_t i = 0; i < configs.size(); ++i) {
      if (configs[i].concurrency == level) groups.back().push_back(static_cast<int>(i));
    }
    std::stable_partition(groups.back().begin(), groups.back().end(),
                          [&configs](int i) { return !configs[i].aa_control; });
  }
  std::vector<ScheduledRun> schedule;
  for (int round = 0; round < std::max(repeats, 1); ++round) {
    for (const std::vector<int>& group : groups) {
      for (int chunk = 0; chunk < chunks; ++chunk) {
        if ((round * chunks + chunk) % 2 == 0) {
          for (int config : group) schedule.push_back({round, config, chunk});
        } else {
          for (auto it = group.rbegin(); it != group.rend(); ++it) {
            schedule.push_back({round, *it, chunk});
          }
        }
      }
    }
  }
  return schedule;
}

}  // namespace tandem::client
