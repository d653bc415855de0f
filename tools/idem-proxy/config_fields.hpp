#pragma once
// The config file's schema: its sections, their fields and how each is read into a ProxyConfig
// (docs/proxy.md lists them with their defaults).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config_reader.hpp"
#include "proxy_config.hpp"

namespace idem::proxy::config {

/// Reads the reader's value into its field of `config`; false (with a mistake said) when the
/// value cannot be used, and then `config` is as it was.
using Apply = bool (*)(ValueReader& reader, ProxyConfig& config);

struct FieldSpec {
  std::string_view name;  // as the file spells it: "port", "lease_ms"
  Apply apply;
};

struct SectionSpec {
  std::string_view name;  // the table: "listen"
  std::span<const FieldSpec> fields;
};

/// The fields outside any table: threads, drain_timeout_ms and route (the [[route]] array).
std::span<const FieldSpec> top_level_fields();
/// The tables: listen, upstream, store, limits, principal, fingerprint, failures, duplicates,
/// admin.
std::span<const SectionSpec> sections();
const SectionSpec* find_section(std::string_view name);
/// The field a dotted name names ("upstream.port", "threads"), or nullptr.
const FieldSpec* find_field(std::string_view dotted);

/// The fields of one [[route]] table.
std::span<const std::string_view> route_field_names();

/// The mistake for a name the schema does not have: "WHERE: NAME: unknown KIND (did you mean
/// "X"? ... has A, B, C)". `known` are the names allowed there.
std::string unknown_name_line(std::string_view where, std::string_view name, std::string_view kind,
                              std::string_view place, std::span<const std::string_view> known);

/// The names of a section's fields (or of the top level's), for unknown_name_line.
std::vector<std::string_view> field_names(std::span<const FieldSpec> fields);

}  // namespace idem::proxy::config
