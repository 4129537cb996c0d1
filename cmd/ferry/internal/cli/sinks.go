package cli

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

	"github.com/ferry-io/ferry/cmd/ferry/config"
	"github.com/ferry-io/ferry/sink"
	"github.com/ferry-io/ferry/sink/kafka"
	"github.com/ferry-io/ferry/sink/mongoproj"
	"github.com/ferry-io/ferry/sink/natsjs"
	"github.com/ferry-io/ferry/sink/pubsub"
	"github.com/ferry-io/ferry/sink/stdout"
	"github.com/ferry-io/ferry/sink/webhook"
)

func buildSink(st *config.Stream, stdoutW io.Writer, state *mongo.Database) (sink.Sink, error) {
	switch {
	case st.Sink.MongoDB != nil:
		if state == nil {
			return nil, errors.New("the mongodb sink needs a MongoDB state store")
		}
		// The projection lives in the state store's cluster; with the same
		// client as the group, transactional effects share its transaction.
		return mongoproj.New(state.Client().Database(st.Sink.MongoDB.Database).Collection(st.Sink.MongoDB.Collection))
	case st.Sink.Webhook != nil:
		w := st.Sink.Webhook
		opts := []webhook.Option{webhook.Secret(w.Secret.Reveal()), webhook.Timeout(w.Timeout)}
		if w.Encoding == "canonical" {
			opts = append(opts, webhook.Canonical())
		}
		for k, v := range w.Headers {
			opts = append(opts, webhook.Header(k, v))
		}
		return webhook.New(w.URL, opts...)
	case st.Sink.NATS != nil:
		n := st.Sink.NATS
		opts := []natsjs.Option{natsjs.Subject(n.Subject), natsjs.Timeout(n.Timeout)}
		if n.Encoding == "canonical" {
			opts = append(opts, natsjs.Canonical())
		}
		return natsjs.New(n.URL, opts...)
	case st.Sink.Kafka != nil:
		k := st.Sink.Kafka
		copts := []kgo.Opt{kgo.ClientID(k.ClientID)}
		if k.TLS {
			copts = append(copts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
		}
		if k.SASL != nil {
			m, err := kafkaSASL(k.SASL)
			if err != nil {
				return nil, err
			}
			copts = append(copts, kgo.SASL(m))
		}
		opts := []kafka.Option{kafka.Topic(k.Topic), kafka.Timeout(k.Timeout), kafka.ClientOptions(copts...)}
		if k.Encoding == "canonical" {
			opts = append(opts, kafka.Canonical())
		}
		return kafka.New(k.Brokers, opts...)
	case st.Sink.PubSub != nil:
		ps := st.Sink.PubSub
		opts := []pubsub.Option{pubsub.Timeout(ps.Timeout)}
		if ps.Emulator != "" {
			opts = append(opts, pubsub.Emulator(ps.Emulator))
		}
		if ps.Endpoint != "" {
			opts = append(opts, pubsub.ClientOptions(option.WithEndpoint(ps.Endpoint)))
		}
		if ps.Encoding == "canonical" {
			opts = append(opts, pubsub.Canonical())
		}
		return pubsub.New(ps.Project, ps.Topic, opts...)
	case st.Sink.Stdout != nil:
		opts := []stdout.Option{stdout.Writer(stdoutW)}
		if st.Sink.Stdout.Encoding == "canonical" {
			opts = append(opts, stdout.Canonical())
		}
		return stdout.New(opts...)
	}
	return nil, errors.New("no sink configured")
}

// kafkaSASL returns the SASL mechanism of the kafka sink's configuration.
func kafkaSASL(c *config.KafkaSASL) (sasl.Mechanism, error) {
	switch c.Mechanism {
	case config.KafkaSASLPlain:
		return plain.Auth{User: c.User, Pass: c.Password.Reveal()}.AsMechanism(), nil
	case config.KafkaSASLScramSHA256:
		return scram.Auth{User: c.User, Pass: c.Password.Reveal()}.AsSha256Mechanism(), nil
	case config.KafkaSASLScramSHA512:
		return scram.Auth{User: c.User, Pass: c.Password.Reveal()}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: unknown SASL mechanism %q", c.Mechanism)
}
