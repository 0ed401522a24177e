#pragma once
// The everyday module toolbox beyond modules.h: containers (ModuleList, ModuleDict, Identity), activations,
// Embedding, and the loss modules.
#include "minidl/nn/modules/activation.h"
#include "minidl/nn/modules/container.h"
#include "minidl/nn/modules/embedding.h"
#include "minidl/nn/modules/loss.h"
