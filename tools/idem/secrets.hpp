#pragma once
// The store's password for the idem command: never from its arguments, which every user of the
// machine can read (ps, /proc/PID/cmdline), but from a file or the environment.

#include <optional>
#include <string>
#include <string_view>

namespace idem::cli {

/// Whether `uri` carries a password: a Redis URI's user-info (redis://:secret@..., a lone
/// redis://secret@...), any other URI's user:secret@ or password= parameter (libpq's), or a
/// libpq key=value string's password=.
bool has_password(std::string_view uri);

/// The password in `path`: its first line, without the line end. nullopt, with `error` set
/// (naming the file, never its content), when it cannot be read or is empty.
std::optional<std::string> read_password_file(const std::string& path, std::string& error);

/// The scheme of `uri` ("redis", "postgresql", "sqlite"...), for messages that must not show the
/// rest of it; "" when it has none.
std::string scheme_of(std::string_view uri);

}  // namespace idem::cli
