#!/bin/sh
# exec-plugin.sh: a stand-in exec credential plugin for tests/k8s/test_k8s_config.c.
#   $1  the apiVersion to answer with
#   $2  token: prints a token "exec-$GREETING-N" (N = the runs so far)
#       cert: prints a client certificate and key
#       fail: a message on stderr, exit status 3
#       garbage: prints text that is not JSON
#       expired: a token that expired in 2001
# When LATHE_PLUGIN_DIR is set, each run appends a line to $LATHE_PLUGIN_DIR/runs
# and writes $KUBERNETES_EXEC_INFO to $LATHE_PLUGIN_DIR/info.
n=0
if [ -n "$LATHE_PLUGIN_DIR" ]; then
    echo run >> "$LATHE_PLUGIN_DIR/runs"
    printf '%s' "$KUBERNETES_EXEC_INFO" > "$LATHE_PLUGIN_DIR/info"
    n=$(wc -l < "$LATHE_PLUGIN_DIR/runs" | tr -d ' ')
fi
case "$2" in
token)
    printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"exec-%s-%s","expirationTimestamp":"2999-01-01T00:00:00Z"}}\n' "$1" "$GREETING" "$n" ;;
cert)
    printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"clientCertificateData":"-----BEGIN CERTIFICATE-----\\nX\\n-----END CERTIFICATE-----\\n","clientKeyData":"-----BEGIN PRIVATE KEY-----\\nY\\n-----END PRIVATE KEY-----\\n"}}\n' "$1" ;;
expired)
    printf '{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"old-%s","expirationTimestamp":"2001-01-01T00:00:00Z"}}\n' "$1" "$n" ;;
fail)
    echo "exec-plugin.sh: no credentials here" >&2
    exit 3 ;;
garbage)
    echo "this is not json" ;;
esac
