// The index of a set of lesson handouts (lessons/handout_index.h).
#include <string>

#include <gtest/gtest.h>

#include "lessons/handout_index.h"

namespace dtlab {
namespace {

TEST(HandoutIndexTest, LinksEveryHandoutInOrderWithItsSummary) {
  const std::string html = RenderHandoutIndex(
      {{"loss-scaling.html", "Loss scaling", "gradients N times", true}, {"a&b.html", "A <b>", "x", false}});
  const std::size_t first = html.find("<a href=\"loss-scaling.html\">Loss scaling</a>: gradients N times");
  const std::size_t second = html.find("<a href=\"a&amp;b.html\">A &lt;b&gt;</a>: x (a run did not behave");
  ASSERT_NE(first, std::string::npos) << html;
  ASSERT_NE(second, std::string::npos) << html;
  EXPECT_LT(first, second);
  EXPECT_NE(html.find("<title>dtlab lessons: workshop handouts</title>"), std::string::npos);
  EXPECT_NE(html.find("2 lessons."), std::string::npos);
  // Self-contained: nothing is fetched.
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
}

}  // namespace
}  // namespace dtlab
