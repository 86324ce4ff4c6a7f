{{- /* The reload sidecar (reloadScript, security.go), rendered with a
secretScript: at start and whenever kubelet switches a Secret's ..data
symlink, check the Secrets as check.sh does, then have memcached use them
(the SASL password file rewritten; SIGHUP, once memcached catches it, for
its certificates and ASCII users). */ -}}
set -u
umask 077
{{template "check-function.sh" .}}
state() {
{{- if .TLS}} readlink {{.TLSDir}}/..data;{{end}}
{{- if .Auth}} readlink {{.AuthDir}}/..data;{{end}} }
last=
while sleep {{.Seconds}}; do
  now=$(state)
  [ "$now" = "$last" ] && continue
  check || { echo 'a Secret changed but is not usable: memcached keeps the previous one'; last=$now; continue; }
{{- if and .Auth .Auth.SASL}}
  {{template "sasl-passwords.sh" .}} || { echo 'cannot write the SASL password file'; continue; }
{{- end}}
{{- if .Signal}}
  pid=$(pidof memcached) || continue
  caught=$(sed -n 's/^SigCgt:[[:space:]]*//p' /proc/$pid/status)
  {{- /* SigCgt has bit n-1 set for signal n: SIGHUP (1) is bit 0. */}}
  [ $(( 0x${caught:-0} & 1 )) -ne 0 ] || continue
  kill -HUP $pid || continue
{{- end}}
  last=$now
  echo "memcached has the Secrets of $(echo $now)"
done
