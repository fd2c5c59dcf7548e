#include <gtest/gtest.h>

#include "seqmix/io/config.h"
#include "seqmix/io/error.h"
#include "seqmix/io/printable.h"
#include "seqmix/train/run.h"
#include "support/error_of.h"

namespace seqmix {
namespace {

using seqmix::testing::error_of;

TEST(Config, YamlOverridesAndPrecedence) {
  Config c(run_config_schema());
  c.merge_yaml_text("task: mad.compression\nmixer: [gla, 'softmax:heads=2']\ntrain:\n  lr: 0.01\n  steps: 7\n", "test");
  EXPECT_EQ(c.text("task"), "mad.compression");
  EXPECT_EQ(c.list("mixer"), (std::vector<std::string>{"gla", "softmax:heads=2"}));
  EXPECT_DOUBLE_EQ(c.real("train.lr"), 0.01);
  c.apply_override("train.lr=0.002");
  EXPECT_DOUBLE_EQ(c.real("train.lr"), 0.002);
  EXPECT_EQ(c.integer("train.steps"), 7);
  EXPECT_EQ(c.integer("train.batch_size"), 64);  // default
}

TEST(Config, ResolvedYamlRoundTrips) {
  Config a(run_config_schema());
  a.apply_override("mixer=linear;ssm:state=4");
  a.apply_override("train.target=0.5");
  Config b(run_config_schema());
  b.merge_yaml_text(a.to_yaml(), "round trip");
  for (const auto& o : run_config_schema()) EXPECT_EQ(a.text(o.key), b.text(o.key)) << o.key;
}

TEST(Config, UnknownKeysWrongTypesAndMalformedYamlAreErrors) {
  Config c(run_config_schema());
  EXPECT_NE(error_of([&] { c.merge_yaml_text("train:\n  lrr: 1\n", "cfg"); }).find("cfg: unknown key 'train.lrr'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { c.merge_yaml_text("train:\n  steps: many\n", "cfg"); }).find("'train.steps' expects an integer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { c.merge_yaml_text("task: [1, 2]\n", "cfg"); }).find("takes a single value"), std::string::npos);
  EXPECT_NE(error_of([&] { c.merge_yaml_text("train: 3\n", "cfg"); }).find("unknown key 'train'"), std::string::npos);
  EXPECT_NE(error_of([&] { c.merge_yaml_text("task: [a\n", "cfg"); }).find("not valid YAML"), std::string::npos);
  EXPECT_NE(error_of([&] { c.merge_yaml_text("- 1\n- 2\n", "cfg"); }).find("mapping"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("train.lr"); }).find("key=value"), std::string::npos);
  EXPECT_NE(error_of([&] { c.apply_override("train.batch_size=0"); }).find(">= 1"), std::string::npos);
  EXPECT_NE(error_of([&] { c.merge_yaml_file("/nonexistent/config.yaml"); }).find("cannot read"), std::string::npos);
}

// Found by fuzz/fuzz_config.cpp: a YAML error quoting a raw control character spanned two lines; an item
// without a spec name ("heads=2"), accepted from --set, made a config.yaml that did not read back; control
// characters in values are refused with an escaped message, and invalid UTF-8 (which YAML did not
// read back the same) is refused.
TEST(Config, FuzzerFindingsStayFixed) {
  Config c(run_config_schema());
  const std::string yaml = error_of([&] { c.merge_yaml_text("task: \"\\\x01\"\n", "cfg"); });  // an escaped 0x01
  EXPECT_NE(yaml.find("not valid YAML"), std::string::npos) << yaml;
  EXPECT_FALSE(has_control_character(yaml)) << yaml;
  EXPECT_NE(error_of([&] { c.apply_override("mixer=softmax;heads=2"); }).find("no spec name before it"), std::string::npos);
  const std::string value = error_of([&] { c.apply_override("task=mad.compression\n"); });
  EXPECT_NE(value.find("control character: 'mad.compression\\n'"), std::string::npos) << value;
  EXPECT_NE(error_of([&] { c.apply_override("mixer=s;\xff\xff"); }).find("not valid UTF-8"), std::string::npos);
  const std::string item = error_of([&] { c.merge_yaml_text("mixer: [\"soft\\tmax\"]\n", "cfg"); });
  EXPECT_NE(item.find("control character: 'soft\\tmax'"), std::string::npos) << item;
}

// Found by the bad-input sweep's random bytes: '%' then garbage read as a YAML directive and an empty
// document, so a binary file passed as a config with no keys and a default run started. Binary text is
// refused before YAML reads it; a config that is empty or only comments still means no keys.
TEST(Config, BinaryFilesAreRefusedAndEmptyTextIsNoKeys) {
  Config c(run_config_schema());
  const std::string directive_garbage("%\xcd\x8b" "Fk\x9f\x80\0\xff", 9);
  EXPECT_EQ(error_of([&] { c.merge_yaml_text(directive_garbage, "cfg"); }), "cfg is not a text file (byte 7 is NUL)");
  EXPECT_EQ(error_of([&] { c.merge_yaml_text("%\xcd\x8b" "Fk\x9f\x80\n", "cfg"); }), "cfg is not UTF-8 text");
  EXPECT_EQ(error_of([&] { c.merge_yaml_text(std::string("seed: 1\0\n", 9), "cfg"); }),
            "cfg is not a text file (byte 7 is NUL)");
  EXPECT_EQ(error_of([&] { c.merge_yaml_text("", "cfg"); }), "");
  EXPECT_EQ(error_of([&] { c.merge_yaml_text("# nothing set\n", "cfg"); }), "");
  EXPECT_EQ(error_of([&] { c.merge_yaml_text("seed: 7  # \xc3\xa9t\xc3\xa9\n", "cfg"); }), "");
  EXPECT_EQ(c.integer("seed"), 7);
  EXPECT_FALSE(c.was_set("train.lr"));
}

}  // namespace
}  // namespace seqmix
