// Presents a tandem Store as gloo's rendezvous Store, so gloo's connectFullMesh can
// rendezvous through any of our stores (file, in-memory, gRPC). gloo reports store
// failures only by exception: the adapter throws gloo::IoException and keeps the
// first underlying absl::Status so the caller can return it unchanged.
#ifndef TANDEM_COMM_GLOO_STORE_ADAPTER_H_
#define TANDEM_COMM_GLOO_STORE_ADAPTER_H_

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/store.h"

namespace tandem {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  // Borrows `store`. `default_timeout` bounds get() and waits gloo makes without one.
  GlooStoreAdapter(tandem::Store& store, absl::Duration default_timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // OK, or the first store error seen.
  absl::Status first_error() const;

 private:
  [[noreturn]] void Fail(absl::Status status);

  tandem::Store& store_;
  const absl::Duration default_timeout_;
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMM_GLOO_STORE_ADAPTER_H_
