// Help and manual pages (cli/command.h ParseOptions, cli/man_page.h): dtlab train
// --help lists every run option under its topic, then examples; the manual pages
// are made from the same text and escaped for roff.
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "cli/command.h"
#include "cli/man_page.h"
#include "scenarios/run_options.h"

namespace dtlab {
namespace {

// What `dtlab COMMAND --help` prints on stdout.
std::string HelpOf(int (*command)(const std::vector<std::string>&)) {
  std::ostringstream captured;
  std::streambuf* const saved = std::cout.rdbuf(captured.rdbuf());
  const int code = command({"--help"});
  std::cout.rdbuf(saved);
  EXPECT_EQ(code, 0);
  return captured.str();
}

TEST(HelpTest, EveryRunOptionIsInAGroup) {
  std::set<OptionGroup> known;
  for (const RunOptionGroup& group : RunOptionGroups()) {
    EXPECT_NE(group.group, OptionGroup::kNone);
    EXPECT_FALSE(group.title.empty());
    EXPECT_TRUE(known.insert(group.group).second) << group.title << " is listed twice";
  }
  for (const RunOption& option : RunOptionTable())
    EXPECT_TRUE(known.count(option.group)) << "option " << option.Id() << " has no group of RunOptionGroups()";
}

TEST(HelpTest, TrainHelpListsEachGroupThenExamples) {
  const std::string help = HelpOf(cli::TrainCommand);
  std::size_t previous = 0;
  for (const RunOptionGroup& group : RunOptionGroups()) {
    std::string heading = "\n";  // appended, not "\n" + std::string (GCC 12's -Wrestrict false positive)
    heading.append(group.title).append(":\n");
    const std::size_t at = help.find(heading);
    ASSERT_NE(at, std::string::npos) << "no group " << group.title << " in\n" << help;
    EXPECT_GT(at, previous) << group.title << " is out of order";
    previous = at;
    // Each of the group's flags is listed after its caption and before the next one.
    const std::size_t next = help.find(":\n", at + group.title.size() + 3);
    for (const RunOption& option : RunOptionTable()) {
      if (option.flag.empty() || option.group != group.group) continue;
      const std::size_t flag = help.find("  --" + std::string(option.flag) + " ", at);
      EXPECT_TRUE(flag != std::string::npos && flag < next) << "--" << option.flag << " is not under " << group.title;
    }
  }
  const std::size_t examples = help.find("\nExamples:\n");
  ASSERT_NE(examples, std::string::npos);
  EXPECT_GT(examples, previous) << "the examples come after the options";
  EXPECT_NE(help.find("    dtlab train --replicas 4", examples), std::string::npos);
  // --save-scenario is an output of train's own, listed with the outputs.
  EXPECT_GT(help.find("--save-scenario"), help.find("\nOutputs:\n"));
  // Each group's heading once: train's own outputs join the table's group.
  for (const RunOptionGroup& group : RunOptionGroups()) {
    std::string heading = "\n";  // appended: "\n" + std::string is GCC 12's -Wrestrict false positive
    heading.append(group.title).append(":\n");
    const std::size_t first = help.find(heading);
    EXPECT_EQ(help.find(heading, first + 1), std::string::npos) << group.title << " is printed twice";
  }
}

TEST(HelpTest, EveryCommandHasExamples) {
  for (auto* command : {cli::TrainCommand, cli::EvalCommand, cli::RunCommand, cli::ListCommand, cli::LessonCommand,
                        cli::CheckCommand, cli::ClusterCommand, cli::ReplayCommand, cli::DevicesCommand}) {
    const std::string help = HelpOf(command);
    const std::size_t examples = help.find("\nExamples:\n");
    ASSERT_NE(examples, std::string::npos) << help.substr(0, help.find('\n')) << " has no examples";
    EXPECT_NE(help.find("\n    dtlab ", examples), std::string::npos) << help.substr(examples);
  }
}

TEST(HelpTest, ManPageIsMadeFromTheHelp) {
  const std::string page = cli::ManPageOf(cli::TrainCommand);
  EXPECT_EQ(page.rfind(".TH DTLAB\\-TRAIN 1 ", 0), 0u) << page.substr(0, 80);
  EXPECT_NE(page.find(".SH SYNOPSIS\n.B dtlab train\n"), std::string::npos);
  EXPECT_NE(page.find(".SH OPTIONS\n"), std::string::npos);
  for (const RunOptionGroup& group : RunOptionGroups())
    EXPECT_NE(page.find(".SS " + std::string(group.title) + "\n"), std::string::npos) << group.title;
  EXPECT_NE(page.find(".TP\n\\fB\\-\\-replicas\\fR arg (=1)\n"), std::string::npos);
  EXPECT_NE(page.find(".SH EXAMPLES\n"), std::string::npos);
}

TEST(HelpTest, RoffEscapes) {
  const std::string page = cli::HelpToRoff("dtlab-x", "does x",
                                           "Usage: dtlab x [options]\n\n.dot first\n"
                                           "back\\slash and \xC3\x97 and non-hyphen --flag\n");
  EXPECT_NE(page.find("\\&.dot first\n"), std::string::npos) << page;
  EXPECT_NE(page.find("back\\eslash and \\[u00D7] and non-hyphen \\-\\-flag\n"), std::string::npos) << page;
  EXPECT_EQ(cli::FirstSentence("Plays a lesson. Then more."), "Plays a lesson");
  EXPECT_EQ(cli::FirstSentence("Trains a model as\nthe tutorial does: loss = x."),
            "Trains a model as the tutorial does");
}

}  // namespace
}  // namespace dtlab
