{{- /* The check init container (checkScript, security.go), rendered with a
secretScript: refuse to start memcached when a Secret is not usable, its
last line on standard error naming why; for SASL, write memcached's SASL
configuration and password file. */ -}}
set -u
umask 077
{{template "check-function.sh" .}}
check || exit 1
{{- if and .Auth .Auth.SASL}}
echo 'mech_list: plain' > {{.SASLDir}}/memcached.conf || fail 'cannot write the SASL configuration'
{{template "sasl-passwords.sh" .}} || fail 'cannot write the SASL password file'
{{- end}}
echo 'the Secrets are ready'
