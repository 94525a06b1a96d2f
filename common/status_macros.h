// Status propagation helper shared by the C++ units.
#ifndef TANDEM_COMMON_STATUS_MACROS_H_
#define TANDEM_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"

// Evaluates `expr` (an absl::Status) once and returns it from the enclosing function
// when it is not OK.
#define TANDEM_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    const absl::Status _tandem_status = (expr);      \
    if (!_tandem_status.ok()) return _tandem_status; \
  } while (0)

#endif  // TANDEM_COMMON_STATUS_MACROS_H_
