// Conversions between gRPC and Abseil status values (same canonical codes).
#ifndef TANDEM_COMMON_GRPC_STATUS_H_
#define TANDEM_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tandem {

// Same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace tandem

#endif  // TANDEM_COMMON_GRPC_STATUS_H_
