#include "seqmix/models/sequence_model.h"

#include <torch/torch.h>

namespace seqmix {

int64_t SequenceModelImpl::parameter_count() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace seqmix
