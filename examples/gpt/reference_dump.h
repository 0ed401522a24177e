#pragma once
// --dump-reference FILE: what reference/check_against_pytorch.py needs to compare minidl's GPT with nanoGPT's in
// PyTorch. FILE is an ordinary checkpoint (Trainer::save: the initial weights under nanoGPT's names, the model's
// configuration in the metadata); FILE.reference (safetensors) holds the batches of 10 training iterations
// (ref.x, ref.y: int64 (10, B, T)), the first batch's logits (ref.logits), loss (ref.loss) and every
// parameter's gradient (ref.grad.<name>) from the initial weights, and the losses of the 10 AdamW iterations
// that follow from those weights (ref.losses, float64), with the optimizer's settings in the metadata. Dropout
// is off, so both frameworks compute the same function.
#include <memory>
#include <string>

#include "data.h"
#include "trainer.h"

namespace gpt {

/// The companion file of a --dump-reference FILE.
inline std::string reference_path(const std::string& dump) { return dump + ".reference"; }

/// Writes FILE and FILE.reference for `config` (its dropout set to 0) over `data`.
void dump_reference(TrainConfig config, const std::shared_ptr<const TokenData>& data, const std::string& path);

}  // namespace gpt
