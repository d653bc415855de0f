# shellcheck shell=bash
# A throwaway certificate authority for the TLS tests, made with the openssl command.
#
#   source scripts/lib/tls.sh
#   make_test_ca DIR   # writes into DIR (created if missing) and exports IDEM_TEST_TLS_DIR=DIR:
#     ca.crt ca.key              the authority every good certificate is signed by
#     server.crt server.key      a server certificate for localhost and 127.0.0.1 (SAN)
#     client.crt client.key      a client certificate (CN idem-client) signed by the authority
#     expired.crt expired.key    a server certificate for localhost and 127.0.0.1 that expired
#                                in 2001 (signed by the same authority)
#     other-ca.crt other-ca.key  a second authority that signed nothing above: trusting it alone
#                                must refuse every server here
#     other-client.crt .key      a client certificate signed by the other authority
#
# Keys are unencrypted P-256 keys, readable by their owner only (chmod 600; PostgreSQL refuses a
# key others can read). The folder is meant to be thrown away with the servers that use it.
# This file is sourced: it leaves the caller's shell options alone.

_idem_tls_say() { echo "tls: $*" >&2; }

# _idem_tls_key FILE: a new P-256 private key.
_idem_tls_key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null &&
    chmod 600 "$1"
}

# _idem_tls_authority NAME DIR: a self-signed authority DIR/NAME.crt with its key DIR/NAME.key.
_idem_tls_authority() {
  local name=$1 dir=$2
  _idem_tls_key "$dir/$name.key" &&
    openssl req -x509 -new -key "$dir/$name.key" -sha256 -days 30 -subj "/CN=idem test $name" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "$dir/$name.crt" 2>/dev/null
}

# _idem_tls_sign DIR AUTHORITY NAME SUBJECT EXTFILE [START END]: DIR/NAME.crt for a new key
# DIR/NAME.key, signed by DIR/AUTHORITY.{crt,key}; START and END (YYYYMMDDHHMMSSZ) set its
# validity, else 30 days from now. `openssl ca` is used because it alone sets a validity in the
# past in OpenSSL 3.0.
_idem_tls_sign() {
  local dir=$1 ca=$2 name=$3 subject=$4 ext=$5 start=${6:-} end=${7:-}
  local db=$dir/.ca-$name
  mkdir -p "$db" && : >"$db/index.txt" && echo 01 >"$db/serial" || return 1
  printf '%s\n' "[ca]" "default_ca = test" "[test]" "database = $db/index.txt" \
    "serial = $db/serial" "new_certs_dir = $db" "default_md = sha256" "policy = any" \
    "copy_extensions = none" "unique_subject = no" "[any]" "commonName = supplied" \
    >"$db/ca.cnf" || return 1
  local validity=(-days 30)
  [[ -z $start ]] || validity=(-startdate "$start" -enddate "$end")
  _idem_tls_key "$dir/$name.key" &&
    openssl req -new -key "$dir/$name.key" -subj "$subject" -out "$db/req.csr" 2>/dev/null &&
    openssl ca -batch -notext -config "$db/ca.cnf" -cert "$dir/$ca.crt" -keyfile "$dir/$ca.key" \
      "${validity[@]}" -extfile "$ext" -in "$db/req.csr" -out "$dir/$name.crt" \
      >"$db/ca.log" 2>&1 || { cat "$db/ca.log" >&2; return 1; }
  rm -rf "$db"
}

make_test_ca() {
  local dir=${1:?make_test_ca needs a folder}
  command -v openssl >/dev/null || { _idem_tls_say "openssl not found (scripts/deps installs it)"; return 1; }
  mkdir -p "$dir" || return 1
  local server_ext=$dir/.server.ext client_ext=$dir/.client.ext
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$server_ext" &&
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=clientAuth" >"$client_ext" || return 1
  if ! { _idem_tls_authority ca "$dir" &&
    _idem_tls_authority other-ca "$dir" &&
    _idem_tls_sign "$dir" ca server "/CN=localhost" "$server_ext" &&
    _idem_tls_sign "$dir" ca client "/CN=idem-client" "$client_ext" &&
    _idem_tls_sign "$dir" ca expired "/CN=localhost" "$server_ext" 20000101000000Z 20010101000000Z &&
    _idem_tls_sign "$dir" other-ca other-client "/CN=idem-client" "$client_ext"; }; then
    _idem_tls_say "could not make the test certificates in $dir"
    return 1
  fi
  rm -f "$server_ext" "$client_ext"
  export IDEM_TEST_TLS_DIR=$dir
  _idem_tls_say "test authority in $dir"
}
