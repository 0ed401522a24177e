#pragma once
// AdamW (Loshchilov & Hutter), as torch.optim.AdamW: Adam (adam.h) with the weight decay decoupled from the
// gradient: p *= 1 - lr * weight_decay, then the Adam update without weight decay. Default weight_decay 1e-2.
#include "minidl/optim/adam.h"

namespace minidl {
namespace optim {

using AdamWOptions = AdamFamilyOptions<true>;
using AdamW = AdamFamily<true>;

}  // namespace optim
}  // namespace minidl
