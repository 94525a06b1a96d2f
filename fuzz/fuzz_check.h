// Invariant checks for fuzz targets: a broken invariant aborts, which libFuzzer (and
// the replay tests) report as a crash with the input that caused it.
#ifndef TANDEM_FUZZ_FUZZ_CHECK_H_
#define TANDEM_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

#endif  // TANDEM_FUZZ_FUZZ_CHECK_H_
