{{- /* The liveness check (versionCheck, pods.go), rendered with Seconds and
Port: a binary-protocol VERSION request then CRLF, to which memcached answers
something in every mode the operator runs it in; a hung one answers nothing.
nc waits for memcached to close, which it does not: timeout ends it. */ -}}
test "$(printf '\200\013\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\r\n' | timeout {{.Seconds}} nc 127.0.0.1 {{.Port}} | wc -c)" -gt 0
{{- /* no newline: the script is the command's last argument */ -}}
