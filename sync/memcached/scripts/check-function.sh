{{- /* check: the Secrets' keys, checked the way memcached will read them.
It runs in a subshell, so a failure ends it alone, and its last line, which
the status repeats, names the field and the Secret, never a value. */ -}}
fail() { echo "$*" >&2; exit 1; }
check() (
{{- with .TLS}}{{range .Keys}}
  [ -s {{$.TLSDir}}/{{.}} ] || fail 'spec.tls.secretName: Secret {{q $.TLS.Secret}} has no {{.}}, or does not exist'
  grep -q -e '-----BEGIN ' {{$.TLSDir}}/{{.}} || fail 'spec.tls.secretName: Secret {{q $.TLS.Secret}}: {{.}} is not PEM'
{{- end}}
{{- /* Then memcached itself loads the files, with the options the server
has: a key that does not match the certificate, or a file OpenSSL cannot
read, is caught here, not by a SIGHUP that would leave the server with a
certificate and no key (its reload is not atomic). Told to listen on a
TEST-NET address (RFC 5737), which no interface has, memcached exits 71
(EX_OSERR) at the bind, after loading them; it exits 64 (EX_USAGE) when it
cannot load them. Its error names a file and OpenSSL's reason, never a
value. */}}
  out=$(timeout 10 memcached -Z -o {{.Options}} -l {{$.TrialAddress}} -p {{$.Port}} -U 0 -c 64 -t 1 2>&1)
  [ $? -eq 71 ] || fail "spec.tls.secretName: Secret \"{{.Secret}}\": memcached cannot load it: $(echo "$out" | grep -m 1 -e '^Error' || echo "$out" | tail -n 1)"
{{- end}}
{{- with .Auth}}
  [ -s {{$.AuthDir}}/users ] || fail 'spec.auth.secretName: Secret {{q .Secret}} has no users, or does not exist'
  grep -q -v -e '^[^:][^:]*:.' {{$.AuthDir}}/users && fail 'spec.auth.secretName: Secret {{q .Secret}}: users must hold one user:password a line, and no empty line'
  grep -q -e '^.\{ {{- inc .MaxLine -}} \}' {{$.AuthDir}}/users && fail 'spec.auth.secretName: Secret {{q .Secret}}: a line of users is at most {{.MaxLine}} characters'
{{- if .ASCII}}
  [ "$(grep -c . {{$.AuthDir}}/users)" -le {{.MaxUsers}} ] || fail 'spec.auth.secretName: Secret {{q .Secret}}: ASCII authentication takes at most {{.MaxUsers}} users'
{{- end}}
{{- if .SASL}}
{{- /* memcached's SASL password check ends a password at its first colon:
"a:b" would let "a" in. */}}
  grep -q -e '^[^:]*:.*:' {{$.AuthDir}}/users && fail 'spec.auth.secretName: Secret {{q .Secret}}: under SASL a password cannot hold a colon'
{{- end}}
{{- end}}
  true
)
{{- /* no newline: the caller's line break follows */ -}}
