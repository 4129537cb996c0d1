package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"google.golang.org/api/option"

	"github.com/ferry-io/ferry"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/kafka"
	"github.com/ferry-io/ferry/sink/mongoproj"
	"github.com/ferry-io/ferry/sink/natsjs"
	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/stdout"
	"github.com/ferry-io/ferry/sink/webhook"
)

// NewSink returns the stream's sink, unconnected: the sink section mapped
// onto the sink package's constructor and options. stdoutW is where the
// stdout sink writes. state is the state store's database: the mongodb
// sink writes its projection in that cluster (with its client, the
// group's StateDatabase's, so that transactional effects share its
// transaction); the other sinks do not use it, and it may be nil for
// them. For a Stream produced by Parse the error is a
// connection-independent refusal by the sink package itself, which
// Parse's checks rule out.
func (s *Stream) NewSink(stdoutW io.Writer, state *mongo.Database) (sink.Sink, error) {
	switch sk := s.Sink; {
	case sk.MongoDB != nil:
		if state == nil {
			return nil, errors.New("the mongodb sink needs a MongoDB state store (state.uri)")
		}
		return mongoproj.New(state.Client().Database(sk.MongoDB.Database).Collection(sk.MongoDB.Collection))
	case sk.Webhook != nil:
		w := sk.Webhook
		// An idle connection for every lane that may post at once: every
		// partition on this member, each with ferry's default lanes.
		idle := max(webhook.DefaultMaxIdleConns, s.Group.Partitions*ferry.DefaultConcurrency)
		opts := []webhook.Option{webhook.Secret(w.Secret.Reveal()), webhook.Timeout(w.Timeout), webhook.MaxIdleConns(idle), webhook.Stream(s.Name)}
		if w.Encoding == encodingCanonical {
			opts = append(opts, webhook.Canonical())
		}
		for k, v := range w.Headers {
			opts = append(opts, webhook.Header(k, v))
		}
		return webhook.New(w.URL, opts...)
	case sk.NATS != nil:
		n := sk.NATS
		opts := []natsjs.Option{natsjs.Subject(n.Subject), natsjs.Timeout(n.Timeout)}
		if n.Encoding == encodingCanonical {
			opts = append(opts, natsjs.Canonical())
		}
		return natsjs.New(n.URL, opts...)
	case sk.Kafka != nil:
		k := sk.Kafka
		copts := []kgo.Opt{kgo.ClientID(k.ClientID)}
		if k.TLS {
			copts = append(copts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
		}
		if k.SASL != nil {
			m, err := k.SASL.SASL()
			if err != nil {
				return nil, err
			}
			copts = append(copts, kgo.SASL(m))
		}
		opts := []kafka.Option{kafka.Topic(k.Topic), kafka.Timeout(k.Timeout), kafka.ClientOptions(copts...)}
		if k.Encoding == encodingCanonical {
			opts = append(opts, kafka.Canonical())
		}
		return kafka.New(k.Brokers, opts...)
	case sk.PubSub != nil:
		ps := sk.PubSub
		opts := []pubsub.Option{pubsub.Timeout(ps.Timeout), pubsub.Stream(s.Name)}
		if ps.Emulator != "" {
			opts = append(opts, pubsub.Emulator(ps.Emulator))
		}
		if ps.Endpoint != "" {
			opts = append(opts, pubsub.ClientOptions(option.WithEndpoint(ps.Endpoint)))
		}
		if ps.Encoding == encodingCanonical {
			opts = append(opts, pubsub.Canonical())
		}
		return pubsub.New(ps.Project, ps.Topic, opts...)
	case sk.Stdout != nil:
		opts := []stdout.Option{stdout.Writer(stdoutW)}
		if sk.Stdout.Encoding == encodingCanonical {
			opts = append(opts, stdout.Canonical())
		}
		return stdout.New(opts...)
	}
	return nil, fmt.Errorf("stream %s has no sink (choose one of %v)", quote(s.Name), SinkTypes)
}

// SASL returns the SASL mechanism of the kafka sink's configuration, for
// kgo.SASL. The error names an unknown mechanism (Parse accepts only
// KafkaSASLPlain, KafkaSASLScramSHA256 and KafkaSASLScramSHA512).
func (c *KafkaSASL) SASL() (sasl.Mechanism, error) {
	switch c.Mechanism {
	case KafkaSASLPlain:
		return plain.Auth{User: c.User, Pass: c.Password.Reveal()}.AsMechanism(), nil
	case KafkaSASLScramSHA256:
		return scram.Auth{User: c.User, Pass: c.Password.Reveal()}.AsSha256Mechanism(), nil
	case KafkaSASLScramSHA512:
		return scram.Auth{User: c.User, Pass: c.Password.Reveal()}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: unknown SASL mechanism %s (use %s, %s or %s)",
		quote(c.Mechanism), KafkaSASLPlain, KafkaSASLScramSHA256, KafkaSASLScramSHA512)
}
