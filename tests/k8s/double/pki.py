"""pki.py: the CA, the server certificate (IP SAN 127.0.0.1, DNS localhost)
and the admin client certificate, made with the openssl command line
(argv lists, no shell) into STATE/pki/."""
import os
import subprocess


def _run(argv, cwd):
    last = None
    for _ in range(3):  # bounded retries: a failure here would make a test flaky
        r = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if r.returncode == 0:
            return
        last = "openssl failed (%s, exit %d): %s %s" % (" ".join(argv[:3]), r.returncode,
                                                         r.stderr.decode(errors="replace").strip(),
                                                         r.stdout.decode(errors="replace").strip())
    raise RuntimeError(last)


def make_pki(state_dir):
    d = os.path.join(state_dir, "pki")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o700)
    ossl = "openssl"
    if not os.path.exists(os.path.join(d, "ca.crt")):
        _run([ossl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
              "-days", "3650", "-subj", "/CN=kube-double-ca",
              "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"], d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=clientAuth\n")
    for name, subj, ext in (("server", "/CN=kube-apiserver", "server.ext"),
                            ("admin", "/O=system:masters/CN=admin", "client.ext")):
        if os.path.exists(os.path.join(d, name + ".crt")):
            continue
        _run([ossl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
              "-subj", subj], d)
        _run([ossl, "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
              "-CAcreateserial", "-out", name + ".crt", "-days", "3650", "-sha256", "-extfile", ext], d)
    for f in os.listdir(d):
        if f.endswith(".key"):
            os.chmod(os.path.join(d, f), 0o600)
    return {k: os.path.join(d, v) for k, v in (("ca", "ca.crt"), ("ca_key", "ca.key"), ("cert", "server.crt"),
                                              ("key", "server.key"), ("client_cert", "admin.crt"),
                                              ("client_key", "admin.key"))}
