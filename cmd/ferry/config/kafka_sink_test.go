package config_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferry-io/ferry/cmd/ferry/config"
)

// kafkaPassword is the SASL password the Kafka tests put in the
// environment; no error and no Redacted output may contain it.
const kafkaPassword = "k4fka-pa55-w0rd-7781"

const kafkaSinkConfig = `
streams:
  - name: orders
    source: {uri: "mongodb://db1:27017/?replicaSet=rs0", scope: {collection: shop.orders}}
    sink:
      kafka:
        brokers: ["kafka-1:9092", "kafka-2:9093"]
        topic: ferry.orders
        timeout: 3s
        sasl: {mechanism: scram-sha-512, user: ferry, password: "${KAFKA_PASSWORD}"}
`

func kafkaEnv() func(string) (string, bool) {
	return testEnv(map[string]string{"KAFKA_PASSWORD": kafkaPassword, "KAFKA_BROKER": "kafka-3.example.net:9094"})
}

func TestKafkaSink(t *testing.T) {
	cfg, err := config.Parse([]byte(kafkaSinkConfig), kafkaEnv())
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Streams[0].Sink
	k := s.Kafka
	if s.Type != config.SinkKafka || k == nil {
		t.Fatalf("sink = %+v", s)
	}
	if strings.Join(k.Brokers, ",") != "kafka-1:9092,kafka-2:9093" || k.Topic != "ferry.orders" || k.Timeout != 3*time.Second ||
		k.Encoding != "relaxed" || k.ClientID != "ferry" || k.TLS {
		t.Fatalf("kafka sink = %+v", k)
	}
	if k.SASL == nil || k.SASL.Mechanism != config.KafkaSASLScramSHA512 || k.SASL.User != "ferry" || k.SASL.Password.Reveal() != kafkaPassword {
		t.Fatalf("kafka sasl = %+v", k.SASL)
	}
	// The password never shows: not in Redacted, not in fmt.
	for what, out := range map[string]string{
		"Redacted": cfg.Redacted(),
		"%v":       fmt.Sprintf("%v", k.SASL),
		"%+v":      fmt.Sprintf("%+v", *k.SASL),
		"%#v":      fmt.Sprintf("%#v", *k.SASL),
		"String":   cfg.String(),
	} {
		if strings.Contains(out, kafkaPassword) {
			t.Errorf("%s shows the SASL password:\n%s", what, out)
		}
	}
	if r := cfg.Redacted(); !strings.Contains(r, "password: "+config.Redaction) || !strings.Contains(r, "topic: ferry.orders") {
		t.Errorf("Redacted:\n%s", r)
	}
}

func TestKafkaSinkOptions(t *testing.T) {
	for _, c := range []struct {
		name, sink string
		check      func(*config.Kafka) bool
	}{
		{"defaults", `{brokers: ["127.0.0.1:9092"], topic: t}`, func(k *config.Kafka) bool {
			return k.Encoding == config.DefaultKafkaEncoding && k.Timeout == config.DefaultKafkaTimeout &&
				k.ClientID == config.DefaultKafkaClientID && !k.TLS && k.SASL == nil
		}},
		{"everything", `{brokers: ["${KAFKA_BROKER}", "[::1]:9092"], topic: A-z_0.9, encoding: canonical, timeout: 250ms, client_id: shop-cdc, tls: true,
		  sasl: {mechanism: plain, user: u, password: "${KAFKA_PASSWORD}"}}`, func(k *config.Kafka) bool {
			return strings.Join(k.Brokers, ",") == "kafka-3.example.net:9094,[::1]:9092" && k.Topic == "A-z_0.9" &&
				k.Encoding == "canonical" && k.Timeout == 250*time.Millisecond && k.ClientID == "shop-cdc" && k.TLS &&
				k.SASL.Mechanism == "plain" && k.SASL.User == "u" && k.SASL.Password.Reveal() == kafkaPassword
		}},
		{"scram-sha-256", `{brokers: [b:1], topic: t, sasl: {mechanism: scram-sha-256, user: u, password: p}}`, func(k *config.Kafka) bool {
			return k.SASL.Mechanism == config.KafkaSASLScramSHA256
		}},
		{"null sasl and client_id", `{brokers: [b:1], topic: t, sasl: null, client_id: ~}`, func(k *config.Kafka) bool {
			return k.SASL == nil && k.ClientID == "ferry"
		}},
		{"longest topic", `{brokers: [b:1], topic: ` + strings.Repeat("t", 249) + `}`, func(k *config.Kafka) bool {
			return len(k.Topic) == 249
		}},
		{"block style", "\n        brokers:\n          - b:1\n        topic: t", func(k *config.Kafka) bool {
			return len(k.Brokers) == 1 && k.Brokers[0] == "b:1"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := strings.SplitN(kafkaSinkConfig, "    sink:", 2)[0] + "    sink:\n      kafka: " + c.sink + "\n"
			cfg, err := config.Parse([]byte(y), kafkaEnv())
			if err != nil {
				t.Fatal(err)
			}
			if k := cfg.Streams[0].Sink.Kafka; !c.check(k) {
				t.Fatalf("kafka sink = %+v (sasl %+v)", k, k.SASL)
			}
		})
	}
}

func TestKafkaSinkBad(t *testing.T) {
	const p = "streams[0].sink.kafka."
	sinkOnly := strings.SplitN(kafkaSinkConfig, "    sink:", 2)[0] + "    sink:\n"
	for _, c := range []struct {
		name, from, to string // edit of kafkaSinkConfig (or, with from "", the sink's lines)
		path, msg      string // one problem must have this exact path and contain msg
	}{
		{"missing brokers", `        brokers: ["kafka-1:9092", "kafka-2:9093"]` + "\n", ``, p + "brokers", "is required: the seed brokers"},
		{"null brokers", `["kafka-1:9092", "kafka-2:9093"]`, `~`, p + "brokers", "is required"},
		{"empty brokers", `["kafka-1:9092", "kafka-2:9093"]`, `[]`, p + "brokers", "at least one seed broker"},
		{"brokers a string", `["kafka-1:9092", "kafka-2:9093"]`, `"kafka-1:9092"`, p + "brokers", "must be a list of host:port addresses"},
		{"brokers a mapping", `["kafka-1:9092", "kafka-2:9093"]`, `{a: b}`, p + "brokers", "got a mapping"},
		{"broker without port", `"kafka-2:9093"`, `"kafka-2"`, p + "brokers[1]", "has no port"},
		{"empty broker", `"kafka-2:9093"`, `""`, p + "brokers[1]", "must not be empty"},
		{"null broker", `"kafka-2:9093"`, `~`, p + "brokers[1]", "must not be empty"},
		{"comma-separated brokers", `"kafka-1:9092", "kafka-2:9093"`, `"kafka-1:9092,kafka-2:9093"`, p + "brokers[0]", "list each broker as its own item"},
		{"broker with scheme", `"kafka-1:9092"`, `"kafka://kafka-1:9092"`, p + "brokers[0]", "without a scheme"},
		{"broker without host", `"kafka-1:9092"`, `":9092"`, p + "brokers[0]", "must name a host"},
		{"broker port zero", `"kafka-1:9092"`, `"kafka-1:0"`, p + "brokers[0]", "from 1 to 65535"},
		{"broker port too big", `"kafka-1:9092"`, `"kafka-1:99999"`, p + "brokers[0]", "from 1 to 65535"},
		{"broker port not a number", `"kafka-1:9092"`, `"kafka-1:kafka"`, p + "brokers[0]", "from 1 to 65535"},
		{"broker bare IPv6", `"kafka-1:9092"`, `"::1"`, p + "brokers[0]", "in brackets"},
		{"broker a list", `"kafka-1:9092"`, `[a]`, p + "brokers[0]", "single value"},
		{"broker unset env", `"kafka-1:9092"`, `"${NO_SUCH_BROKER}"`, p + "brokers[0]", "environment variable NO_SUCH_BROKER is not set"},
		{"missing topic", "        topic: ferry.orders\n", ``, p + "topic", "is required: the topic"},
		{"empty topic", `topic: ferry.orders`, `topic: ""`, p + "topic", "is required"},
		{"dot topic", `topic: ferry.orders`, `topic: "."`, p + "topic", "cannot be"},
		{"dot-dot topic", `topic: ferry.orders`, `topic: ".."`, p + "topic", "cannot be"},
		{"topic with slash", `topic: ferry.orders`, `topic: ferry/orders`, p + "topic", "only ASCII letters, digits, '.', '_' and '-'"},
		{"topic with space", `topic: ferry.orders`, `topic: "ferry orders"`, p + "topic", "only ASCII letters"},
		{"topic non-ASCII", `topic: ferry.orders`, `topic: ferry.bestellungen-ü`, p + "topic", "only ASCII letters"},
		{"topic too long", `topic: ferry.orders`, `topic: ` + strings.Repeat("t", 250), p + "topic", "at most 249 characters, got 250"},
		{"topic a list", `topic: ferry.orders`, `topic: [a]`, p + "topic", "single value"},
		{"bad encoding", `timeout: 3s`, `encoding: pretty`, p + "encoding", "canonical, relaxed"},
		{"negative timeout", `timeout: 3s`, `timeout: -1s`, p + "timeout", "at least 1ms"},
		{"zero timeout", `timeout: 3s`, `timeout: 0s`, p + "timeout", "at least 1ms"},
		{"timeout without unit", `timeout: 3s`, `timeout: 3`, p + "timeout", "must be a duration"},
		{"empty client_id", `timeout: 3s`, `client_id: ""`, p + "client_id", "must not be empty"},
		{"client_id with newline", `timeout: 3s`, `client_id: "a\nb"`, p + "client_id", "control characters"},
		{"mistyped tls", `timeout: 3s`, `tls: maybe`, p + "tls", "true or false"},
		{"unknown key", `timeout: 3s`, `colour: red`, p + "colour", "unknown key (known keys: brokers, client_id, encoding, sasl, timeout, tls, topic)"},
		{"sasl not a mapping", `{mechanism: scram-sha-512, user: ferry, password: "${KAFKA_PASSWORD}"}`, `plain`, p + "sasl", "must be a mapping"},
		{"sasl empty", `{mechanism: scram-sha-512, user: ferry, password: "${KAFKA_PASSWORD}"}`, `{}`, p + "sasl.mechanism", "is required"},
		{"unknown mechanism", `mechanism: scram-sha-512`, `mechanism: gssapi`, p + "sasl.mechanism", "plain, scram-sha-256, scram-sha-512"},
		{"upper-case mechanism", `mechanism: scram-sha-512`, `mechanism: SCRAM-SHA-512`, p + "sasl.mechanism", "plain, scram-sha-256, scram-sha-512"},
		{"missing mechanism", `mechanism: scram-sha-512, `, ``, p + "sasl.mechanism", "is required: one of plain, scram-sha-256, scram-sha-512"},
		{"missing user", `user: ferry, `, ``, p + "sasl.user", "is required"},
		{"missing password", `, password: "${KAFKA_PASSWORD}"`, ``, p + "sasl.password", "is required: the SASL password"},
		{"empty password", `"${KAFKA_PASSWORD}"`, `""`, p + "sasl.password", "is required"},
		{"password unset env", `${KAFKA_PASSWORD}`, `${NO_SUCH_PASSWORD}`, p + "sasl.password", "environment variable NO_SUCH_PASSWORD is not set"},
		{"password a mapping", `"${KAFKA_PASSWORD}"`, `{value: "${KAFKA_PASSWORD}"}`, p + "sasl.password", "single value"},
		{"password a list", `"${KAFKA_PASSWORD}"`, `["${KAFKA_PASSWORD}", x]`, p + "sasl.password", "single value"},
		{"unknown sasl key", `user: ferry,`, `user: ferry, token: x,`, p + "sasl.token", "unknown key"},
		{"transactional", "    sink:", "    delivery: {mode: transactional}\n    sink:", "streams[0].delivery.mode", "the kafka sink cannot"},
		{"kafka not a mapping", "", "      kafka: 3\n", "streams[0].sink.kafka", "must be a mapping, got a number"},
		{"null kafka", "", "      kafka:\n", p + "brokers", "is required"},
		{"empty kafka", "", "      kafka: {}\n", p + "topic", "is required"},
		{"kafka and stdout", "    sink:\n", "    sink:\n      stdout: {}\n", "streams[0].sink", "exactly one sink type, got stdout and kafka"},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := sinkOnly + c.to
			if c.from != "" {
				if !strings.Contains(kafkaSinkConfig, c.from) {
					t.Fatalf("edit %q does not apply", c.from)
				}
				y = strings.Replace(kafkaSinkConfig, c.from, c.to, 1)
			}
			cfg, err := config.Parse([]byte(y), kafkaEnv())
			if err == nil {
				t.Fatalf("no error; parsed %s", cfg.Redacted())
			}
			if strings.Contains(err.Error(), kafkaPassword) {
				t.Errorf("the error shows the SASL password: %v", err)
			}
			checkNoSecrets(t, err.Error())
			found := false
			perPath := map[string][]string{}
			for _, pr := range problems(t, err) {
				found = found || pr.Path == c.path && strings.Contains(pr.Message, c.msg)
				perPath[pr.Path] = append(perPath[pr.Path], pr.Message)
			}
			// A wrong value is reported once, not also as missing.
			for path, msgs := range perPath {
				if len(msgs) > 1 && slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "is required") }) {
					t.Errorf("%s reported as wrong and as missing: %q", path, msgs)
				}
			}
			if !found {
				t.Errorf("want a problem at %q containing %q; got:\n%v", c.path, c.msg, err)
			}
			if !strings.Contains(err.Error(), c.path+": ") {
				t.Errorf("error text does not name the path %q: %v", c.path, err)
			}
		})
	}
}
