#include "client/cluster_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpu_set.h"

namespace tandem::client {
namespace {

using nlohmann::json;

// Reads the members of one JSON object, remembering which keys were consumed so the
// rest can be reported as unknown.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

  absl::Status Int(const char* key, int* out) {
    const json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_number_integer()) return TypeError(key, "an integer");
    const int64_t value = v->get<int64_t>();
    if (value < INT32_MIN || value > INT32_MAX) return TypeError(key, "a 32-bit integer");
    *out = static_cast<int>(value);
    return absl::OkStatus();
  }
  absl::Status Double(const char* key, double* out) {
    const json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_number()) return TypeError(key, "a number");
    *out = v->get<double>();
    return absl::OkStatus();
  }
  absl::Status Bool(const char* key, bool* out) {
    const json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_boolean()) return TypeError(key, "true or false");
    *out = v->get<bool>();
    return absl::OkStatus();
  }
  absl::Status String(const char* key, std::string* out) {
    const json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_string()) return TypeError(key, "a string");
    *out = v->get<std::string>();
    return absl::OkStatus();
  }
  absl::Status StringList(const char* key, std::vector<std::string>* out) {
    const json* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_array()) return TypeError(key, "an array of strings");
    out->clear();
    for (const json& item : *v) {
      if (!item.is_string()) return TypeError(key, "an array of strings");
      out->push_back(item.get<std::string>());
    }
    return absl::OkStatus();
  }
  // The member `key` if present (marks it consumed), else null.
  const json* Find(const char* key) {
    seen_.push_back(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  std::string Path(const char* key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }
  // Fails on members no reader call asked for.
  absl::Status NoOthers() const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (std::find(seen_.begin(), seen_.end(), it.key()) == seen_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            Path(it.key().c_str()), ": unknown key (known: ", absl::StrJoin(seen_, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status TypeError(const char* key, const char* expected) const {
    return absl::InvalidArgumentError(absl::StrCat(Path(key), ": expected ", expected));
  }
  const json& object_;
  std::string path_;
  std::vector<std::string> seen_;
};

#define RETURN_IF_ERROR(expr) \
  do {                        \
    absl::Status _s = (expr); \
    if (!_s.ok()) return _s;  \
  } while (false)

absl::Status ReadWorker(const json& object, const std::string& path, WorkerConfig* worker, int* tp,
                        std::string* comm) {
  if (!object.is_object()) return absl::InvalidArgumentError(path + ": expected an object");
  ObjectReader r(object, path);
  RETURN_IF_ERROR(r.String("model", &worker->model));
  RETURN_IF_ERROR(r.String("backend", &worker->backend));
  RETURN_IF_ERROR(r.Int("threads", &worker->threads));
  RETURN_IF_ERROR(r.Int("kv_cache_mb", &worker->kv_cache_mb));
  RETURN_IF_ERROR(r.StringList("args", &worker->args));
  if (tp != nullptr) RETURN_IF_ERROR(r.Int("tp", tp));
  if (comm != nullptr) RETURN_IF_ERROR(r.String("comm", comm));
  return r.NoOthers();
}

absl::Status ReadCoordinator(const json& object, CoordinatorConfig* c) {
  if (!object.is_object()) return absl::InvalidArgumentError("coordinator: expected an object");
  ObjectReader r(object, "coordinator");
  RETURN_IF_ERROR(r.Int("port", &c->port));
  RETURN_IF_ERROR(r.Int("metrics_port", &c->metrics_port));
  RETURN_IF_ERROR(r.Int("openai_port", &c->openai_port));
  RETURN_IF_ERROR(r.Int("rendezvous_port", &c->rendezvous_port));
  RETURN_IF_ERROR(r.Bool("pipelining", &c->pipelining));
  RETURN_IF_ERROR(r.Int("max_k", &c->max_k));
  RETURN_IF_ERROR(r.Int("max_running", &c->max_running));
  RETURN_IF_ERROR(r.Int("max_queue", &c->max_queue));
  RETURN_IF_ERROR(r.StringList("args", &c->args));
  return r.NoOthers();
}

absl::Status ReadAffinity(const json& value, ClusterConfig* config) {
  if (value.is_boolean()) {
    config->cpu_affinity = value.get<bool>();
    return absl::OkStatus();
  }
  if (!value.is_object()) {
    return absl::InvalidArgumentError("cpu_affinity: expected true, false or an object");
  }
  ObjectReader r(value, "cpu_affinity");
  config->cpu_affinity = true;
  RETURN_IF_ERROR(r.Bool("enabled", &config->cpu_affinity));
  RETURN_IF_ERROR(r.String("draft_cpus", &config->draft_cpus));
  RETURN_IF_ERROR(r.String("target_cpus", &config->target_cpus));
  return r.NoOthers();
}

absl::Status ReadRestart(const json& object, RestartPolicy* p) {
  if (!object.is_object()) return absl::InvalidArgumentError("restart: expected an object");
  ObjectReader r(object, "restart");
  std::string mode = RestartModeName(p->mode);
  double window = absl::ToDoubleSeconds(p->window);
  double backoff = absl::ToDoubleSeconds(p->backoff);
  double max_backoff = absl::ToDoubleSeconds(p->max_backoff);
  RETURN_IF_ERROR(r.String("policy", &mode));
  RETURN_IF_ERROR(r.Int("budget", &p->budget));
  RETURN_IF_ERROR(r.Double("window_s", &window));
  RETURN_IF_ERROR(r.Double("backoff_s", &backoff));
  RETURN_IF_ERROR(r.Double("max_backoff_s", &max_backoff));
  RETURN_IF_ERROR(r.NoOthers());
  absl::StatusOr<RestartMode> parsed = ParseRestartMode(mode);
  if (!parsed.ok())
    return absl::InvalidArgumentError(absl::StrCat("restart.policy: ", parsed.status().message()));
  p->mode = *parsed;
  p->window = absl::Seconds(window);
  p->backoff = absl::Seconds(backoff);
  p->max_backoff = absl::Seconds(max_backoff);
  return absl::OkStatus();
}

absl::Status CheckPort(const char* name, int port, bool may_be_off) {
  if (port < (may_be_off ? -1 : 0) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be in ", may_be_off ? "-1" : "0",
                                                   "..65535 (0 = a free port), got ", port));
  }
  return absl::OkStatus();
}

absl::Status CheckWorker(const char* role, const WorkerConfig& w) {
  if (w.model.empty()) return absl::InvalidArgumentError(absl::StrCat(role, ".model is empty"));
  if (w.backend != "cpu" && w.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat(role, ".backend must be cpu or cuda, got '", w.backend, "'"));
  }
  if (w.threads < 0 || w.threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, ".threads must be in 0..1024 (0 = the cores it gets), got ", w.threads));
  }
  if (w.kv_cache_mb < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, ".kv_cache_mb must be >= 1, got ", w.kv_cache_mb));
  }
  return absl::OkStatus();
}

json WorkerToJson(const WorkerConfig& w) {
  return json{{"model", w.model},
              {"backend", w.backend},
              {"threads", w.threads},
              {"kv_cache_mb", w.kv_cache_mb},
              {"args", w.args}};
}

}  // namespace

absl::StatusOr<ClusterConfig> ParseClusterConfig(const std::string& json_text) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (root.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!root.is_object()) return absl::InvalidArgumentError("top level: expected an object");
  ClusterConfig config;
  ObjectReader r(root, "");
  RETURN_IF_ERROR(r.String("host", &config.host));
  if (const json* t = r.Find("target")) {
    RETURN_IF_ERROR(ReadWorker(*t, "target", &config.target, &config.tp, &config.comm));
  }
  if (const json* d = r.Find("draft")) {
    if (d->is_null()) {
      config.with_draft = false;
    } else {
      RETURN_IF_ERROR(ReadWorker(*d, "draft", &config.draft, nullptr, nullptr));
    }
  }
  if (const json* c = r.Find("coordinator"))
    RETURN_IF_ERROR(ReadCoordinator(*c, &config.coordinator));
  if (const json* a = r.Find("cpu_affinity")) RETURN_IF_ERROR(ReadAffinity(*a, &config));
  RETURN_IF_ERROR(r.String("log_dir", &config.log_dir));
  RETURN_IF_ERROR(r.Double("startup_timeout_s", &config.startup_timeout_s));
  if (const json* p = r.Find("restart")) RETURN_IF_ERROR(ReadRestart(*p, &config.restart));
  RETURN_IF_ERROR(r.NoOthers());
  return config;
}

absl::StatusOr<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read config file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ClusterConfig> config = ParseClusterConfig(text.str());
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", config.status().message()));
  }
  return config;
}

absl::Status ValidateClusterConfig(const ClusterConfig& c) {
  if (c.host.empty()) return absl::InvalidArgumentError("host is empty");
  RETURN_IF_ERROR(CheckWorker("target", c.target));
  if (c.with_draft) RETURN_IF_ERROR(CheckWorker("draft", c.draft));
  if (c.tp < 1 || c.tp > 64) {
    return absl::InvalidArgumentError(absl::StrCat("target.tp must be in 1..64, got ", c.tp));
  }
  if (c.comm != "tcp" && c.comm != "gloo" && c.comm != "nccl" && c.comm != "local") {
    return absl::InvalidArgumentError(
        absl::StrCat("target.comm must be tcp, gloo, nccl or local, got '", c.comm, "'"));
  }
  if (c.comm == "local" && c.tp != 1) {
    return absl::InvalidArgumentError("target.comm local works only with tp 1");
  }
  RETURN_IF_ERROR(CheckPort("coordinator.port", c.coordinator.port, false));
  RETURN_IF_ERROR(CheckPort("coordinator.metrics_port", c.coordinator.metrics_port, true));
  RETURN_IF_ERROR(CheckPort("coordinator.openai_port", c.coordinator.openai_port, true));
  RETURN_IF_ERROR(CheckPort("coordinator.rendezvous_port", c.coordinator.rendezvous_port, false));
  if (c.coordinator.max_k < 0 || c.coordinator.max_k > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator.max_k must be in 0..64, got ", c.coordinator.max_k));
  }
  if (c.coordinator.max_running < 1 || c.coordinator.max_queue < 1) {
    return absl::InvalidArgumentError("coordinator.max_running and max_queue must be >= 1");
  }
  for (const std::string* list : {&c.draft_cpus, &c.target_cpus}) {
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(*list);
    if (!cpus.ok()) return cpus.status();
  }
  if (c.draft_cpus.empty() != c.target_cpus.empty()) {
    return absl::InvalidArgumentError(
        "cpu_affinity: give both draft_cpus and target_cpus, or neither");
  }
  if (!(c.startup_timeout_s > 0)) {
    return absl::InvalidArgumentError("startup_timeout_s must be > 0");
  }
  return ValidateRestartPolicy(c.restart);
}

std::string ClusterConfigToJson(const ClusterConfig& c) {
  json target = WorkerToJson(c.target);
  target["tp"] = c.tp;
  target["comm"] = c.comm;
  json root{
      {"host", c.host},
      {"target", target},
      {"draft", c.with_draft ? WorkerToJson(c.draft) : json(nullptr)},
      {"coordinator",
       {{"port", c.coordinator.port},
        {"metrics_port", c.coordinator.metrics_port},
        {"openai_port", c.coordinator.openai_port},
        {"rendezvous_port", c.coordinator.rendezvous_port},
        {"pipelining", c.coordinator.pipelining},
        {"max_k", c.coordinator.max_k},
        {"max_running", c.coordinator.max_running},
        {"max_queue", c.coordinator.max_queue},
        {"args", c.coordinator.args}}},
      {"cpu_affinity",
       {{"enabled", c.cpu_affinity}, {"draft_cpus", c.draft_cpus}, {"target_cpus", c.target_cpus}}},
      {"log_dir", c.log_dir},
      {"startup_timeout_s", c.startup_timeout_s},
      {"restart",
       {{"policy", RestartModeName(c.restart.mode)},
        {"budget", c.restart.budget},
        {"window_s", absl::ToDoubleSeconds(c.restart.window)},
        {"backoff_s", absl::ToDoubleSeconds(c.restart.backoff)},
        {"max_backoff_s", absl::ToDoubleSeconds(c.restart.max_backoff)}}},
  };
  return root.dump(2);
}

}  // namespace tandem::client
