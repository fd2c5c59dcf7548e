#pragma once
// A mixer's declaration, written beside its layer (src/layers/<mixer>.cpp), on the declaration template every
// registered component shares (include/seqmix/io/declaration.h: each option bound to a field of the layer's Options
// struct, so the default shown by `seqmix list` is the struct's own). The registry (src/models/registry.cpp) is the
// list of these declarations; a spec string is parsed once, by parse_spec as every kind's, into a MixerSpec holding
// the typed Options.
#include <any>
#include <functional>
#include <memory>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqmix/io/declaration.h"
#include "seqmix/io/spec.h"
#include "seqmix/ops/impl.h"

namespace seqmix {

// As in seqmix/layers/mixer.h (kept out: this header is light, for the structs that hold parsed specs).
class MixerImpl;
using Mixer = std::shared_ptr<MixerImpl>;

// What the model tells a mixer about where it sits.
struct MixerContext {
  int64_t dim = 128;
  int64_t max_len = 0;  // longest sequence the model will see (0 = unknown)
  // The probe reads the raw inputs: the value path is the identity and the read is returned without an
  // output projection (FEM paper App. P). Mixers without such a path refuse.
  bool raw_values = false;
};

// A mixer's declaration, on the one declaration template of every component (DeclarationOf, declaration.h): its
// name and meaning, each option bound to a field of its layer's Options struct O, the checks across options, notes
// for `seqmix list`, and `make`, which places the options in the model's context (the width, the longest sequence,
// raw values) and builds the layer. The registry is the list of these (src/models/registry.cpp).
using MixerDeclaration = Declaration<Mixer, const MixerContext&>;
template <class O>
using MixerDeclarationOf = DeclarationOf<O, Mixer, const MixerContext&>;

// What a mixer's make throws when the model asks for raw values (MixerContext::raw_values: the probe model) and the
// mixer has no identity value path; build_mixer turns it into an Error naming the mixer.
struct NoRawValueRead : std::runtime_error {
  NoRawValueRead() : std::runtime_error("the mixer has no raw-value read") {}
};
inline void refuse_raw_values(const MixerContext& context) {
  if (context.raw_values) throw NoRawValueRead();
}

// The make of a mixer whose layer L is built from its Options O with the model's width: a layer whose options have a
// raw-value read (O::raw_values: softmax, relu) takes the probe's raw values; any other refuses them.
template <class L, class O>
Mixer make_layer(const O& options, const MixerContext& context) {
  O placed = options;
  placed.dim = context.dim;
  if constexpr (requires { placed.raw_values; })
    placed.raw_values = context.raw_values;
  else
    refuse_raw_values(context);
  return std::make_shared<L>(placed);
}

// A mixer spec parsed once (parse_spec against the mixers' declarations: models/registry.h): its declaration, its
// typed Options and its text with every option spelled out. Runs, models and benchmarks hold these, so the text is
// parsed where it enters (the command line, a config).
struct MixerSpec : ParsedSpec<Mixer, const MixerContext&> {
  MixerSpec() = default;
  explicit MixerSpec(ParsedSpec<Mixer, const MixerContext&> parsed) : ParsedSpec(std::move(parsed)) {}
  // Parses `text` (the registry's parse_mixer_spec), so a spec string can stand where a MixerSpec is expected.
  MixerSpec(const std::string& text);  // NOLINT(google-explicit-constructor)
  MixerSpec(const char* text) : MixerSpec(std::string(text)) {}  // NOLINT(google-explicit-constructor)
};

// The resolved texts of `specs`, e.g. for config.yaml.
inline std::vector<std::string> resolved_texts(const std::vector<MixerSpec>& specs) {
  std::vector<std::string> texts;
  for (const auto& s : specs) texts.push_back(s.text);
  return texts;
}

}  // namespace seqmix
