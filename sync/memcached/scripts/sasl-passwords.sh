{{- /* The SASL password file, from the users file: SASL looks a user up as
user@hostname, so a user without a realm gets the Pod's hostname, which is
the one memcached sees. */ -}}
sed "/^[^:@]*:/ s/^\([^:]*\):/\1@$(hostname):/" {{.AuthDir}}/users > {{.SASLDir}}/pwdb.new && mv {{.SASLDir}}/pwdb.new {{.SASLDir}}/pwdb
{{- /* no newline: the callers go on on the same line */ -}}
