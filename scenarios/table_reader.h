// TableReader: reads one table of a scenario file (TOML), key by key, into typed
// fields, with messages that name the file, the line and the key. Used by the
// scenario loader only (scenarios/scenario.cc).
//
// Thread safety: a reader is used by one thread; it writes the Status it is given.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "core/checked_number.h"
#include "core/status.h"
#include "core/text.h"
#include "scenarios/run_options.h"

namespace dtlab {

// Reads one TOML table, key by key, into typed fields. The first error wins and is
// kept in `status`; every read after it is a no-op, so a section reads straight
// through and the caller checks once.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string section, std::string path, Status* status)
      : table_(table), section_(std::move(section)), path_(std::move(path)), status_(status) {}

  // Fails on any key of the table not in `allowed`.
  void AllowOnly(const std::vector<std::string_view>& allowed) {
    for (auto&& [key, node] : table_) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
      Fail(node,
           "unknown key '" + std::string(key.str()) + "' in " + Where() + "; allowed keys: " + JoinText(allowed, ", "));
      return;
    }
  }

  void String(std::string_view key, std::string& out) {
    const toml::node* node = Find(key);
    if (!node) return;
    if (!node->is_string()) return WrongType(*node, key, "a string");
    out = node->as_string()->get();
  }
  // Text the scenario shows (a title, a description): its control characters
  // escaped (EscapeControl), so that none acts on the terminal. Values (paths,
  // names, overrides) stay as written: they are checked where they are used, and
  // an error quoting one is escaped by the command.
  void Text(std::string_view key, std::string& out) {
    String(key, out);
    out = EscapeControl(out, /*keep_line_breaks=*/true);
  }
  void TextList(std::string_view key, std::vector<std::string>& out) {
    StringList(key, out);
    for (std::string& text : out) text = EscapeControl(text, /*keep_line_breaks=*/true);
  }
  template <typename Int>
  void Integer(std::string_view key, Int& out, std::int64_t min, std::int64_t max) {
    const toml::node* node = Find(key);
    if (!node) return;
    if (!node->is_integer()) return WrongType(*node, key, "an integer");
    // Checked in the field's own type (core/checked_number.h), never cast first.
    auto v = NarrowInteger<Int>(node->as_integer()->get(), Key(key), static_cast<Int>(min), static_cast<Int>(max));
    if (!v.ok()) return Fail(*node, v.status().message());
    out = *v;
  }
  void Real(std::string_view key, double& out) {
    const toml::node* node = Find(key);
    if (!node) return;
    double v = 0;
    if (node->is_integer())
      v = static_cast<double>(node->as_integer()->get());
    else if (node->is_floating_point())
      v = node->as_floating_point()->get();
    else
      return WrongType(*node, key, "a number");
    // nan and inf are TOML numbers, but no setting of a scenario means them.
    if (Status finite = CheckFinite(v, Key(key)); !finite.ok()) return Fail(*node, finite.message());
    out = v;
  }
  // A relative tolerance: the rule lesson questions use too (core/checked_number.h).
  void Tolerance(std::string_view key, double& out) {
    const toml::node* node = Find(key);
    if (!node) return;
    double v = out;
    Real(key, v);
    if (!ok()) return;
    if (Status valid = CheckRelativeTolerance(v, Key(key)); !valid.ok()) return Fail(*node, valid.message());
    out = v;
  }
  void OptionalReal(std::string_view key, std::optional<double>& out) {
    if (!Find(key)) return;
    double v = 0;
    Real(key, v);
    out = v;
  }
  void Boolean(std::string_view key, bool& out) {
    const toml::node* node = Find(key);
    if (!node) return;
    if (!node->is_boolean()) return WrongType(*node, key, "true or false");
    out = node->as_boolean()->get();
  }
  void StringList(std::string_view key, std::vector<std::string>& out) {
    const toml::node* node = Find(key);
    if (!node) return;
    if (!node->is_array()) return WrongType(*node, key, "a list of strings");
    out.clear();
    for (const toml::node& item : *node->as_array()) {
      if (!item.is_string()) return WrongType(item, key, "a list of strings");
      out.push_back(item.as_string()->get());
    }
  }
  void RealList(std::string_view key, std::vector<double>& out) {
    const toml::node* node = Find(key);
    if (!node) return;
    if (!node->is_array()) return WrongType(*node, key, "a list of numbers");
    out.clear();
    for (const toml::node& item : *node->as_array()) {
      if (item.is_integer())
        out.push_back(static_cast<double>(item.as_integer()->get()));
      else if (item.is_floating_point())
        out.push_back(item.as_floating_point()->get());
      else
        return WrongType(item, key, "a list of numbers");
      if (Status finite = CheckFinite(out.back(), Key(key) + " item"); !finite.ok())
        return Fail(item, finite.message());
    }
  }
  // A name parsed by `parse` (an enum table): its error lists the allowed names.
  template <typename T, typename Parse>
  void Name(std::string_view key, T& out, Parse parse) {
    std::string text;
    const toml::node* node = Find(key);
    if (!node) return;
    String(key, text);
    if (!status_->ok()) return;
    auto parsed = parse(text);
    if (!parsed.ok()) return Fail(*node, Key(key) + ": " + parsed.status().message());
    out = *parsed;
  }

  // A run option's key (scenarios/run_options.h): read as its type, bounded by its
  // range, then stored by the option's own apply. A name's error names the key; a
  // fault spec's error names the spec.
  void Option(const RunOption& option, std::string_view key, RunSettings& settings) {
    const toml::node* node = Find(key);
    if (!node) return;
    OptionValue value;
    switch (option.type) {
      case OptionType::kSwitch: {
        bool v = false;
        Boolean(key, v);
        value = v;
        break;
      }
      case OptionType::kInt32: {
        std::int32_t v = 0;
        Integer(key, v, option.min, option.max);
        value = std::int64_t{v};
        break;
      }
      case OptionType::kInt64: {
        std::int64_t v = 0;
        Integer(key, v, option.min, option.max);
        value = v;
        break;
      }
      case OptionType::kUint64: {
        std::uint64_t v = 0;
        Integer(key, v, option.min, option.max);
        value = v;
        break;
      }
      case OptionType::kFloat:
      case OptionType::kDouble: {
        double v = 0;
        Real(key, v);
        value = v;
        break;
      }
      case OptionType::kName:
        if (option.integer_name && node->is_integer()) {  // keras = 2 as well as "2"
          value = std::to_string(**node->as_integer());
          if (Status applied = option.apply(value, settings); !applied.ok())
            Fail(*node, section_ + "." + std::string(key) + ": " + applied.message());
          return;
        }
        [[fallthrough]];
      case OptionType::kText: {
        std::string v;
        String(key, v);
        value = std::move(v);
        break;
      }
      case OptionType::kTextList: {
        std::vector<std::string> v;
        StringList(key, v);
        value = std::move(v);
        break;
      }
    }
    if (!ok()) return;
    settings.given.insert(std::string(option.Id()));
    if (Status applied = option.apply(value, settings); !applied.ok())
      Fail(*node, option.type == OptionType::kName ? Key(key) + ": " + applied.message() : applied.message());
  }

  bool Has(std::string_view key) const { return table_.contains(key); }
  void Fail(const toml::node& node, const std::string& message) { FailAt(node.source(), message); }
  void FailHere(const std::string& message) { FailAt(table_.source(), message); }
  bool ok() const { return status_->ok(); }

 private:
  const toml::node* Find(std::string_view key) const { return status_->ok() ? table_.get(key) : nullptr; }
  std::string Where() const { return section_.empty() ? "the top level" : "[" + section_ + "]"; }
  std::string Key(std::string_view key) const {
    std::string text = "'";
    if (!section_.empty()) text += section_ + ".";
    return text + std::string(key) + "'";
  }
  void WrongType(const toml::node& node, std::string_view key, const std::string& expected) {
    Fail(node, Key(key) + " must be " + expected + ", got " + TypeName(node));
  }
  static std::string TypeName(const toml::node& node) {
    switch (node.type()) {
      case toml::node_type::string:
        return "a string";
      case toml::node_type::integer:
        return "an integer";
      case toml::node_type::floating_point:
        return "a number with a fraction";
      case toml::node_type::boolean:
        return "a boolean";
      case toml::node_type::array:
        return "a list";
      case toml::node_type::table:
        return "a table";
      default:
        return "a date or time";
    }
  }
  void FailAt(const toml::source_region& where, const std::string& message) {
    if (!status_->ok()) return;
    // A value from a --set (or a variant's set) has no line in the file.
    if (where.begin.line == 0)
      *status_ = Status::InvalidArgument(path_ + ": in a --set or [[variant]] set: " + message);
    else
      *status_ = Status::InvalidArgument(path_ + ":" + std::to_string(where.begin.line) + ": " + message);
  }

  const toml::table& table_;
  std::string section_, path_;
  Status* status_;
};

}  // namespace dtlab
