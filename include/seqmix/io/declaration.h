#pragma once
// One way to declare every registered component (mixers, FEM's priors, channel mixers, residual schemes, models):
// each option bound to a field of the component's Options struct O, so its default is O{}'s own, written once,
// and the validated options read into O in one place. A spec string is parsed once, where it enters (a command
// line, a config, an enclosing spec), into a ParsedSpec holding the typed Options.
#include <any>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqmix/io/spec.h"
#include "seqmix/ops/impl.h"

namespace seqmix {

// One option of an Options struct O: its declaration (key, type, default from O{}, meaning, bounds) and how a
// validated value sets the field.
template <class O>
struct Field {
  OptionInfo info;
  std::function<void(const Options&, O&)> read;

  static Field integer(const std::string& key, int64_t O::*member, std::string meaning,
                       double min = -std::numeric_limits<double>::infinity(),
                       double max = std::numeric_limits<double>::infinity()) {
    return {OptionInfo::integer(key, O{}.*member, std::move(meaning), min, max),
            [key, member](const Options& o, O& out) { out.*member = o.integer(key); }};
  }
  // A count or seed held unsigned (the option is read as a non-negative integer).
  static Field integer(const std::string& key, uint64_t O::*member, std::string meaning, double min = 0,
                       double max = std::numeric_limits<double>::infinity()) {
    return {OptionInfo::integer(key, static_cast<int64_t>(O{}.*member), std::move(meaning), min, max),
            [key, member](const Options& o, O& out) { out.*member = static_cast<uint64_t>(o.integer(key)); }};
  }
  static Field real(const std::string& key, double O::*member, std::string meaning,
                    double min = -std::numeric_limits<double>::infinity(),
                    double max = std::numeric_limits<double>::infinity()) {
    return {OptionInfo::real(key, O{}.*member, std::move(meaning), min, max),
            [key, member](const Options& o, O& out) { out.*member = o.real(key); }};
  }
  static Field flag(const std::string& key, bool O::*member, std::string meaning) {
    return {OptionInfo::flag(key, O{}.*member, std::move(meaning)),
            [key, member](const Options& o, O& out) { out.*member = o.flag(key); }};
  }
  static Field text(const std::string& key, std::string O::*member, std::string meaning) {
    return {OptionInfo::text(key, O{}.*member, std::move(meaning)),
            [key, member](const Options& o, O& out) { out.*member = o.text(key); }};
  }
  // A choice among names, each standing for a value of the field (an enum, a number, a text).
  template <class V, class Base>
  static Field choice(const std::string& key, V Base::*member, std::vector<std::pair<std::string, V>> names,
                      std::string meaning) {
    static_assert(std::is_base_of_v<Base, O>, "the field must be a member of the Options struct or of its base");
    std::string default_name;
    std::vector<std::string> choices;
    for (const auto& [name, value] : names) {
      choices.push_back(name);
      if (default_name.empty() && value == O{}.*member) default_name = name;
    }
    if (default_name.empty()) throw std::logic_error("option " + key + ": its default is none of its choices");
    return {OptionInfo::choice(key, default_name, choices, std::move(meaning)),
            [key, member, names](const Options& o, O& out) {
              for (const auto& [name, value] : names)
                if (name == o.text(key)) out.*member = value;
            }};
  }
  // A choice among texts that are the field's values.
  template <class Base>
  static Field choice(const std::string& key, std::string Base::*member, const std::vector<std::string>& values,
                      std::string meaning) {
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& v : values) names.emplace_back(v, v);
    return choice(key, member, names, std::move(meaning));
  }
  // The implementation of the component's op: the choices are the implementations its op family has.
  static Field impl(ops::Impl O::*member, const ops::ImplSet& impls, std::string meaning) {
    std::vector<std::pair<std::string, ops::Impl>> names{{"auto", ops::Impl::automatic}};
    for (ops::Impl i : impls.list()) names.emplace_back(ops::impl_name(i), i);
    return choice("impl", member, names, std::move(meaning));
  }
  // A spec of another kind of component held parsed (a model's channel mixer, its residual scheme): a text option
  // whose default is the text O{}'s field was made from, read by S's constructor from text (which parses it, once).
  template <class S>
  static Field spec(const std::string& key, S O::*member, std::string meaning) {
    return {OptionInfo::text(key, (O{}.*member).source, std::move(meaning)),
            [key, member](const Options& o, O& out) { out.*member = S(o.text(key)); }};
  }
  // Anything else: a declared option and the code that reads it.
  static Field custom(OptionInfo info, std::function<void(const Options&, O&)> read) {
    return {std::move(info), std::move(read)};
  }
};

// The options struct of a component that has no options (the probe model, channel mixer none, prenorm, most priors).
struct NoOptions {};

// The declarations of fields, and validated options read into O{} through them.
template <class O>
std::vector<OptionInfo> option_infos(const std::vector<Field<O>>& fields) {
  std::vector<OptionInfo> infos;
  for (const auto& f : fields) infos.push_back(f.info);
  return infos;
}
template <class O>
O read_fields(const std::vector<Field<O>>& fields, const Options& options) {
  O out;
  for (const auto& f : fields) f.read(options, out);
  return out;
}

// A registered component that makes a Made from Context..., its Options type erased: a kind's registry is a list
// of these.
template <class Made, class... Context>
struct Declaration {
  ComponentInfo info;
  // Validated options -> the Options struct (an std::any holding O), its cross-option checks passed.
  std::function<std::any(const Options&)> parse;
  // The parsed Options and the context -> the component.
  std::function<Made(const std::any& options, Context... context)> build;
};

// The declaration of a component on Options O: `fields` read a spec into O{} (an option left out keeps the struct's
// default), `check` tests the options together (it throws Error), `make` builds the component.
template <class O, class Made, class... Context>
struct DeclarationOf {
  std::string name, meaning;
  std::vector<Field<O>> fields;
  Made (*make)(const O&, Context...) = nullptr;
  void (*check)(const O&) = nullptr;
  std::vector<std::string> notes = {};

  Declaration<Made, Context...> erase() const {
    Declaration<Made, Context...> d;
    d.info = {name, meaning, option_infos(fields), notes};
    d.parse = [fields = fields, check = check](const Options& o) -> std::any {
      O options = read_fields(fields, o);
      if (check) check(options);
      return options;
    };
    d.build = [make = make](const std::any& parsed, Context... context) -> Made {
      return make(std::any_cast<const O&>(parsed), context...);
    };
    return d;
  }
};

// A spec string parsed once against a kind's declarations: the declaration it names, its typed Options and its text
// with every option spelled out.
template <class Made, class... Context>
struct ParsedSpec {
  const Declaration<Made, Context...>* declaration = nullptr;
  std::any options;
  std::string text;    // resolved: "name:key=value,..." with every option, defaults included
  std::string source;  // the text it was parsed from
  const std::string& name() const { return declaration->info.name; }
  Made build(Context... context) const { return declaration->build(options, context...); }
};

// The infos of a kind's declarations (for `seqmix list` and find_component).
template <class Made, class... Context>
std::vector<ComponentInfo> component_infos(const std::vector<Declaration<Made, Context...>>& declarations) {
  std::vector<ComponentInfo> infos;
  for (const auto& d : declarations) infos.push_back(d.info);
  return infos;
}

// Parses `text` against a kind's declarations (kind: "channel mixer", "residual scheme", ...): an unknown name or
// option, an ill-typed or out-of-range value, or a failed cross-check is an Error naming the kind, the component
// and the option.
template <class Made, class... Context>
ParsedSpec<Made, Context...> parse_spec(const std::vector<Declaration<Made, Context...>>& declarations,
                                        const std::string& kind, const std::string& text) {
  const Spec spec = Spec::parse(text);
  for (const auto& d : declarations)
    if (d.info.name == spec.name) {
      const Options options(kind + " " + d.info.name, d.info.options, spec);
      return {&d, d.parse(options), options.resolved(), text};
    }
  find_component(component_infos(declarations), kind, spec.name);  // throws, listing the valid names
  throw std::logic_error("registry: the " + kind + " declaration vanished");
}

}  // namespace seqmix
