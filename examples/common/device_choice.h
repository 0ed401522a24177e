#pragma once
// The training device from a --device flag (cpu, cuda, cuda:N, auto), with the reason when no GPU is usable.
#include <minidl/device.h>

#include <string>
#include <vector>

namespace examples {

/// Why no GPU is usable: the first problem minidl's diagnosis finds (what `minidl info` prints first).
std::string no_gpu_reason();

/// cpu, cuda[:N] (a ValueError naming `flag` and the reason when no GPU is usable), or auto: the GPU when
/// usable, else the CPU with one log line saying why.
minidl::Device pick_device(const std::string& name, const std::string& flag = "--device");

/// The devices a program trains on, in order: with --compare the CPU and then the first GPU (the CPU alone, with
/// a warning saying why, when no GPU is usable), else pick_device(device).
std::vector<minidl::Device> training_devices(const std::string& device, bool compare);

}  // namespace examples
