// `tandem synth OUT_DIR`: writes a synthetic model directory (random weights with a
// real model's shapes, model/synthetic_model_dir.h) that every Tandem worker serves
// like any model: for memory and speed runs at real sizes. NOT A MODEL.
#ifndef TANDEM_CLIENT_SYNTH_COMMAND_H_
#define TANDEM_CLIENT_SYNTH_COMMAND_H_

#include "client/command.h"

namespace tandem::client {

Command SynthCommand();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_SYNTH_COMMAND_H_
