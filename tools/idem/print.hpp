#pragma once
// How the `idem` command prints records: a readable table, or JSON (--json).

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "idem/admin.hpp"

namespace idem::cli {

/// Bytes as readable text: printable ASCII as is, others as \xNN (and '\' as \\).
std::string shown(std::string_view bytes);
/// A JSON string literal of `bytes` (bytes outside printable ASCII as \u00NN).
std::string json_string(std::string_view bytes);
std::string fingerprint_hex(const Fingerprint& fp);

void print_record(std::ostream& out, const admin::RecordInfo& r, bool json);
void print_page(std::ostream& out, const admin::Page& page, bool json);
void print_schema(std::ostream& out, const admin::SchemaReport& s, bool json);
void print_stats(std::ostream& out, std::string_view scope, const admin::Stats& s, bool json);
/// What release or forget did, and the record as it was.
void print_change(std::ostream& out, std::string_view verb, const admin::Change& c, bool json);

}  // namespace idem::cli
