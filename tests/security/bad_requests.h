// Requests for the bad-input end-to-end test (bad_input_e2e_test.cc), against the
// bundled models (vocabulary kVocab) and a server run with --max_k=8, 2 MiB of KV
// cache per worker and max_batch_tokens 1024:
//  * the public API: one GenerateRequest edit per validation rule, with the status
//    code the coordinator must answer;
//  * the worker API: calls that hit every status code of worker.proto's header, on
//    the target leader and on the draft;
//  * builders of single-sequence worker requests (greedy sampling).
#ifndef TANDEM_TESTS_SECURITY_BAD_REQUESTS_H_
#define TANDEM_TESTS_SECURITY_BAD_REQUESTS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tandem/v1/tandem.pb.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem::security {

constexpr int kVocab = 2048;  // models/target and models/draft.

// A base request ("def add(a, b):", 4 new tokens) edited by `edit` must get `code`.
struct PublicCase {
  std::string name;
  std::function<void(v1::GenerateRequest&)> edit;
  grpc::StatusCode code;
};
std::vector<PublicCase> PublicCases();

// One call on a worker stub (with its context) that must answer `code`. The cases
// expect sequence 500 to hold 4 cached tokens first; they leave sequences 500, 602, 606
// and 700..709 to release.
struct WorkerCase {
  std::string name;
  std::function<grpc::Status(v1::Worker::Stub*, grpc::ClientContext*)> call;
  grpc::StatusCode code;
};
struct WorkerApiCases {
  std::vector<WorkerCase> target;  // For the target group's leader.
  std::vector<WorkerCase> draft;   // For the draft worker.
};
WorkerApiCases WorkerCases();

// Point-mass proposal of `token`.
v1::ProposedToken Proposal(int token);
// One greedy sequence `id` at `start` with `tokens` (and proposals).
v1::VerifyRequest VerifyOf(uint64_t id, uint32_t start, std::vector<int> tokens,
                           std::vector<v1::ProposedToken> proposals = {});
v1::DraftRequest DraftOf(uint64_t id, uint32_t start, std::vector<int> tokens, int k);
// `count` copies of `token` for sequence `id` at `start`.
v1::PrefillRequest PrefillOf(uint64_t id, uint32_t start, int count, int token = 7);

}  // namespace tandem::security

#endif  // TANDEM_TESTS_SECURITY_BAD_REQUESTS_H_
