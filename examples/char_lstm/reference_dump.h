#pragma once
// --dump-reference FILE: what reference/check_against_pytorch.py needs to compare minidl's character LSTM with
// PyTorch's. FILE is an ordinary checkpoint (Trainer::save: the initial weights under PyTorch's names, the
// configuration in the metadata); FILE.reference (safetensors) holds the first 10 training batches (ref.x, ref.y:
// int64 (10, T, B)); for the first batch run from random initial states ref.h0, ref.c0: the logits (ref.logits),
// the loss (ref.loss), the final states (ref.h_n, ref.c_n) and the gradients of every parameter (ref.grad.<name>)
// and of the initial states (ref.grad.h0, ref.grad.c0); and the losses of the 10 training iterations that follow
// from the initial weights (ref.losses, float64: Adam, clipping, the state carried and detached between
// batches), with the optimizer's settings in the metadata.
#include <memory>
#include <string>

#include "text_tokens.h"
#include "trainer.h"

namespace char_lstm {

/// The companion file of a --dump-reference FILE.
inline std::string reference_path(const std::string& dump) { return dump + ".reference"; }

/// Writes FILE and FILE.reference (and the checkpoint's companions) for `config` over `data`.
void dump_reference(TrainConfig config, const std::shared_ptr<const examples::TokenData>& data,
                    const std::string& path);

}  // namespace char_lstm
