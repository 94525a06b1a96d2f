// tandem-worker: one process of a Tandem deployment. --role=draft serves the draft
// model; --role=target serves the target model, alone (--tp_size=1) or as rank
// --rank of a tensor-parallel group whose rank 0 (the leader) serves tandem.v1.Worker
// while the followers serve only gRPC health (for Kubernetes probes).
//
// Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT, or the leader's shutdown for
// a follower); 2 when a flag or the model directory is bad (one line on stderr); 1 on
// other start-up failures.
#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/server.h"
#include "common/tls.h"
#include "kernels/backend_factory.h"
#include "model/llama.h"
#include "model/medusa_heads.h"
#include "model/weights.h"
#include "worker/command_line.h"
#include "worker/group_membership.h"
#include "worker/medusa_proposer.h"
#include "worker/model_executor.h"
#include "worker/model_shard.h"
#include "worker/target_group.h"
#include "worker/target_proposer.h"
#include "worker/timed_communicator.h"
#include "worker/worker_model.h"
#include "worker/worker_options.h"
#include "worker/worker_service.h"

ABSL_FLAG(std::string, role, "target", "Worker role: draft or target.");
ABSL_FLAG(int, rank, 0, "Tensor-parallel rank of this process; 0 is the group leader.");
ABSL_FLAG(int, tp_size, 1, "Processes in the target group (1 for the draft).");
ABSL_FLAG(std::string, model_dir, "",
          "Hugging Face model directory (config.json, model.safetensors or an index).");
ABSL_FLAG(std::string, synthetic, "",
          "Benchmarks only, instead of --model_dir: random weights with the real shapes of "
          "llama-2-7b, llama-2-70b (or llama-2-70b-shard) or tiny, for this --rank of "
          "--tp_size (or an explicit ':R/N'). NOT A MODEL: outputs are meaningless.");
ABSL_FLAG(std::string, backend, "cpu", "Compute backend: cpu or cuda.");
ABSL_FLAG(bool, medusa, true,
          "Target leader: serve Medusa heads (method MEDUSA) when --model_dir has "
          "medusa_lm_head.safetensors; false ignores them.");
ABSL_FLAG(int, threads, 0, "Compute threads; 0 = one per hardware thread.");
ABSL_FLAG(int, kv_cache_mb, 256, "KV cache budget of this rank, MiB.");
ABSL_FLAG(std::string, kv_dtype, "f32", "KV cache element type: f32, f16 or bf16.");
ABSL_FLAG(int, block_size, 16, "Tokens per KV cache block.");
ABSL_FLAG(int, max_batch_tokens, 1024, "Most positions (rows) in one forward pass.");
ABSL_FLAG(int, max_speculative_tokens, 16, "Most proposals per sequence in Draft/Verify (K).");
ABSL_FLAG(std::string, listen, "0.0.0.0:50061",
          "host:port to serve on (followers serve only gRPC health there).");
ABSL_FLAG(std::string, comm, "tcp",
          "Collective backend of a target group: tcp (CPU, Tandem's own TCP mesh; sleeps "
          "while waiting, suits ranks that share cores), gloo (CPU, gloo over TCP; "
          "busy-polls), nccl (GPU) or local (one rank).");
ABSL_FLAG(std::string, rendezvous, "",
          "host:port of the coordinator's tandem.v1.Rendezvous service (group rendezvous).");
ABSL_FLAG(std::string, rendezvous_dir, "",
          "Directory shared by the ranks on one machine, used instead of --rendezvous.");
ABSL_FLAG(std::string, run_id, "", "Identifies this group's run in the rendezvous store.");
ABSL_FLAG(std::string, hostname, "127.0.0.1",
          "Address gloo listens on and publishes to the other ranks (pod IP on a cluster).");
ABSL_FLAG(double, lease_timeout_s, 120,
          "Sequences untouched this long are released (a restarted coordinator leaks nothing).");
ABSL_FLAG(int, proposal_top_k, 32, "Draft: default size of the sparse proposal q.");
ABSL_FLAG(double, step_timeout_s, 30,
          "Bound on each collective of a step; a rank silent that long counts as lost.");
ABSL_FLAG(double, leader_timeout_s, 10,
          "Follower: no message from the leader for this long means the leader is gone.");
ABSL_FLAG(double, heartbeat_s, 1, "Leader: heartbeat to the followers after this long idle.");
ABSL_FLAG(double, regroup_timeout_s, 15, "Bound on one attempt to (re-)form the target group.");
ABSL_FLAG(int, max_message_bytes, 64 << 20,
          "Largest request or response message, bytes; larger ones are refused with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of this worker; with --tls_key turns TLS on. Also the "
          "client certificate shown to the rendezvous service.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, health_listen, "",
          "host:port of an extra plaintext server with only gRPC health (for probes that "
          "cannot do TLS, e.g. Kubernetes gRPC probes); empty = none.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle: callers must present a certificate it signed (mutual TLS), and "
          "the rendezvous service's certificate must chain to it.");

namespace tandem {
namespace worker {
namespace {

[[noreturn]] void Die(const absl::Status& status, int code) {
  std::string message = absl::StrReplaceAll(status.message(), {{"\n", " "}});
  std::fprintf(stderr, "tandem-worker: %s\n", message.c_str());
  std::fflush(stderr);
  std::exit(code);
}

absl::Duration Seconds(double s) { return absl::Seconds(s); }

WorkerOptions OptionsFromFlags() {
  WorkerOptions o;
  o.role = absl::GetFlag(FLAGS_role);
  o.rank = absl::GetFlag(FLAGS_rank);
  o.tp_size = absl::GetFlag(FLAGS_tp_size);
  o.model_dir = absl::GetFlag(FLAGS_model_dir);
  o.synthetic = absl::GetFlag(FLAGS_synthetic);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.kv_cache_mb = absl::GetFlag(FLAGS_kv_cache_mb);
  o.kv_dtype = absl::GetFlag(FLAGS_kv_dtype);
  o.block_size = absl::GetFlag(FLAGS_block_size);
  o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.max_speculative_tokens = absl::GetFlag(FLAGS_max_speculative_tokens);
  o.listen = absl::GetFlag(FLAGS_listen);
  o.comm = absl::GetFlag(FLAGS_comm);
  o.rendezvous = absl::GetFlag(FLAGS_rendezvous);
  o.rendezvous_dir = absl::GetFlag(FLAGS_rendezvous_dir);
  o.run_id = absl::GetFlag(FLAGS_run_id);
  o.hostname = absl::GetFlag(FLAGS_hostname);
  o.lease_timeout = Seconds(absl::GetFlag(FLAGS_lease_timeout_s));
  o.proposal_top_k = absl::GetFlag(FLAGS_proposal_top_k);
  o.step_timeout = Seconds(absl::GetFlag(FLAGS_step_timeout_s));
  o.leader_timeout = Seconds(absl::GetFlag(FLAGS_leader_timeout_s));
  o.heartbeat_interval = Seconds(absl::GetFlag(FLAGS_heartbeat_s));
  o.regroup_timeout = Seconds(absl::GetFlag(FLAGS_regroup_timeout_s));
  return o;
}

// Adds a target leader's proposers to *out: Medusa when --model_dir has heads and
// --medusa is on. Heads that do not load are a start-up error naming the file.
absl::Status AddTargetProposers(const WorkerOptions& options, const LlamaConfig& config,
                                Backend* backend, TargetProposers* out) {
  if (options.role != "target" || !options.is_leader() || options.model_dir.empty() ||
      !absl::GetFlag(FLAGS_medusa)) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<MedusaHostWeights>> heads =
      LoadMedusaHeads(options.model_dir, config);
  if (!heads.ok()) {
    return absl::Status(heads.status().code(), absl::StrCat("--model_dir=", options.model_dir, ": ",
                                                            heads.status().message()));
  }
  if (!heads->has_value()) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<MedusaHeads>> runtime = MedusaHeads::Create(**heads, backend);
  if (!runtime.ok()) return runtime.status();
  out->Add(std::make_unique<MedusaTargetProposer>(*std::move(runtime)));
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Tandem worker: serves a draft model or one rank of a tensor-parallel target "
      "model.\n\n"
      "  tandem-worker --role=draft --model_dir=models/draft --listen=0.0.0.0:50061\n"
      "  tandem-worker --role=target --model_dir=models/target --tp_size=4 --rank=R \\\n"
      "      --comm=gloo --rendezvous_dir=/tmp/tandem-rdv --run_id=demo "
      "--listen=127.0.0.1:5007R\n");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "worker/");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.normalize_filename = [](absl::string_view file) { return std::string(file); };
  absl::SetFlagsUsageConfig(usage);

  if (absl::Status s = CheckCommandLine(argc, argv); !s.ok()) Die(s, 2);
  absl::ParseCommandLine(argc, argv);
  const WorkerOptions options = OptionsFromFlags();
  if (absl::Status s = ValidateWorkerOptions(options); !s.ok()) Die(s, 2);
  // TLS files are checked before the (slow) model load.
  const TlsFiles tls{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                     absl::GetFlag(FLAGS_tls_ca), "tls"};
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_credentials =
      MakeServerCredentials(tls);
  if (!server_credentials.ok()) Die(server_credentials.status(), 2);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> rendezvous_credentials =
      MakeChannelCredentials(tls);
  if (!rendezvous_credentials.ok()) Die(rendezvous_credentials.status(), 2);
  if (absl::GetFlag(FLAGS_max_message_bytes) < 1024) {
    Die(absl::InvalidArgumentError(
            absl::StrCat("--max_message_bytes=", absl::GetFlag(FLAGS_max_message_bytes),
                         " must be at least 1024 bytes")),
        2);
  }
  // Compute backend (kernels/backend_factory.h); cuda uses device rank % visible devices.
  absl::StatusOr<std::unique_ptr<Backend>> backend_or =
      MakeBackend(options.backend, options.threads, options.rank);
  if (!backend_or.ok()) {
    Die(absl::Status(backend_or.status().code(), absl::StrCat("--backend=", options.backend, ": ",
                                                              backend_or.status().message())),
        2);
  }
  absl::StatusOr<LlamaWeights> weights = LoadWorkerWeights(options);
  if (!weights.ok()) Die(weights.status(), 2);
  // Before logging starts, so that bad heads are one line on stderr like every start-up
  // error.
  TargetProposers target_proposers;
  if (absl::Status s =
          AddTargetProposers(options, weights->config, backend_or->get(), &target_proposers);
      !s.ok()) {
    Die(s, 2);
  }

  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  if (target_proposers.Find(v1::SPECULATION_METHOD_MEDUSA) != nullptr) {
    LOG(INFO) << "tandem-worker: serving Medusa heads (method MEDUSA) from " << options.model_dir;
  }
  InstallShutdownSignalHandlers();
  std::unique_ptr<Backend> backend = *std::move(backend_or);
  std::unique_ptr<TimedCommunicator> comm;
  if (options.is_group()) {
    comm = std::make_unique<TimedCommunicator>(options.rank, options.tp_size, options.comm);
  }
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Create(*weights, backend.get(), comm.get(), WorkerModelOptions(options));
  if (!model.ok()) Die(model.status(), 2);
  LOG(INFO) << "tandem-worker: " << options.role << " rank " << options.rank << " of "
            << options.tp_size << ", model " << WorkerModelName(options) << " ("
            << weights->config.NumParameters() << " parameters), KV "
            << (*model)->kv_stats().total_blocks << " blocks of " << options.block_size << " ("
            << options.kv_dtype << "); " << backend->Description();
  // The model holds what it reads: views of the mapped checkpoint, or its own copies
  // (q8_0/q4_0 tiles on cpu, device memory on cuda). Dropping the host tensors unmaps
  // what no weight uses, so only those copies stay resident.
  *weights = LlamaWeights{};

  std::unique_ptr<GroupMembership> membership;
  if (options.is_group()) {
    CommOptions comm_options = GroupCommOptions(options);
    if (!options.rendezvous.empty() && ClientTlsEnabled(tls)) {
      comm_options.rendezvous_credentials = *rendezvous_credentials;
    }
    absl::StatusOr<std::unique_ptr<GroupMembership>> opened = GroupMembership::Open(comm_options);
    if (!opened.ok()) {
      Die(absl::Status(opened.status().code(),
                       absl::StrCat("rendezvous store: ", opened.status().message())),
          1);
    }
    membership = *std::move(opened);
  }
  GroupTimeouts timeouts;
  timeouts.step = options.step_timeout;
  timeouts.heartbeat_interval = options.heartbeat_interval;
  timeouts.leader_timeout = options.leader_timeout;

  ServerOptions server_options;
  server_options.listen_address = options.listen;
  server_options.credentials = *server_credentials;
  server_options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  // Optional plaintext health-only server that mirrors the main server's health.
  std::unique_ptr<GrpcServer> health_server;
  if (!absl::GetFlag(FLAGS_health_listen).empty()) {
    ServerOptions health_options;
    health_options.listen_address = absl::GetFlag(FLAGS_health_listen);
    // It stands in for the main port: a leader's or draft's lists tandem.v1.Worker.
    if (options.is_leader()) health_options.health_services = {v1::Worker::service_full_name()};
    auto started = GrpcServer::Start(health_options, {});
    if (!started.ok()) Die(started.status(), 1);
    health_server = *std::move(started);
  }
  const auto mirror_health = [&](bool serving) {
    if (health_server != nullptr) health_server->SetServing(serving);
  };

  if (!options.is_leader()) {
    // Follower: health only; the group loop runs until the leader says shutdown.
    auto server = GrpcServer::Start(server_options, {});
    if (!server.ok()) Die(server.status(), 1);
    ModelShard shard(*std::move(model));
    std::atomic<bool> done{false};
    std::thread loop([&] {
      absl::Status status = RunFollower(
          *comm, shard, *membership, timeouts, [] { return ShutdownRequested(); },
          [&](bool serving) {
            (*server)->SetServing(serving);
            mirror_health(serving);
          });
      LOG(INFO) << "tandem-worker: follower loop ended: " << status;
      done = true;
      RequestShutdown();
    });
    WaitForShutdownSignal();
    (*server)->Shutdown(absl::Seconds(1));
    if (health_server != nullptr) health_server->Shutdown(absl::ZeroDuration());
    if (done) {
      loop.join();
      return 0;
    }
    // A signal: the loop may be blocked in a collective for up to --leader_timeout_s;
    // this rank's state is of no use to anyone, so leave now.
    LOG(INFO) << "tandem-worker: follower exiting on signal";
    google::FlushLogFiles(google::GLOG_INFO);
    std::fflush(nullptr);
    _exit(0);
  }

  std::unique_ptr<ModelExecutor> executor;
  TargetGroupLeader* leader = nullptr;
  if (options.is_group()) {
    auto group = std::make_unique<TargetGroupLeader>(
        std::move(comm), std::make_unique<ModelShard>(*std::move(model)), std::move(membership),
        timeouts);
    leader = group.get();
    executor = std::move(group);
  } else {
    executor = std::make_unique<LocalExecutor>(*std::move(model));
  }
  WorkerServiceOptions service_options;
  service_options.role = options.role == "draft" ? v1::WORKER_ROLE_DRAFT : v1::WORKER_ROLE_TARGET;
  service_options.max_speculative_tokens = options.max_speculative_tokens;
  service_options.proposal_top_k = options.proposal_top_k;
  service_options.lease_timeout = options.lease_timeout;
  service_options.model_name = WorkerModelName(options);
  service_options.synthetic = !options.synthetic.empty();
  service_options.backend = options.backend;
  service_options.target_proposers = &target_proposers;
  WorkerService service(executor.get(), service_options);
  server_options.health_services = {v1::Worker::service_full_name()};
  auto server = GrpcServer::Start(server_options, {&service});
  if (!server.ok()) Die(server.status(), 1);
  LOG(INFO) << "tandem-worker: serving tandem.v1.Worker on " << (*server)->address()
            << " (instance " << service.instance_id() << ")";
  service.StartLeaseReaper();
  if (leader != nullptr) {
    leader->Start([&](bool serving) {
      (*server)->SetServing(serving);
      mirror_health(serving);
    });
  } else {
    (*server)->SetServing(true);
    mirror_health(true);
  }

  const int signal = WaitForShutdownSignal();
  LOG(INFO) << "tandem-worker: shutting down (signal " << signal << ")";
  (*server)->SetServing(false);
  mirror_health(false);
  (*server)->Shutdown(absl::Seconds(30));  // Finishes the step in flight.
  if (health_server != nullptr) health_server->Shutdown(absl::ZeroDuration());
  service.Stop();
  if (leader != nullptr) leader->Shutdown();  // Tells the followers to exit.
  return 0;
}

}  // namespace
}  // namespace worker
}  // namespace tandem

int main(int argc, char** argv) { return tandem::worker::Run(argc, argv); }
