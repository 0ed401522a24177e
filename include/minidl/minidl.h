#pragma once
// Umbrella header: everything a user of minidl needs.
#include "minidl/autograd.h"
#include "minidl/config.h"
#include "minidl/cuda.h"
#include "minidl/device.h"
#include "minidl/dtype.h"
#include "minidl/errors.h"
#include "minidl/ops.h"
#include "minidl/tensor.h"
#include "minidl/threads.h"
