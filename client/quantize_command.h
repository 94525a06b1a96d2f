// `tandem quantize IN_DIR OUT_DIR`: writes a q8_0 (or --format=q4_0) copy of a Hugging Face model
// directory (model/quantize_model.h) that every Tandem worker loads like any model.
#ifndef TANDEM_CLIENT_QUANTIZE_COMMAND_H_
#define TANDEM_CLIENT_QUANTIZE_COMMAND_H_

#include "client/command.h"

namespace tandem::client {

Command QuantizeCommand();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_QUANTIZE_COMMAND_H_
