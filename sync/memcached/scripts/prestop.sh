{{- /* The keepWarm preStop (preStop, handoff.go), rendered with Sleep, Seconds,
Key and Port: sleep while endpoints drop the Pod, then ask the Pod's own
memcached for the done key every second until it holds it or Seconds pass,
with the image's sh, nc and timeout. quit makes memcached close, so nc
returns at once. It passes whatever happens: a preStop that fails changes
nothing but a log line. */ -}}
sleep {{.Sleep}}
end=$(( $(date +%s) + {{.Seconds}} ))
while [ "$(date +%s)" -lt "$end" ]; do
  case "$(printf 'mg {{.Key}} v\r\nquit\r\n' | timeout 2 nc 127.0.0.1 {{.Port}})" in VA*) exit 0 ;; esac
  sleep 1
done
{{- /* no newline: the script is the command's last argument */ -}}
