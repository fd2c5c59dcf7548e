#pragma once
// The registry: sequence mixers, channel mixers and residual schemes built from spec strings such as
// "softmax:heads=4,rope=1". Unknown names or keys are errors that list the valid ones. Each kind is a list of
// declarations (include/seqmix/io/declaration.h): the mixers' each beside its layer (include/seqmix/layers/
// mixer_spec.h), the channel mixers' and residual schemes' in src/models/registry.cpp.
#include <string>
#include <vector>

#include "seqmix/io/declaration.h"
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
const std::vector<MixerDeclaration>& mixer_declarations();
// Parses a mixer spec once: its options validated (unknown names and keys, types, ranges) and read into the
// layer's Options struct, their cross-checks passed. Throws Error naming the mixer and the option at fault.
MixerSpec parse_mixer_spec(const std::string& spec);
Mixer build_mixer(const MixerSpec& spec, const MixerContext& context);

// Channel mixers, built for a width; "none" builds nullptr.
using ChannelMixerDeclaration = Declaration<ChannelMixer, int64_t>;
const std::vector<ChannelMixerDeclaration>& channel_mixer_declarations();
// A channel-mixer spec parsed once ("swiglu", "moe:experts=4", "none"); made from text, it parses it.
struct ChannelMixerSpec : ParsedSpec<ChannelMixer, int64_t> {
  ChannelMixerSpec(const std::string& text);                                   // NOLINT(google-explicit-constructor)
  ChannelMixerSpec(const char* text) : ChannelMixerSpec(std::string(text)) {}  // NOLINT(google-explicit-constructor)
};
ChannelMixer build_channel_mixer(const ChannelMixerSpec& spec, int64_t dim);

// Residual schemes, built for blocks of sublayers_per_block sublayers each (2: mixer and channel mixer; 1 without
// channel mixers).
using ResidualDeclaration = Declaration<ResidualScheme, int64_t, int64_t>;
const std::vector<ResidualDeclaration>& residual_declarations();
struct ResidualSpec : ParsedSpec<ResidualScheme, int64_t, int64_t> {
  ResidualSpec(const std::string& text);                               // NOLINT(google-explicit-constructor)
  ResidualSpec(const char* text) : ResidualSpec(std::string(text)) {}  // NOLINT(google-explicit-constructor)
};
ResidualScheme build_residual(const ResidualSpec& spec, int64_t blocks, int64_t sublayers_per_block = 2);

// A block's Memory Lobe under this residual scheme (nullptr when it has none): a single-head ELA with no RoPE and no
// output projection (ELA paper Table V), causal or bidirectional (lobe=auto: causal exactly when the block's
// mixer is).
Mixer build_memory_lobe(const ResidualSpec& residual, int64_t dim, bool causal_model);

// The spec with every option spelled out (defaults included), e.g. for config.yaml.
std::string resolve_mixer_spec(const std::string& spec);


}  // namespace seqmix
