package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/example/memcached-operator/cmd/internal/reload"
)

// errEmpty is a credential file with nothing in it but white space.
var errEmpty = errors.New("is empty")

// Why a call was refused with 401, as the auth failures metric counts it.
const (
	authMissing       = "missing_credentials"
	authWrong         = "wrong_credentials"
	authNoClientCert  = "no_client_certificate"
	authWrongScheme   = "wrong_scheme"
	authRealm         = "memcached-hook"
	bearerScheme      = "Bearer"
	basicScheme       = "Basic"
	wwwAuthBearer     = bearerScheme + ` realm="` + authRealm + `"`
	wwwAuthBasic      = basicScheme + ` realm="` + authRealm + `", charset="UTF-8"`
	authFailureHeader = "WWW-Authenticate"
)

// authFailureReasons are every reason label of the auth failures metric.
var authFailureReasons = []string{authMissing, authWrong, authWrongScheme, authNoClientCert}

// authConfig says which credentials a hook call must carry; the zero value
// asks for none. The options match what a CompositeController's webhook can
// send: authorization (a token, scheme Bearer), basicAuth (a username and a
// password), clientTLS (a client certificate, checked by the TLS layer
// against --client-ca-file).
type authConfig struct {
	tokenFile        string
	basicUserFile    string
	basicPassFile    string
	clientCertNeeded bool
}

// authenticator checks the credentials of hook calls. The files it reads
// are followed as they change, so that rotating the Secret needs no
// restart.
type authenticator struct {
	token      *reload.Reloading[[sha256.Size]byte]
	basic      *reload.Reloading[basicCredentials]
	clientCert bool
	logger     *slog.Logger
	metrics    *metrics
}

// basicCredentials are the SHA-256 sums of the expected username and
// password: comparing sums of equal length in constant time tells an
// attacker nothing, not even the length.
type basicCredentials struct {
	user, pass [sha256.Size]byte
}

// newAuthenticator reads the credential files. It returns nil when cfg
// asks for no credentials.
func newAuthenticator(cfg authConfig, logger *slog.Logger, m *metrics) (*authenticator, error) {
	if cfg == (authConfig{}) {
		return nil, nil
	}
	a := &authenticator{clientCert: cfg.clientCertNeeded, logger: logger, metrics: m}
	var err error
	if cfg.tokenFile != "" {
		a.token, err = reload.New(logger, "bearer token", func(c [][]byte) ([sha256.Size]byte, error) {
			// Metacontroller trims the Secret's value, as we do.
			tok := bytes.TrimSpace(c[0])
			if len(tok) == 0 {
				return [sha256.Size]byte{}, errEmpty
			}
			return sha256.Sum256(tok), nil
		}, cfg.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--auth-token-file: %w", err)
		}
	}
	if cfg.basicUserFile != "" {
		a.basic, err = reload.New(logger, "basic auth credentials", func(c [][]byte) (basicCredentials, error) {
			user, pass := bytes.TrimSpace(c[0]), bytes.TrimSpace(c[1])
			switch {
			case len(user) == 0:
				return basicCredentials{}, fmt.Errorf("username %w", errEmpty)
			case len(pass) == 0:
				return basicCredentials{}, fmt.Errorf("password %w", errEmpty)
			case bytes.ContainsRune(user, ':'):
				return basicCredentials{}, fmt.Errorf("username contains a colon, which Basic authentication cannot carry")
			}
			return basicCredentials{user: sha256.Sum256(user), pass: sha256.Sum256(pass)}, nil
		}, cfg.basicUserFile, cfg.basicPassFile)
		if err != nil {
			return nil, fmt.Errorf("--basic-auth-username-file, --basic-auth-password-file: %w", err)
		}
	}
	return a, nil
}

// middleware refuses, with 401 and a JSON error, every call without the
// credentials asked for. It guards the hooks only: probes and metrics
// scrapes carry no credentials.
func (a *authenticator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reason, msg := a.check(r); reason != "" {
			a.metrics.authFailures.WithLabelValues(reason).Inc()
			a.logger.LogAttrs(r.Context(), slog.LevelWarn, "refused unauthenticated call",
				slog.String("path", r.URL.Path), slog.String("remote_addr", r.RemoteAddr), slog.String("reason", reason))
			switch {
			case a.token != nil:
				w.Header().Set(authFailureHeader, wwwAuthBearer)
			case a.basic != nil:
				w.Header().Set(authFailureHeader, wwwAuthBasic)
			}
			writeError(w, http.StatusUnauthorized, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// check returns why r is refused, or "" if it may go on.
func (a *authenticator) check(r *http.Request) (reason, msg string) {
	if a.clientCert && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
		return authNoClientCert, "a client certificate signed by --client-ca-file is required"
	}
	switch {
	case a.token != nil:
		h := r.Header.Get("Authorization")
		if h == "" {
			return authMissing, "an Authorization: Bearer token is required"
		}
		scheme, tok, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, bearerScheme) {
			return authWrongScheme, "the Authorization scheme must be Bearer"
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		want := a.token.Get()
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return authWrong, "wrong bearer token"
		}
	case a.basic != nil:
		if r.Header.Get("Authorization") == "" {
			return authMissing, "Basic authentication is required"
		}
		user, pass, ok := r.BasicAuth()
		if !ok {
			return authWrongScheme, "the Authorization scheme must be Basic"
		}
		want := a.basic.Get()
		gotUser, gotPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
		// Both compared, always: which one is wrong takes no less time.
		if subtle.ConstantTimeCompare(gotUser[:], want.user[:])&subtle.ConstantTimeCompare(gotPass[:], want.pass[:]) != 1 {
			return authWrong, "wrong username or password"
		}
	}
	return "", ""
}
