#pragma once
// --export-logits: the model's outputs for a few test images, saved next to the images, so that
// tests/interop/torch_logits.py can check that PyTorch, given the --save checkpoint, computes the same logits.
#include <minidl/data/dataset.h>

#include <cstdint>
#include <string>

#include "net.h"

namespace mnist {

/// Runs the first min(count, images.size()) samples of `images` through `model` in eval mode without
/// gradients (restoring the model's mode afterwards) and writes a safetensors file with "input" (N, 1, 28, 28)
/// and "logits" (N, 10), both float32 (io::save_state_dict: atomic). Throws ValueError for count < 1, IOError
/// when the file cannot be written.
void export_logits(Net& model, const minidl::data::Dataset& images, std::int64_t count, const std::string& path);

}  // namespace mnist
