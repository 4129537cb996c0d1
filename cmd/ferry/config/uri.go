package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Redaction replaces every secret in Redacted output and in String methods.
const Redaction = "REDACTED"

// A Secret is a value that must never be printed: its String, GoString and
// MarshalYAML methods return "REDACTED". Use Reveal to get the value.
type Secret string

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redaction
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// MarshalYAML redacts the secret in YAML output.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// A MongoURI is a mongodb:// or mongodb+srv:// connection string. Its
// String, GoString and MarshalYAML methods replace the credentials
// (user:password@) and secret-bearing options with "REDACTED". Use Reveal
// to connect.
type MongoURI string

// Reveal returns the connection string with its credentials.
func (u MongoURI) Reveal() string { return string(u) }

func (u MongoURI) String() string { return redactMongoURI(string(u)) }

// GoString keeps %#v from printing credentials.
func (u MongoURI) GoString() string { return strconv.Quote(u.String()) }

// MarshalYAML redacts the credentials in YAML output.
func (u MongoURI) MarshalYAML() (any, error) { return u.String(), nil }

// secretOptions are connection-string options whose values are credentials.
var secretOptions = []string{"authmechanismproperties", "tlscertificatekeyfilepassword", "sslclientcertificatekeypassword", "password"}

// splitMongoURI splits a connection string into scheme, userinfo (without
// the @), hosts, and the rest (from the first "/" or "?", if any).
func splitMongoURI(s string) (scheme, userinfo, hosts, rest string, ok bool) {
	scheme, after, found := strings.Cut(s, "://")
	if !found {
		return "", "", "", "", false
	}
	authority := after
	if i := strings.IndexAny(after, "/?"); i >= 0 {
		authority, rest = after[:i], after[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hosts = authority[:i], authority[i+1:]
	} else {
		hosts = authority
	}
	return scheme, userinfo, hosts, rest, true
}

// redactMongoURI hides the userinfo and secret options of a connection
// string. Text that does not parse as one is hidden entirely.
func redactMongoURI(s string) string {
	if s == "" {
		return ""
	}
	scheme, userinfo, hosts, rest, ok := splitMongoURI(s)
	if !ok {
		return Redaction
	}
	out := scheme + "://"
	if userinfo != "" {
		out += Redaction + "@"
	}
	out += hosts
	path, query, hasQuery := strings.Cut(rest, "?")
	out += path
	if hasQuery {
		parts := strings.Split(query, "&")
		for i, p := range parts {
			k, _, _ := strings.Cut(p, "=")
			if isSecretOption(k) {
				parts[i] = k + "=" + Redaction
			}
		}
		out += "?" + strings.Join(parts, "&")
	}
	return out
}

func isSecretOption(k string) bool {
	k = strings.ToLower(k)
	for _, s := range secretOptions {
		if k == s {
			return true
		}
	}
	return false
}

// checkMongoURI validates a connection string's shape without any network
// access (no DNS lookup for mongodb+srv). Its errors never contain the
// string or parts of it.
func checkMongoURI(s string) error {
	const want = "must be a mongodb:// or mongodb+srv:// connection string"
	scheme, userinfo, hosts, rest, ok := splitMongoURI(s)
	if !ok || (scheme != "mongodb" && scheme != "mongodb+srv") {
		return errors.New(want)
	}
	if userinfo != "" {
		user, pass, _ := strings.Cut(userinfo, ":")
		if _, err := url.PathUnescape(user); err != nil || user == "" {
			return errors.New(want + ": the user name is empty or badly percent-encoded")
		}
		if _, err := url.PathUnescape(pass); err != nil || strings.ContainsAny(pass, ":@/") {
			return errors.New(want + ": the password must be percent-encoded")
		}
	}
	if hosts == "" {
		return errors.New(want + ": no host")
	}
	list := strings.Split(hosts, ",")
	if scheme == "mongodb+srv" && len(list) != 1 {
		return errors.New(want + ": mongodb+srv takes exactly one host name")
	}
	for _, h := range list {
		if err := checkHost(h, scheme == "mongodb+srv"); err != nil {
			return errors.New(want + ": " + err.Error())
		}
	}
	path, query, _ := strings.Cut(rest, "?")
	if path != "" && path != "/" {
		db, err := url.PathUnescape(path[1:])
		if err != nil || strings.ContainsAny(db, "/\\ \"$") {
			return errors.New(want + ": bad database name after the hosts")
		}
	}
	if query != "" {
		if _, err := url.ParseQuery(query); err != nil {
			return errors.New(want + ": bad options after ?")
		}
	}
	return nil
}

func checkHost(h string, srv bool) error {
	if h == "" {
		return errors.New("empty host in the host list")
	}
	if strings.HasSuffix(h, ".sock") {
		return nil // a Unix domain socket path (percent-encoded)
	}
	host, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return errors.New("unterminated [ in an IPv6 host")
		}
		host, port = h[1:end], strings.TrimPrefix(h[end+1:], ":")
		if h[end+1:] != "" && !strings.HasPrefix(h[end+1:], ":") {
			return errors.New("bad IPv6 host")
		}
		if net.ParseIP(host) == nil {
			return errors.New("bad IPv6 address")
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		host, port = h[:i], h[i+1:]
	}
	if host == "" || strings.ContainsAny(host, " /?#@[]") {
		return errors.New("bad host name")
	}
	if port != "" || strings.HasSuffix(h, ":") {
		if srv {
			return errors.New("mongodb+srv host names take no port")
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return errors.New("port must be a number from 1 to 65535")
		}
	}
	return nil
}

// redactHTTPURL hides the password of a URL's userinfo and of query
// parameters that look like credentials.
func redactHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return Redaction
	}
	if u.User != nil {
		u.User = url.User(Redaction)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if looksSecret(k) {
				q[k] = []string{Redaction}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// looksSecret reports a header or parameter name that probably carries a
// credential.
func looksSecret(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "token", "secret", "key", "password", "passwd", "cookie", "signature", "sig", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// natsServerURLs splits a NATS server URL list as the NATS client does:
// comma-separated, spaces trimmed, empty entries dropped.
func natsServerURLs(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkNATSURL validates a NATS server URL, or a comma-separated list of
// them, as sink/natsjs and the NATS client parse it. Its errors never
// contain the URL or parts of it (it may hold a password or a token).
func checkNATSURL(s string) error {
	const want = "must be a nats:// or tls:// URL such as nats://127.0.0.1:4222 (or a comma-separated list of them)"
	urls := natsServerURLs(s)
	if len(urls) == 0 {
		return errors.New(want)
	}
	for i, raw := range urls {
		which := ""
		if len(urls) > 1 {
			which = fmt.Sprintf(" (URL %d of %d)", i+1, len(urls))
		}
		if !strings.HasPrefix(raw, "nats://") && !strings.HasPrefix(raw, "tls://") {
			return errors.New(want + which)
		}
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			return errors.New(want + which + ": it does not parse; percent-encode reserved characters (such as '@', ':', '/', '?', '#' and spaces) in the user name, password or token")
		case u.Hostname() == "":
			return errors.New(want + which + ": no host")
		case u.Port() != "":
			if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
				return errors.New(want + which + ": the port must be a number from 1 to 65535")
			}
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(raw, "#") {
			return errors.New(want + which + ": a server URL has no path, query or fragment (percent-encode '/', '?' and '#' in the user name, password or token)")
		}
	}
	return nil
}

// redactNATSURL hides the user info (user:password, or a token) of every
// URL in a NATS server URL list. A URL that does not parse is hidden
// entirely, and anything after the host replaced.
func redactNATSURL(s string) string {
	if s == "" {
		return ""
	}
	urls := natsServerURLs(s)
	for i, raw := range urls {
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw // as the NATS client reads it
		}
		u, err := url.Parse(raw)
		if err != nil {
			urls[i] = Redaction
			continue
		}
		r := url.URL{Scheme: u.Scheme, Host: u.Host}
		if u.User != nil {
			r.User = url.User(Redaction)
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			r.Path = "/" + Redaction
		}
		urls[i] = r.String()
	}
	return strings.Join(urls, ",")
}
