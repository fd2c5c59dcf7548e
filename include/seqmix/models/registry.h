#pragma once
// The registry: sequence mixers, channel mixers and residual schemes built from spec strings such as
// "softmax:heads=4,rope=1". Unknown names or keys are errors that list the valid ones. The mixers are a list of
// declarations, each beside its layer (include/seqmix/layers/mixer_spec.h).
#include <string>
#include <vector>

#include "seqmix/io/spec.h"
#include "seqmix/layers/mixer.h"
#include "seqmix/layers/mixer_spec.h"
#include "seqmix/models/residual.h"
#include "seqmix/modules/channel_mixer.h"

namespace seqmix {

const std::vector<ComponentInfo>& mixer_infos();
const std::vector<ComponentInfo>& channel_mixer_infos();
const std::vector<ComponentInfo>& residual_infos();

// Every mixer's declaration, in `seqmix list` order (each is written beside its layer).
const std::vector<const MixerDeclaration*>& mixer_declarations();
// Parses a mixer spec once: its options validated (unknown names and keys, types, ranges) and read into the
// layer's Options struct, their cross-checks passed. Throws Error naming the mixer and the option at fault.
MixerSpec parse_mixer_spec(const std::string& spec);
Mixer build_mixer(const MixerSpec& spec, const MixerContext& context);
// nullptr for "none".
ChannelMixer build_channel_mixer(const std::string& spec, int64_t dim);
// blocks of sublayers_per_block sublayers each (2: mixer and channel mixer; 1 without channel mixers).
ResidualScheme build_residual(const std::string& spec, int64_t blocks, int64_t sublayers_per_block = 2);

// The mixer spec of a block's Memory Lobe under this residual scheme ("" when it has none): a single-head
// ELA with no RoPE and no output projection (ELA paper Table V), causal or bidirectional (lobe=auto:
// causal exactly when the block's mixer is).
std::string memory_lobe_spec(const std::string& residual_spec, bool causal_model);

// The spec with every option spelled out (defaults included), e.g. for config.yaml.
std::string resolve_mixer_spec(const std::string& spec);


}  // namespace seqmix
