// tandem.v1.ModelInfo for people and scripts (`tandem info`).
#ifndef TANDEM_CLIENT_MODEL_INFO_TEXT_H_
#define TANDEM_CLIENT_MODEL_INFO_TEXT_H_

#include <string>

#include "tandem/v1/tandem.pb.h"

namespace tandem::client {

// One "label  value" line per topic, newline-terminated: the target and draft models,
// the limits, the served methods, the BOS/EOS and stop token ids, and the sampling
// defaults a request's unset fields take.
std::string ModelInfoText(const v1::ModelInfo& info);

// The message in proto JSON with the .proto field names, every field printed (so that
// an empty stop_token_ids list or a 0 default is explicit); one line.
std::string ModelInfoJson(const v1::ModelInfo& info);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_MODEL_INFO_TEXT_H_
