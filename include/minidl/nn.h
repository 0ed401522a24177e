#pragma once
#include "minidl/nn/functional.h"
#include "minidl/nn/init.h"
#include "minidl/nn/module.h"
#include "minidl/nn/modules.h"
#include "minidl/nn/modules/attention.h"
