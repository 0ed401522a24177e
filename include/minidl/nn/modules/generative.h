#pragma once
// The layer modules of generative models: transposed and 1-d convolutions, padding, upsampling, pixel shuffle.
#include "minidl/nn/modules/conv.h"
#include "minidl/nn/modules/padding.h"
#include "minidl/nn/modules/pixelshuffle.h"
#include "minidl/nn/modules/upsampling.h"
