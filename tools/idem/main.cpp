// idem: the operator's command for a record store. Finds stuck keys, releases or forgets them
// without ever letting a fence be reused, purges expired records and checks the schema.
//
//   idem --store URI [--scope S] [--json] inspect|list|release|forget|purge|schema|stats ...
//
// The URI may come from IDEM_STORE instead, and the password from --password-file or
// IDEM_STORE_PASSWORD: a password inside --store is refused, since every user of the machine
// can read a command's arguments.
//
// Exit statuses: exit_codes.hpp (and docs/operations.md).

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "exit_codes.hpp"
#include "open_store.hpp"
#include "print.hpp"
#include "secrets.hpp"

namespace {

using idem::cli::Exit;

int fail(Exit code, const std::string& message) {
  std::cerr << "idem: " << message << '\n';
  return code;
}

// The exit status of an admin failure. A missing or outdated schema is not among them: the
// schema report says so first (no_schema), so store_unavailable here is the store itself.
int fail(const idem::Failure& f) {
  const auto e = f.code;
  if (e == idem::errc::store_unavailable) return fail(Exit::unreachable, f.message);
  if (e == idem::errc::key_invalid || e == idem::errc::config_invalid)
    return fail(Exit::usage, f.message);
  return fail(Exit::failed, f.message);
}

// Whether the arguments themselves hold --store (not IDEM_STORE).
bool store_in_arguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--store" || a.starts_with("--store=")) return true;
  }
  return false;
}

// The store's password, from --password-file or IDEM_STORE_PASSWORD, in `password`; a password
// in the arguments' URI is refused. PostgreSQL gets it as libpq's PGPASSWORD (in this process's
// environment only), Redis through the opener's options. Exit::ok, or the status to exit with.
int take_password(int argc, char** argv, const std::string& uri, const std::string& file,
                  std::optional<std::string>& password) {
  if (store_in_arguments(argc, argv) && idem::cli::has_password(uri)) {
    return fail(Exit::usage,
                "--store has a password in it, which every user of this machine can read (ps): "
                "give the URI in IDEM_STORE, or the password in --password-file or "
                "IDEM_STORE_PASSWORD");
  }
  if (!file.empty()) {
    std::string error;
    password = idem::cli::read_password_file(file, error);
    if (!password) return fail(Exit::usage, error);
  } else if (const char* env = std::getenv("IDEM_STORE_PASSWORD"); env != nullptr && *env != 0) {
    password = env;
  }
  if (!password) return Exit::ok;
  if (idem::cli::has_password(uri)) {
    return fail(Exit::usage,
                "the store URI has a password and --password-file or "
                "IDEM_STORE_PASSWORD gives another: keep one");
  }
  const std::string scheme = idem::cli::scheme_of(uri);
  if (scheme == "postgresql" || scheme == "postgres" ||
      (scheme.empty() && uri.find('=') != std::string::npos)) {
    if (::setenv("PGPASSWORD", password->c_str(), 1) != 0) {
      return fail(Exit::failed, "cannot set PGPASSWORD");
    }
  } else if (scheme == "sqlite") {
    return fail(Exit::usage, "a SQLite store has no password");
  }
  return Exit::ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"idem: inspect and repair an idem record store"};
  app.require_subcommand(1);
  // The global options (--store, --scope, --json, ...) also after the command, where people type
  // them: `idem --store URI list --json`.
  app.fallthrough();
  std::string uri, scope, table_prefix = "idem_", redis_prefix = "idem:";
  bool json = false;
  std::string password_file;
  app.add_option("--store", uri,
                 "the store: sqlite:PATH, postgresql://..., redis://... or redis+cluster://... "
                 "(rediss:// and rediss+cluster:// over TLS; without a password: see "
                 "--password-file)")
      ->envname("IDEM_STORE")
      ->required();
  app.add_option("--password-file", password_file,
                 "a file whose first line is the store's password (else IDEM_STORE_PASSWORD)");
  app.add_option("--scope", scope, "the guard's scope (Options::scope), e.g. payments.charge");
  app.add_option("--table-prefix", table_prefix, "SQL stores' table prefix")->capture_default_str();
  app.add_option("--redis-prefix", redis_prefix, "Redis store's key prefix")->capture_default_str();
  app.add_flag("--json", json, "print JSON instead of a table");

  std::string principal, id, state_text = "in_progress", cursor;
  std::size_t limit = 100, max_records = 10'000;
  std::uint64_t fence = 0;
  bool yes = false, all_pages = false, all_scopes = false;

  auto* inspect = app.add_subcommand("inspect", "show one key's record");
  inspect->add_option("id", id, "the key's id")->required();
  inspect->add_option("--principal", principal, "the key's principal (tenant), if any");

  auto* list = app.add_subcommand("list", "list a scope's keys in one state, oldest first");
  list->add_option("--state", state_text, "in_progress, completed, failed or released")
      ->capture_default_str();
  list->add_option("--limit", limit, "records per page")->capture_default_str();
  list->add_option("--cursor", cursor, "where the previous page stopped (its next_cursor)");
  list->add_flag("--all", all_pages, "every page, not only the first");

  auto* release = app.add_subcommand(
      "release", "release a key held in progress; its fence is kept, the next claim runs it");
  release->add_option("id", id, "the key's id")->required();
  release->add_option("--principal", principal, "the key's principal (tenant), if any");
  release->add_option("--fence", fence, "only if the holder still has this fence");
  release->add_flag("--yes", yes, "yes, release it (required)");

  auto* forget = app.add_subcommand(
      "forget", "forget a key's record (a remembered failure, a result); the next claim runs it");
  forget->add_option("id", id, "the key's id")->required();
  forget->add_option("--principal", principal, "the key's principal (tenant), if any");
  forget->add_flag("--yes", yes, "yes, forget it (required)");

  auto* purge = app.add_subcommand("purge", "remove records past their expiry");
  purge->add_option("--max", max_records, "most records removed")->capture_default_str();

  auto* schema = app.add_subcommand("schema", "print, check or migrate the store's schema");
  schema->require_subcommand(1);
  auto* schema_print = schema->add_subcommand("print", "print the schema's DDL");
  auto* schema_check = schema->add_subcommand("check", "compare the schema with this idem's");
  auto* schema_migrate = schema->add_subcommand("migrate", "create or upgrade the schema");

  auto* stats = app.add_subcommand("stats", "count a scope's records by state");
  stats->add_flag("--all-scopes", all_scopes, "every scope together");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    (void)app.exit(e);
    return Exit::usage;
  }

  std::optional<std::string> password;
  if (const int bad = take_password(argc, argv, uri, password_file, password); bad != Exit::ok) {
    return bad;
  }

  const bool needs_scope = inspect->parsed() || list->parsed() || release->parsed() ||
                           forget->parsed() || (stats->parsed() && !all_scopes);
  if (needs_scope && scope.empty()) return fail(Exit::usage, "--scope is required here");
  if ((release->parsed() || forget->parsed()) && !yes) {
    return fail(Exit::usage, std::string(release->parsed() ? "release" : "forget") +
                                 " changes the store: add --yes");
  }
  std::optional<idem::admin::State> state = idem::admin::state_from_string(state_text);
  if (list->parsed() && !state) {
    return fail(Exit::usage, "--state must be in_progress, completed, failed or released");
  }

  std::string error;
  std::unique_ptr<idem::admin::Admin> opened = idem::cli::open_store(
      uri,
      {.table_prefix = table_prefix, .key_prefix = redis_prefix, .password = password.value_or("")},
      error);
  if (!opened) return fail(Exit::usage, error);
  idem::admin::Admin& admin = *opened;

  if (schema->parsed()) {
    if (schema_print->parsed()) {
      std::cout << admin.schema_text();
      return Exit::ok;
    }
    auto report = schema_migrate->parsed() ? admin.migrate_schema() : admin.check_schema();
    if (!report) return fail(report.failure());
    idem::cli::print_schema(std::cout, report.value(), json);
    return report->complete ? Exit::ok : Exit::no_schema;
    (void)schema_check;
  }

  // Every other command needs the store reachable and its schema current: say which is wrong.
  auto checked = admin.check_schema();
  if (!checked) return fail(checked.failure());
  if (!checked->complete) return fail(Exit::no_schema, checked->note);

  const idem::Key key{id, principal};
  if (inspect->parsed()) {
    auto found = admin.inspect(scope, key);
    if (!found) return fail(found.failure());
    if (!found.value()) return fail(Exit::not_found, "no record under that key in scope " + scope);
    idem::cli::print_record(std::cout, *found.value(), json);
    return Exit::ok;
  }
  if (list->parsed()) {
    idem::admin::ListRequest request{.state = *state, .limit = limit, .cursor = cursor};
    do {
      auto page = admin.list(scope, request);
      if (!page) return fail(page.failure());
      idem::cli::print_page(std::cout, page.value(), json);
      request.cursor = page->next_cursor;
    } while (all_pages && !request.cursor.empty());
    return Exit::ok;
  }
  if (release->parsed() || forget->parsed()) {
    auto change = release->parsed() ? admin.release(scope, key, fence) : admin.forget(scope, key);
    if (!change) return fail(change.failure());
    idem::cli::print_change(std::cout, release->parsed() ? "released" : "forgotten", change.value(),
                            json);
    if (forget->parsed() && change->changed) {
      // On stderr: a --json answer on stdout stays one JSON document.
      std::cerr << "idem: note: a process with a CachedStore in front of this store may replay "
                   "the forgotten record until its cached copy expires: at most its "
                   "CachedStoreOptions::max_ttl (5 minutes by default). See docs/operations.md.\n";
    }
    if (!change->before) return fail(Exit::not_found, "no record under that key in scope " + scope);
    if (!change->changed) {
      return fail(Exit::not_found,
                  std::string("nothing to ") + (release->parsed() ? "release" : "forget") +
                      ": the record is " +
                      std::string(idem::admin::to_string(change->before->state)) +
                      (fence != 0 ? " (or its fence is not " + std::to_string(fence) + ")" : ""));
    }
    return Exit::ok;
  }
  if (purge->parsed()) {
    auto removed = admin.purge_expired(max_records);
    if (!removed) return fail(removed.failure());
    if (json) {
      std::cout << "{\"purged\":" << removed.value() << "}\n";
    } else {
      std::cout << "purged " << removed.value() << " expired records\n";
    }
    return Exit::ok;
  }
  if (stats->parsed()) {
    auto counts = admin.stats(scope, all_scopes);
    if (!counts) return fail(counts.failure());
    idem::cli::print_stats(std::cout, all_scopes ? "*" : scope, counts.value(), json);
    return Exit::ok;
  }
  return Exit::usage;
}
