// The index page of a set of lesson handouts (`dtlab lesson --all --html DIR`):
// one self-contained HTML page (report::HtmlDocument) linking every lesson's
// handout, in the lessons' order, with its summary, ready to put on a workshop's
// web page beside the handouts.
//
// Thread safety: a pure function.
#pragma once

#include <string>
#include <vector>

namespace dtlab {

/// One handout as the index lists it.
struct HandoutEntry {
  std::string file;         // the handout's file name, relative to the index ("loss-scaling.html")
  std::string title;        // the lesson's title
  std::string summary;      // its one-line summary
  bool as_expected = true;  // every run's verdicts were as the lesson expects
};

/// The index page: a title, how to use the handouts, and a list of links.
std::string RenderHandoutIndex(const std::vector<HandoutEntry>& entries);

}  // namespace dtlab
