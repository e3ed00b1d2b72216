#include "lessons/handout_index.h"

#include "scenarios/html_report.h"

namespace dtlab {

std::string RenderHandoutIndex(const std::vector<HandoutEntry>& entries) {
  report::HtmlDocument page("dtlab lessons: workshop handouts");
  page.AddHeading(1, "dtlab lessons: workshop handouts");
  page.AddParagraph(
      "Each handout is one lesson as `dtlab lesson NAME` plays it: its text, its questions with the answers, and the "
      "real numbers and plots of its runs. The numbers are the same on every machine, so a room that runs the "
      "lesson sees exactly these.");
  std::vector<report::Link> links;
  for (const HandoutEntry& entry : entries) {
    std::string note = entry.summary;
    if (!entry.as_expected) note += " (a run did not behave as the lesson expects: see the handout)";
    links.push_back({entry.file, entry.title, note});
  }
  page.AddLinks(links);
  page.AddParagraph("Written by `dtlab lesson --all --html DIR`; " + std::to_string(entries.size()) + " lesson" +
                    (entries.size() == 1 ? "" : "s") + ".");
  return page.Render();
}

}  // namespace dtlab
