#pragma once
// The everyday functional toolbox beyond functional.h: activations, embedding and one_hot, losses with LibTorch's
// options structs.
#include "minidl/nn/functional/activation.h"
#include "minidl/nn/functional/embedding.h"
#include "minidl/nn/functional/loss.h"
