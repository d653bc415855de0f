#include "print.hpp"

#include <fmt/format.h>

#include <ostream>

namespace idem::cli {

std::string shown(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  return out;
}

std::string json_string(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\u{:04x}", u);
    }
  }
  out.push_back('"');
  return out;
}

std::string fingerprint_hex(const Fingerprint& fp) {
  return fmt::format("{:016x}{:016x}", fp.high, fp.low);
}

namespace {

std::string json_record(const admin::RecordInfo& r) {
  return fmt::format(
      "{{\"principal\":{},\"id\":{},\"state\":\"{}\",\"fence\":{},\"took_over\":{},"
      "\"lease_left_ms\":{},\"expires_in_ms\":{},\"expires_at_ms\":{},\"fingerprint\":\"{}\","
      "\"result_size\":{},\"failure\":{}}}",
      json_string(r.principal), json_string(r.id), admin::to_string(r.state), r.fence,
      r.took_over ? "true" : "false", r.lease_left.count(), r.expires_in.count(), r.expires_at_ms,
      fingerprint_hex(r.fingerprint), r.result_size, json_string(r.failure));
}

constexpr const char* kRow = "{:<16} {:<24} {:<12} {:>20} {:>12} {:>14} {:>10}  {}\n";

void table_header(std::ostream& out) {
  out << fmt::format(kRow, "PRINCIPAL", "ID", "STATE", "FENCE", "LEASE_LEFT", "EXPIRES_IN",
                     "RESULT", "FAILURE");
}

void table_row(std::ostream& out, const admin::RecordInfo& r) {
  out << fmt::format(kRow, shown(r.principal), shown(r.id), admin::to_string(r.state), r.fence,
                     fmt::format("{}ms", r.lease_left.count()),
                     fmt::format("{}ms", r.expires_in.count()), r.result_size, shown(r.failure));
}

}  // namespace

void print_record(std::ostream& out, const admin::RecordInfo& r, bool json) {
  if (json) {
    out << json_record(r) << '\n';
    return;
  }
  out << fmt::format(
      "principal    {}\nid           {}\nstate        {}\nfence        {}\n"
      "took over    {}\nlease left   {} ms\nexpires in   {} ms\n"
      "fingerprint  {}\nresult size  {} bytes\n",
      shown(r.principal), shown(r.id), admin::to_string(r.state), r.fence,
      r.took_over ? "yes" : "no", r.lease_left.count(), r.expires_in.count(),
      fingerprint_hex(r.fingerprint), r.result_size);
  if (r.state == admin::State::failed) out << "failure      " << shown(r.failure) << '\n';
}

void print_page(std::ostream& out, const admin::Page& page, bool json) {
  if (json) {
    out << "{\"records\":[";
    for (std::size_t i = 0; i < page.records.size(); ++i) {
      out << (i == 0 ? "" : ",") << json_record(page.records[i]);
    }
    out << "],\"next_cursor\":" << json_string(page.next_cursor) << "}\n";
    return;
  }
  table_header(out);
  for (const admin::RecordInfo& r : page.records) table_row(out, r);
  if (!page.next_cursor.empty()) out << "next page: --cursor " << page.next_cursor << '\n';
}

void print_schema(std::ostream& out, const admin::SchemaReport& s, bool json) {
  if (json) {
    std::string missing;
    for (const std::string& m : s.missing) missing += (missing.empty() ? "" : ",") + json_string(m);
    out << fmt::format(
        "{{\"expected_version\":{},\"found_version\":{},\"complete\":{},\"missing\":[{}],"
        "\"fence_floor\":{},\"note\":{}}}\n",
        s.expected_version, s.found_version, s.complete ? "true" : "false", missing, s.fence_floor,
        json_string(s.note));
    return;
  }
  out << s.note << '\n';
  out << fmt::format("version {} (this library: {}), fence floor {}\n", s.found_version,
                     s.expected_version, s.fence_floor);
}

void print_stats(std::ostream& out, std::string_view scope, const admin::Stats& s, bool json) {
  if (json) {
    out << fmt::format(
        "{{\"store\":\"{}\",\"scope\":{},\"in_progress\":{},\"completed\":{},\"failed\":{},"
        "\"released\":{},\"expired\":{}}}\n",
        s.store, json_string(scope), s.in_progress, s.completed, s.failed, s.released, s.expired);
    return;
  }
  out << fmt::format("store {}, scope {}\n", s.store, shown(scope));
  out << fmt::format(
      "in_progress {}\ncompleted   {}\nfailed      {}\nreleased    {}\nexpired     {}\n",
      s.in_progress, s.completed, s.failed, s.released, s.expired);
}

void print_change(std::ostream& out, std::string_view verb, const admin::Change& c, bool json) {
  if (json) {
    out << fmt::format("{{\"{}\":{},\"before\":{}}}\n", verb, c.changed ? "true" : "false",
                       c.before ? json_record(*c.before) : "null");
    return;
  }
  if (c.changed) {
    out << fmt::format("{}: done; the record keeps fence {}, the next claim gets a larger one\n",
                       verb, c.before->fence);
  }
  if (c.before) print_record(out, *c.before, false);
}

}  // namespace idem::cli
