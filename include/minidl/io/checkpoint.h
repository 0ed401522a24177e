#pragma once
// Model checkpoints and training state in the safetensors format, readable by PyTorch's
// safetensors.torch.load_file. A model file holds one tensor per entry of named_parameters() and
// named_buffers() under its dotted name, in the tensor's dtype (safetensors_name(): F32, F64, BF16, F16, I64,
// ..., little-endian; BF16 and F16 bit for bit as PyTorch stores them). A training state file holds what
// --resume needs besides the model: optimizer tensors, epoch, scheduler values and the state of every random
// number generator. Every write is atomic (temporary file + rename).
#include <cstdint>
#include <map>
#include <string>

#include "minidl/nn/module.h"
#include "minidl/random.h"
#include "minidl/tensor.h"

namespace minidl::io {

/// The module's parameters and buffers by dotted name (the tensors themselves, not copies). Throws
/// ValueError when a parameter and a buffer share a name.
std::map<std::string, Tensor> state_dict(const nn::Module& module);

/// Writes the tensors (copied to the CPU, in their dtypes: BF16 and F16 included) and the string metadata to `path` atomically.
/// Throws ValueError for an undefined tensor or a bad name, IOError (old file untouched) when writing fails.
void save_state_dict(const std::map<std::string, Tensor>& tensors, const std::string& path,
                     const std::map<std::string, std::string>& metadata = {});

/// Saves the module's parameters then buffers, in registration order, as save_state_dict() does.
void save(const nn::Module& module, const std::string& path, const std::map<std::string, std::string>& metadata = {});

/// Reads and validates `path`, then checks it against the module: every name present on both sides, equal
/// shapes and dtypes. Every mismatch (missing, unexpected, wrong shape, wrong dtype) is listed in one
/// FormatError naming the file. Only when everything matches are the values copied into the module's
/// tensors on their current devices, so a failed load leaves the model unchanged. Throws IOError when the
/// file cannot be read, FormatError when it is not valid safetensors.
void load(nn::Module& module, const std::string& path);

/// Everything besides the model that a resumed run needs to continue exactly.
struct TrainingState {
  std::int64_t epoch = 0;                   ///< >= 0
  std::map<std::string, Tensor> optimizer;  ///< Optimizer::state_dict()
  std::map<std::string, double> scheduler;  ///< scheduler values, restored bit-exactly
  RngState rng;                             ///< get_rng_state()
  std::map<std::string, std::string> extra; ///< anything else the program wants back
};

/// One safetensors file: optimizer tensors as "optimizer.<name>"; epoch, scheduler values ("scheduler.<name>",
/// shortest text that reads back to the same double), RNG state ("rng.*") and extra ("extra.<key>") in
/// __metadata__. Atomic. Throws ValueError for a negative epoch or an undefined tensor, IOError on write errors.
void save_training_state(const std::string& path, const TrainingState& state);

/// Reads a file written by save_training_state(). Throws IOError when it cannot be read, FormatError naming
/// the file and the key when it is not valid safetensors, not a training state, or a value does not parse.
TrainingState load_training_state(const std::string& path);

}  // namespace minidl::io
