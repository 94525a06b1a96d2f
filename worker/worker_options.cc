#include "worker/worker_options.h"

#include "absl/strings/str_cat.h"

namespace tandem {
namespace worker {
namespace {

absl::Status Bad(const std::string& flag, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", problem));
}

absl::Status CheckRange(const std::string& flag, int value, int low, int high) {
  if (value < low || value > high) {
    return Bad(flag, absl::StrCat(value, " is outside [", low, ", ", high, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(const std::string& flag, absl::Duration value) {
  if (value <= absl::ZeroDuration()) {
    return Bad(flag, absl::StrCat("must be positive, got ", absl::FormatDuration(value)));
  }
  return absl::OkStatus();
}

bool ValidRunId(const std::string& run_id) {
  if (run_id.empty() || run_id.size() > 100) return false;
  for (char c : run_id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::Status ValidateWorkerOptions(const WorkerOptions& o) {
#define TANDEM_CHECK_OK(expr)          \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (0)
  if (o.role != "draft" && o.role != "target") {
    return Bad("role", absl::StrCat("'", o.role, "' is not draft or target"));
  }
  TANDEM_CHECK_OK(CheckRange("tp_size", o.tp_size, 1, 1024));
  TANDEM_CHECK_OK(CheckRange("rank", o.rank, 0, o.tp_size - 1));
  if (o.role == "draft" && o.tp_size != 1) {
    return Bad("tp_size", "the draft role runs on one process (--tp_size=1)");
  }
  if (o.model_dir.empty() && o.synthetic.empty()) {
    return Bad("model_dir", "is required (or --synthetic=<model> for benchmarks)");
  }
  if (!o.model_dir.empty() && !o.synthetic.empty()) {
    return Bad("synthetic", "cannot be combined with --model_dir");
  }
  if (!o.synthetic.empty()) TANDEM_CHECK_OK(ResolveSyntheticModel(o).status());
  if (o.backend != "cpu" && o.backend != "cuda") {
    return Bad("backend", absl::StrCat("'", o.backend, "' is not cpu or cuda"));
  }
  TANDEM_CHECK_OK(CheckRange("threads", o.threads, 0, 1024));
  TANDEM_CHECK_OK(CheckRange("kv_cache_mb", o.kv_cache_mb, 1, 1 << 30));
  if (o.kv_dtype != "f32" && o.kv_dtype != "f16" && o.kv_dtype != "bf16") {
    return Bad("kv_dtype", absl::StrCat("'", o.kv_dtype, "' is not f32, f16 or bf16"));
  }
  TANDEM_CHECK_OK(CheckRange("block_size", o.block_size, 1, 4096));
  TANDEM_CHECK_OK(CheckRange("max_batch_tokens", o.max_batch_tokens, 1, 1 << 20));
  TANDEM_CHECK_OK(CheckRange("max_speculative_tokens", o.max_speculative_tokens, 1, 256));
  TANDEM_CHECK_OK(CheckRange("proposal_top_k", o.proposal_top_k, 1, 256));
  if (o.listen.empty() || o.listen.find(':') == std::string::npos) {
    return Bad("listen", absl::StrCat("'", o.listen, "' is not host:port"));
  }
  if (o.comm != "tcp" && o.comm != "gloo" && o.comm != "local" && o.comm != "nccl") {
    return Bad("comm", absl::StrCat("'", o.comm, "' is not tcp, gloo, local or nccl"));
  }
  if (o.comm == "nccl" && o.backend != "cuda") {
    return Bad("comm", "nccl needs --backend=cuda (use tcp or gloo on CPU)");
  }
  if (o.is_group()) {
    if (o.comm == "local") {
      return Bad("comm", "local supports one rank only; use tcp or gloo (CPU) or nccl (GPU)");
    }
    if (o.rendezvous.empty() == o.rendezvous_dir.empty()) {
      return Bad("rendezvous",
                 "a group needs exactly one of --rendezvous (host:port) and "
                 "--rendezvous_dir");
    }
    if (!ValidRunId(o.run_id)) {
      return Bad("run_id",
                 absl::StrCat("'", o.run_id, "' must be 1..100 characters of [A-Za-z0-9._-]"));
    }
    if (o.hostname.empty()) return Bad("hostname", "is required for a group");
  }
  TANDEM_CHECK_OK(CheckPositive("lease_timeout_s", o.lease_timeout));
  TANDEM_CHECK_OK(CheckPositive("step_timeout_s", o.step_timeout));
  TANDEM_CHECK_OK(CheckPositive("heartbeat_s", o.heartbeat_interval));
  TANDEM_CHECK_OK(CheckPositive("regroup_timeout_s", o.regroup_timeout));
  if (o.leader_timeout < 2 * o.heartbeat_interval) {
    return Bad("leader_timeout_s", absl::StrCat("must be at least twice --heartbeat_s (",
                                                absl::FormatDuration(o.heartbeat_interval),
                                                "), got ", absl::FormatDuration(o.leader_timeout)));
  }
#undef TANDEM_CHECK_OK
  return absl::OkStatus();
}

absl::StatusOr<SyntheticModel> ResolveSyntheticModel(const WorkerOptions& o) {
  const bool has_rank = o.synthetic.find(':') != std::string::npos;
  const std::string spec =
      has_rank ? o.synthetic : absl::StrCat(o.synthetic, ":", o.rank, "/", o.tp_size);
  absl::StatusOr<SyntheticModel> model = ParseSyntheticModel(spec);
  if (!model.ok()) return Bad("synthetic", std::string(model.status().message()));
  if (model->tp_rank != o.rank || model->tp_size != o.tp_size) {
    return Bad("synthetic",
               absl::StrCat("'", o.synthetic, "' is rank ", model->tp_rank, " of ", model->tp_size,
                            " but this process is --rank=", o.rank, " of --tp_size=", o.tp_size));
  }
  return model;
}

CommOptions GroupCommOptions(const WorkerOptions& o) {
  CommOptions comm;
  comm.backend = o.comm;
  comm.rank = o.rank;
  comm.size = o.tp_size;
  comm.rendezvous_address = o.rendezvous;
  comm.store_directory = o.rendezvous_dir;
  comm.run_id = o.run_id;
  comm.hostname = o.hostname;
  comm.connect_timeout = o.regroup_timeout;
  return comm;
}

}  // namespace worker
}  // namespace tandem
