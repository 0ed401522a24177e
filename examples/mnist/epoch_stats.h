#pragma once
// What a pass over a split measures; the --metrics CSV that holds it is examples/common/classifier_metrics.h's.
#include "epoch_clock.h"

namespace mnist {

struct EpochStats {
  double loss = 0, accuracy = 0, seconds = 0, images_per_s = 0;
  /// A training epoch's seconds split into steady state and one-time work (evaluation: all steady).
  examples::EpochTiming timing;
};

}  // namespace mnist
