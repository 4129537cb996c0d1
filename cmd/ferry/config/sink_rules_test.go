package config_test

// The checks in this file hold `ferry validate` to what `ferry run` does
// when it builds the sinks: a configuration Parse accepts must build, one
// the sink would refuse must be refused by Parse, at the right path, with
// the fix, and without echoing secrets. Package config calls the sinks'
// exported checks (webhook.CheckHeader, kafka.CheckTopic, ...); these
// tests also build the sinks themselves.

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/sink/natsjs"
	"github.com/ferry-io/ferry/sink/webhook"
)

// exactProblem parses doc and requires a problem at path whose message is
// exactly msg; it returns the error text.
func exactProblem(t *testing.T, doc string, env map[string]string, path, msg string) string {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), testEnv(env))
	if err == nil {
		t.Fatalf("no error; parsed %s", cfg.Redacted())
	}
	checkNoSecrets(t, err.Error())
	var got []config.Problem
	for _, p := range problems(t, err) {
		if p.Path == path {
			if p.Message == msg {
				return err.Error()
			}
			got = append(got, p)
		}
	}
	t.Errorf("want the problem\n  %s: %s\ngot %v in:\n%v", path, msg, got, err)
	return err.Error()
}

const secretHint = `the secret must be "whsec_" followed by the base64 of 24 to 64 random bytes; generate one with printf 'whsec_%s' "$(head -c 32 /dev/urandom | base64)"`

func TestWebhookSecretFormat(t *testing.T) {
	const path = "streams[0].sink.webhook.secret"
	for _, c := range []struct{ name, secret, msg string }{
		{"no prefix", "notawhsec-but-a-s3cret-value", `does not start with "whsec_": ` + secretHint},
		{"raw base64 key", strings.TrimPrefix(hookSecret, "whsec_"), `does not start with "whsec_": ` + secretHint},
		{"not base64", "whsec_not-base64-s3cret-value!", `the part after "whsec_" is not valid base64: ` + secretHint},
		{"url-safe base64", "whsec_" + base64.URLEncoding.EncodeToString([]byte("\xfb\xff-s3cret-value-of-24-bytes")), `the part after "whsec_" is not valid base64: ` + secretHint},
		{"too short", "whsec_" + base64.StdEncoding.EncodeToString([]byte("s3cret-23-bytes-long-xx")), "encodes 23 bytes: " + secretHint},
		{"too long", "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s3cret-", 10))), "encodes 70 bytes: " + secretHint},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := exactProblem(t, minimal, map[string]string{"HOOK_SECRET": c.secret}, path, c.msg)
			if strings.Contains(text, c.secret) || strings.Contains(text, "s3cret") {
				t.Errorf("the error reveals the secret: %v", text)
			}
			// The sink refuses it too: ferry run would fail.
			if _, err := webhook.DecodeSecret(c.secret); err == nil {
				t.Errorf("webhook.DecodeSecret accepts %q", c.secret)
			}
		})
	}
	// Secrets the sink accepts pass, at both ends of the length range.
	for _, n := range []int{24, 32, 64} {
		secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", n)))
		if _, err := config.Parse([]byte(minimal), testEnv(map[string]string{"HOOK_SECRET": secret})); err != nil {
			t.Errorf("a %d-byte key: %v", n, err)
		}
		if _, err := webhook.DecodeSecret(secret); err != nil {
			t.Errorf("webhook.DecodeSecret(%d-byte key): %v", n, err)
		}
	}
}

// TestWebhookHeadersMatchSink checks every header name the sink refuses or
// sets itself, in several cases, against the configuration: Parse refuses
// exactly what webhook.Header refuses.
func TestWebhookHeadersMatchSink(t *testing.T) {
	names := []string{
		"Content-Type", "content-length", "HOST", "Webhook-Id", "webhook-timestamp", "WEBHOOK-SIGNATURE",
		"Idempotency-Key", "idempotency-key", "Ferry-Epoch", "ferry-epoch", "FERRY-EPOCH",
		"User-Agent", "user-agent", "X-Team", "Authorization", "Ferry-Epochs", "X-Ferry-Epoch", "ferry_epoch",
	}
	for _, name := range names {
		doc := edit("        secret:", "        headers: {\""+name+"\": v}\n        secret:")
		cfg, perr := config.Parse([]byte(doc), testEnv(nil))
		_, serr := webhook.New("https://hooks.example.com/ferry", webhook.Secret(hookSecret), webhook.Header(name, "v"))
		if (perr == nil) != (serr == nil) {
			t.Errorf("header %q: Parse says %v, webhook.Header says %v", name, perr, serr)
			continue
		}
		if perr != nil {
			exactProblem(t, doc, nil, "streams[0].sink.webhook.headers."+name, "is set by the webhook sink and cannot be overridden")
		} else if got := cfg.Streams[0].Sink.Webhook.Headers; len(got) != 1 {
			t.Errorf("header %q: Headers = %v", name, got)
		}
	}
	// Values: control characters other than tab are refused by both.
	for _, v := range []string{`a\x01b`, `a\x7fb`, `a\0b`, `a\nb`, `a\rb`, `a\eb`} { // YAML escapes
		doc := edit("        secret:", "        headers: {X-Team: \""+v+"\"}\n        secret:")
		exactProblem(t, doc, nil, "streams[0].sink.webhook.headers.X-Team", "the value must not contain line breaks or other control characters (tabs are allowed)")
	}
	cfg, err := config.Parse([]byte(edit("        secret:", "        headers: {X-Team: \"a\\tb\", user-agent: acme-gateway/2}\n        secret:")), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Streams[0].Sink.Webhook.Headers
	if h["X-Team"] != "a\tb" || h["User-Agent"] != "acme-gateway/2" {
		t.Errorf("headers = %q", h)
	}
	if _, err := webhook.New("https://hooks.example.com/ferry", webhook.Secret(hookSecret), webhook.Header("X-Team", "a\x01b")); err == nil {
		t.Error("webhook.Header accepts a control character")
	}
}

const natsConfig = `
streams:
  - name: orders
    source: {uri: "mongodb://db1:27017/?replicaSet=rs0", scope: {collection: shop.orders}}
    sink:
      nats: {url: "nats://127.0.0.1:4222", subject: "ferry.{db}.{coll}.{op}"}
`

func natsEdit(old, new string) string {
	if !strings.Contains(natsConfig, old) {
		panic("test edit does not apply: " + old)
	}
	return strings.Replace(natsConfig, old, new, 1)
}

const subjectHint = "; write '.'-separated literal tokens and the placeholders {db}, {coll} and {op}, such as ferry.{db}.{coll}.{op}"

// TestNATSSubjectMatchesSink checks that Parse refuses the subject templates
// natsjs.Subject refuses, with the same reason.
func TestNATSSubjectMatchesSink(t *testing.T) {
	const path = "streams[0].sink.nats.subject"
	for _, c := range []struct{ subject, msg string }{
		{"ferry.{foo}.>", "is not a valid subject template: unknown placeholder {foo} (want {db}, {coll} or {op})" + subjectHint},
		{"ferry.{db}.>", "is not a valid subject template: wildcard '>': a publish subject must be literal" + subjectHint},
		{"ferry.*.{op}", "is not a valid subject template: wildcard '*': a publish subject must be literal" + subjectHint},
		{"ferry.{db", "is not a valid subject template: unclosed '{'" + subjectHint},
		{"ferry.db}", "is not a valid subject template: unmatched '}'" + subjectHint},
		{"ferry {db}", "is not a valid subject template: whitespace or control character ' '" + subjectHint},
		{"ferry..{db}", "is not a valid subject template: empty token (leading, trailing or doubled '.')" + subjectHint},
		{"", "must not be empty: leave subject out for the default ferry.{db}.{coll}.{op}"},
	} {
		t.Run(c.subject, func(t *testing.T) {
			exactProblem(t, natsEdit(`"ferry.{db}.{coll}.{op}"`, `"`+c.subject+`"`), nil, path, c.msg)
			if _, err := natsjs.New("nats://127.0.0.1:4222", natsjs.Subject(c.subject)); err == nil {
				t.Errorf("natsjs.Subject(%q) accepted", c.subject)
			}
		})
	}
	for _, subject := range []string{"cdc.{db}-{coll}.{op}.v1", "static", "{op}"} {
		cfg, err := config.Parse([]byte(natsEdit("ferry.{db}.{coll}.{op}", subject)), testEnv(nil))
		if err != nil {
			t.Errorf("%q: %v", subject, err)
			continue
		}
		if _, err := natsjs.New(cfg.Streams[0].Sink.NATS.URL, natsjs.Subject(cfg.Streams[0].Sink.NATS.Subject)); err != nil {
			t.Errorf("%q: natsjs: %v", subject, err)
		}
	}
	// A null subject keeps the default.
	cfg, err := config.Parse([]byte(natsEdit(`, subject: "ferry.{db}.{coll}.{op}"`, `, subject: `)), testEnv(nil))
	if err != nil || cfg.Streams[0].Sink.NATS.Subject != "ferry.{db}.{coll}.{op}" {
		t.Errorf("null subject: %v", err)
	}
}

// TestNATSURLCredentials checks that credentials in the NATS URL
// (user:password@ or token@) never show in Redacted, in fmt, or in errors.
func TestNATSURLCredentials(t *testing.T) {
	const password, token = "n4ts-pa55w0rd", "n4ts-t0ken-s3cret"
	env := map[string]string{"NATS_PASSWORD": password, "NATS_TOKEN": token}
	for _, c := range []struct{ url, want string }{
		{"nats://ferry:${NATS_PASSWORD}@nats-1:4222", "url: nats://REDACTED@nats-1:4222"},
		{"tls://${NATS_TOKEN}@nats-1:4222", "url: tls://REDACTED@nats-1:4222"},
		{"nats://ferry:${NATS_PASSWORD}@nats-1:4222, nats://ferry:${NATS_PASSWORD}@nats-2", "url: nats://REDACTED@nats-1:4222,nats://REDACTED@nats-2"},
		{"nats://nats-1:4222", "url: nats://nats-1:4222"},
	} {
		cfg, err := config.Parse([]byte(natsEdit("nats://127.0.0.1:4222", c.url)), testEnv(env))
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		red := cfg.Redacted()
		for name, out := range map[string]string{"Redacted": red, "%v": fmt.Sprintf("%v", cfg)} {
			if strings.Contains(out, password) || strings.Contains(out, token) {
				t.Errorf("%s leaks a NATS credential:\n%s", name, out)
			}
		}
		if !strings.Contains(red, c.want) {
			t.Errorf("Redacted lacks %q:\n%s", c.want, red)
		}
		if got := cfg.Streams[0].Sink.NATS.URL; !strings.Contains(got, "nats-1:4222") || strings.Contains(got, "REDACTED") {
			t.Errorf("URL = %q: the configuration must keep the credentials for the sink", got)
		}
	}
	// Bad URLs are refused without echoing them.
	const path = "streams[0].sink.nats.url"
	const want = "must be a nats:// or tls:// URL such as nats://127.0.0.1:4222 (or a comma-separated list of them)"
	for _, c := range []struct{ url, msg string }{
		{"http://ferry:${NATS_PASSWORD}@nats-1", want},
		{"nats-1:4222", want},
		{"nats://ferry:${NATS_PASSWORD} x@nats-1:4222", want + ": it does not parse; percent-encode reserved characters (such as '@', ':', '/', '?', '#' and spaces) in the user name, password or token"},
		{"nats://ferry:${NATS_PASSWORD}@", want + ": no host"},
		{"nats://ferry:${NATS_PASSWORD}@nats-1:99999", want + ": the port must be a number from 1 to 65535"},
		{"nats://ferry:1/${NATS_PASSWORD}@nats-1:4222", want + ": a server URL has no path, query or fragment (percent-encode '/', '?' and '#' in the user name, password or token)"},
		{"nats://nats-1:4222,https://ferry:${NATS_PASSWORD}@nats-2", want + " (URL 2 of 2)"},
		{" , ", want},
	} {
		text := exactProblem(t, natsEdit("nats://127.0.0.1:4222", c.url), env, path, c.msg)
		if strings.Contains(text, password) || strings.Contains(text, "nats-1") {
			t.Errorf("%s: the error echoes the URL: %v", c.url, text)
		}
	}
}

func TestMongoDBSinkRefusesWhenAvailable(t *testing.T) {
	doc := strings.Replace(mongoSinkConfig, "full_document: updateLookup", "full_document: whenAvailable", 1)
	exactProblem(t, doc, nil, "streams[0].source.full_document",
		"whenAvailable cannot be used with the mongodb sink: an update whose post-image was not recorded arrives without its full document, and the projection would miss that change; set updateLookup, or required (with changeStreamPreAndPostImages enabled on the collection)")
	for _, fd := range []string{"updateLookup", "required"} {
		doc := strings.Replace(mongoSinkConfig, "full_document: updateLookup", "full_document: "+fd, 1)
		if _, err := config.Parse([]byte(doc), testEnv(nil)); err != nil {
			t.Errorf("%s: %v", fd, err)
		}
	}
}
