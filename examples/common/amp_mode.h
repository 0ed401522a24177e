#pragma once
// --amp of the example programs: the mode's name and autocast dtype, the autocast region of a training or evaluation
// pass, and a GradScaler's state in a checkpoint's training state. PyTorch's recipe: the forward pass and the loss
// run under autocast (minidl/autocast.h) in bfloat16 or float16, the parameters stay float32 and get float32
// gradients, backward() and the update run outside the region; float16 adds a GradScaler
// (minidl/amp/grad_scaler.h), whose skip of an overflowed step is decided on the device, so a captured step stays
// correct. bfloat16 has float32's range and needs no scaler.
#include <minidl/amp/grad_scaler.h>
#include <minidl/minidl.h>

#include <map>
#include <optional>
#include <string>

namespace examples {

/// The autocast dtype of an --amp value: "bf16" bfloat16, "fp16" float16, "off" none (float32 training).
/// Throws ValueError naming the value and the accepted ones for anything else.
std::optional<minidl::DType> parse_amp(const std::string& mode);
/// The --amp value of an autocast dtype ("bf16", "fp16", "off").
std::string amp_name(const std::optional<minidl::DType>& dtype);
/// Whether a run with this autocast dtype needs a GradScaler (float16's 5 exponent bits).
inline bool needs_grad_scaler(const std::optional<minidl::DType>& dtype) { return dtype == minidl::kFloat16; }

/// The scaler's state_dict() as text entries "grad_scaler.<key>" of a checkpoint's training state (extra), and
/// back: a float16 run resumed from a checkpoint continues with the scale it had. load_grad_scaler does nothing when
/// `extra` holds no scaler state (a checkpoint of a bf16 or float32 run), and throws FormatError naming the key when
/// a value does not parse.
void save_grad_scaler(const minidl::amp::GradScaler& scaler, std::map<std::string, std::string>& extra);
void load_grad_scaler(minidl::amp::GradScaler& scaler, const std::map<std::string, std::string>& extra);

/// An autocast region for `amp` on `device`'s type, or one that turns autocast off when `amp` is none.
class AmpRegion {
 public:
  AmpRegion(const std::optional<minidl::DType>& amp, const minidl::Device& device)
      : guard_(device.type(), amp, amp.has_value()) {}

 private:
  minidl::autocast::AutocastGuard guard_;
};

}  // namespace examples
