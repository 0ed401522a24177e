#pragma once
// --dump-reference FILE: what reference/check_against_pytorch.py needs to compare one minidl training step with
// PyTorch's. FILE is an ordinary checkpoint (Trainer::save: the initial weights, the model configuration in the
// metadata); FILE.reference (safetensors) holds the step's real batch (ref.real: the first batch-size images of
// the data) and latent vectors (ref.noise), the step's five statistics (ref.loss_d, ref.loss_g, ref.d_x,
// ref.d_g_z1, ref.d_g_z2), the discriminator's gradients after its update (ref.grad_d.<name>), the generator's
// after its own (ref.grad_g.<name>), and every parameter and buffer between the two updates (ref.mid.<name>) and
// after the step (ref.after.<name>), with the optimizers' settings and the device in the metadata.
#include <memory>
#include <string>

#include "data.h"
#include "trainer.h"

namespace dcgan {

/// The companion file of a --dump-reference FILE.
inline std::string reference_path(const std::string& dump) { return dump + ".reference"; }

/// Writes FILE and FILE.reference for one step of `config` on the first images of `data`.
void dump_reference(TrainConfig config, const std::shared_ptr<const ImageSet>& data, const std::string& path);

}  // namespace dcgan
