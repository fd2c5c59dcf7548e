#include <gtest/gtest.h>

#include "seqmix/io/error.h"
#include "seqmix/io/spec.h"
#include "support/error_of.h"

namespace seqmix {
namespace {

std::vector<OptionInfo> declared() {
  return {OptionInfo::integer("heads", 4, "heads", 1), OptionInfo::flag("rope", false, "rope"),
          OptionInfo::real("scale", 0.5, "scale", 0.0, 1.0),
          OptionInfo::choice("feature", "relu", {"relu", "elu"}, "feature")};
}

using seqmix::testing::error_of;

TEST(Spec, ParsesNameAndOptionsInOrder) {
  const Spec s = Spec::parse(" fem:prior=softmax, flags=LT ,heads=4");
  EXPECT_EQ(s.name, "fem");
  ASSERT_EQ(s.options.size(), 3u);
  EXPECT_EQ(s.options[0], (std::pair<std::string, std::string>{"prior", "softmax"}));
  EXPECT_EQ(s.options[1], (std::pair<std::string, std::string>{"flags", "LT"}));
  EXPECT_EQ(s.str(), "fem:prior=softmax,flags=LT,heads=4");
  EXPECT_EQ(Spec::parse("softmax").options.size(), 0u);
  // Values may hold '-' and '!' (HyperMLP variant labels).
  EXPECT_EQ(Spec::parse("hypermlp:variant=R-12!").options[0].second, "R-12!");
  // A nested spec with several options goes in parentheses, and prints back in them.
  const Spec nested = Spec::parse("lm:residual=(nesterov:share=layer,norm=post),dim=64");
  ASSERT_EQ(nested.options.size(), 2u);
  EXPECT_EQ(nested.options[0].second, "nesterov:share=layer,norm=post");
  EXPECT_EQ(nested.str(), "lm:residual=(nesterov:share=layer,norm=post),dim=64");
  EXPECT_EQ(Spec::parse(nested.str()).options[0].second, nested.options[0].second);
}

TEST(Spec, MalformedTextIsAnError) {
  EXPECT_NE(error_of([] { Spec::parse(":heads=4"); }).find("no name"), std::string::npos);
  EXPECT_NE(error_of([] { Spec::parse("softmax:heads"); }).find("key=value"), std::string::npos);
  EXPECT_NE(error_of([] { Spec::parse("softmax:heads=1,heads=2"); }).find("twice"), std::string::npos);
  EXPECT_NE(error_of([] { Spec::parse("lm:residual=(momentum:beta=1"); }).find("'(' without its ')'"), std::string::npos);
  EXPECT_NE(error_of([] { Spec::parse("lm:residual=momentum)"); }).find("')' without its '('"), std::string::npos);
}

TEST(Options, DefaultsAndTypedValues) {
  const Options o("mixer x", declared(), Spec::parse("x:heads=8,rope=1"));
  EXPECT_EQ(o.integer("heads"), 8);
  EXPECT_TRUE(o.flag("rope"));
  EXPECT_DOUBLE_EQ(o.real("scale"), 0.5);
  EXPECT_EQ(o.text("feature"), "relu");
  EXPECT_TRUE(o.was_given("heads"));
  EXPECT_FALSE(o.was_given("scale"));
  EXPECT_EQ(o.resolved(), "x:heads=8,rope=1,scale=0.5,feature=relu");
}

TEST(Options, UnknownKeyNamesItAndListsValidOnes) {
  const std::string e = error_of([] { Options("mixer x", declared(), Spec::parse("x:hedas=2")); });
  EXPECT_NE(e.find("'hedas'"), std::string::npos) << e;
  EXPECT_NE(e.find("heads, rope, scale, feature"), std::string::npos) << e;
}

TEST(Options, BadValuesAreErrors) {
  EXPECT_NE(error_of([] { Options("m", declared(), Spec::parse("x:heads=two")); }).find("integer"), std::string::npos);
  EXPECT_NE(error_of([] { Options("m", declared(), Spec::parse("x:heads=0")); }).find(">= 1"), std::string::npos);
  EXPECT_NE(error_of([] { Options("m", declared(), Spec::parse("x:scale=2")); }).find("<= 1"), std::string::npos);
  EXPECT_NE(error_of([] { Options("m", declared(), Spec::parse("x:rope=maybe")); }).find("0 or 1"), std::string::npos);
  EXPECT_NE(error_of([] { Options("m", declared(), Spec::parse("x:feature=tanh")); }).find("relu, elu"),
            std::string::npos);
  EXPECT_NE(error_of([] { Options("m", declared(), Spec::parse("x:scale=nan")); }).find("finite"), std::string::npos);
}

TEST(ParseValues, IntegerListAndFlags) {
  EXPECT_EQ(parse_integer_list("4,1024,8,64", "shape"), (std::vector<int64_t>{4, 1024, 8, 64}));
  EXPECT_THROW(parse_integer_list("4,x", "shape"), Error);
  EXPECT_TRUE(parse_flag("true", "f"));
  EXPECT_FALSE(parse_flag("0", "f"));
}

// Found by fuzz/fuzz_spec.cpp: a spec with a newline made a two-line error; parentheses that open and
// close separately ("(a)<(b)") were stripped as if they enclosed the value, so the spec did not print back
// to itself; option keys are plain names.
TEST(Spec, FuzzerFindingsStayFixed) {
  const std::string control = error_of([] { Spec::parse("m\xff\nhypermlp:heads=4"); });
  EXPECT_NE(control.find("contains a control character"), std::string::npos) << control;
  EXPECT_EQ(control.find('\n'), std::string::npos) << control;
  const Spec s = Spec::parse("moe:a=(r=1)<(l=2),b=((x))");
  ASSERT_EQ(s.options.size(), 2u);
  EXPECT_EQ(s.options[0].second, "(r=1)<(l=2)");
  EXPECT_EQ(s.options[1].second, "(x)");
  const Spec again = Spec::parse(s.str());
  EXPECT_EQ(again.options, s.options) << s.str();
  EXPECT_NE(error_of([] { Spec::parse("softmax:(heads=4)"); }).find("may hold only letters"), std::string::npos);
}

}  // namespace
}  // namespace seqmix
