#pragma once
// A mixer's declaration, written beside its layer (src/layers/<mixer>.cpp): its name and one-line meaning, each
// option bound to a field of the layer's Options struct (Field<O>, include/seqmix/io/declaration.h, as every
// registered component's: the default shown by `seqmix list` is the struct's own), notes for `seqmix list`, the
// checks across options, and how the model's context fills the rest. The
// registry (src/models/registry.cpp) is the list of these declarations; a spec string is parsed once, by
// parse_mixer_spec, into a MixerSpec holding the typed Options.
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

// A mixer's declaration with its Options type erased: the registry is a list of these.
struct MixerDeclaration {
  ComponentInfo info;
  // Has an identity value path for the probe model (MixerContext::raw_values).
  bool reads_raw_values = false;
  // Validated options -> the Options struct (an std::any holding O), its cross-option checks passed.
  std::function<std::any(const Options&)> parse;
  // The parsed Options, placed in the model's context -> the layer.
  std::function<Mixer(const std::any& options, const MixerContext&)> build;
};

// The declaration of a mixer on Options O: `fields` read a spec into O{} (an option left out keeps the struct's
// default), `check` tests the options together (it throws Error), `place` fills in what the model's context
// decides (the width, the longest sequence, raw values), and `make` builds the layer.
template <class O>
struct MixerDeclarationOf {
  std::string name, meaning;
  std::vector<Field<O>> fields;
  void (*place)(const MixerContext&, O&) = nullptr;
  Mixer (*make)(const O&) = nullptr;
  void (*check)(const O&) = nullptr;
  std::vector<std::string> notes = {};
  bool reads_raw_values = false;

  MixerDeclaration erase() const {
    MixerDeclaration d;
    d.info.name = name;
    d.info.meaning = meaning;
    for (const auto& f : fields) d.info.options.push_back(f.info);
    d.info.notes = notes;
    d.reads_raw_values = reads_raw_values;
    d.parse = [fields = fields, check = check](const Options& o) -> std::any {
      O options;
      for (const auto& f : fields) f.read(o, options);
      if (check) check(options);
      return options;
    };
    d.build = [place = place, make = make](const std::any& parsed, const MixerContext& context) -> Mixer {
      O options = std::any_cast<const O&>(parsed);
      place(context, options);
      return make(options);
    };
    return d;
  }
};

// A spec string parsed once: its declaration, its typed Options, and the spec with every option spelled out.
// Runs, models and benchmarks hold these, so the text is parsed where it enters (the command line, a config).
struct MixerSpec {
  MixerSpec() = default;
  MixerSpec(const MixerDeclaration* declaration, std::any options, std::string resolved)
      : declaration(declaration), options(std::move(options)), resolved(std::move(resolved)) {}
  // Parses `text` (the registry's parse_mixer_spec), so a spec string can stand where a MixerSpec is expected.
  MixerSpec(const std::string& text);  // NOLINT(google-explicit-constructor)
  MixerSpec(const char* text) : MixerSpec(std::string(text)) {}  // NOLINT(google-explicit-constructor)

  const MixerDeclaration* declaration = nullptr;
  std::any options;
  std::string resolved;
  const std::string& name() const { return declaration->info.name; }
};

// The resolved texts of `specs`, e.g. for config.yaml.
inline std::vector<std::string> resolved_texts(const std::vector<MixerSpec>& specs) {
  std::vector<std::string> texts;
  for (const auto& s : specs) texts.push_back(s.resolved);
  return texts;
}

}  // namespace seqmix
