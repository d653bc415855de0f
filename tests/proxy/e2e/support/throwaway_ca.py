"""Certificates for one test run, made by the `openssl` command line: a CA, the proxy's server
certificate for 127.0.0.1, and client certificates it signs."""
import os
import shutil
import subprocess
import tempfile


def _openssl(*args):
    openssl = shutil.which("openssl")
    if openssl is None:
        raise AssertionError("the openssl command is not installed (Debian package openssl)")
    done = subprocess.run([openssl, *args], capture_output=True, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)} failed: {done.stderr.decode()}")


class ThrowawayCa:
    """A CA named `name`, its files under `folder`; issue() makes a key and a certificate."""

    def __init__(self, folder, name):
        self.folder = folder
        self.name = name
        self.key = os.path.join(folder, f"{name}.key")
        self.certificate = os.path.join(folder, f"{name}.crt")
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-keyout", self.key, "-out", self.certificate, "-days", "2",
                 "-subj", f"/CN={name}")

    def issue(self, file_name, subject, extensions):
        """(certificate, key) paths of a new certificate for `subject` ("/CN=..."), signed by
        this CA with `extensions` (an openssl extension file's lines)."""
        key = os.path.join(self.folder, f"{file_name}.key")
        request = os.path.join(self.folder, f"{file_name}.csr")
        certificate = os.path.join(self.folder, f"{file_name}.crt")
        extension_file = os.path.join(self.folder, f"{file_name}.ext")
        with open(extension_file, "w", encoding="ascii") as f:
            f.write("\n".join(extensions) + "\n")
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", key, "-out", request, "-subj", subject)
        _openssl("x509", "-req", "-in", request, "-CA", self.certificate, "-CAkey", self.key,
                 "-CAcreateserial", "-out", certificate, "-days", "2", "-extfile", extension_file)
        return certificate, key

    def server(self, file_name="server"):
        return self.issue(file_name, "/CN=127.0.0.1",
                          ["subjectAltName = IP:127.0.0.1", "extendedKeyUsage = serverAuth"])

    def client(self, file_name, common_name):
        return self.issue(file_name, f"/O=idem e2e/CN={common_name}",
                          ["extendedKeyUsage = clientAuth"])


def make_folder():
    return tempfile.mkdtemp(prefix="idem-e2e-ca.")
