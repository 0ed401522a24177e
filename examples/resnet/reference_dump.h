#pragma once
// --dump-reference FILE: what reference/check_against_pytorch.py needs to compare one minidl training step with
// PyTorch's. FILE is an ordinary checkpoint (Trainer::save: the initial weights, the model configuration in the
// metadata); FILE.reference (safetensors) holds the step's input (ref.x: the first batch-size training images
// through the augmentation, the network's (N, 3, 32, 32) input) and labels (ref.y), the loss (ref.loss) and logits
// (ref.logits), every parameter's gradient (ref.grad.<name>) and every parameter and buffer after SGD's update
// (ref.after.<name>), with the step's learning rate, momentum, weight decay and the device in the metadata.
#include <memory>
#include <string>

#include "image_set.h"
#include "trainer.h"

namespace resnet {

/// The companion file of a --dump-reference FILE.
inline std::string reference_path(const std::string& dump) { return dump + ".reference"; }

/// Writes FILE and FILE.reference for one step of `config` on the first images of `data`.
void dump_reference(TrainConfig config, const std::shared_ptr<const examples::ImageSet>& data, const std::string& path);

}  // namespace resnet
