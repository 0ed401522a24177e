#pragma once
// The functional ops of generative models' layers: transposed and 1-d convolutions, padding, upsampling, pixel
// shuffle.
#include "minidl/nn/functional/conv.h"
#include "minidl/nn/functional/padding.h"
#include "minidl/nn/functional/pixelshuffle.h"
#include "minidl/nn/functional/upsampling.h"
