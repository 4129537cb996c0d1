package lease

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ferry-io/ferry/internal/optcheck"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Store keeps group members and partition leases in two collections of one
// database (DefaultMembersCollection, DefaultLeasesCollection). It is safe
// for concurrent use and holds no resources of its own: closing the
// *mongo.Client it was given is the caller's business.
type Store struct {
	members *mongo.Collection
	leases  *mongo.Collection
	cfg     config
	// instance tells this Store's member registrations from other
	// processes' (Join).
	instance string
	// renewFailures counts failed lease renewals (for metrics).
	renewFailures atomic.Int64
}

// RenewFailures returns how many lease renewals failed so far.
func (s *Store) RenewFailures() int64 { return s.renewFailures.Load() }

// New returns a store in db. It does not contact the server and creates no
// index: every write addresses one document by _id, and List and Members
// read the (small) documents of one group.
func New(db *mongo.Database, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	var p optcheck.Problems
	if db == nil {
		p.Add("db", "nil database: pass the database the leases and members live in")
	}
	optcheck.Apply(&p, opts, func(o Option) { o.apply(&cfg) })
	cfg.validate(&p)
	if err := p.Err(ErrInvalid); err != nil {
		return nil, err
	}
	return &Store{members: db.Collection(cfg.members), leases: db.Collection(cfg.leases), cfg: cfg, instance: randomHex(8)}, nil
}

// MembersCollection returns the collection of group members.
func (s *Store) MembersCollection() *mongo.Collection { return s.members }

// LeasesCollection returns the collection of partition leases.
func (s *Store) LeasesCollection() *mongo.Collection { return s.leases }

func (s *Store) log() *slog.Logger { return s.cfg.logger }

// validName checks a group, owner or member id.
func validName(field, v string) error {
	switch {
	case v == "":
		return invalid("%s: must not be empty", field)
	case !utf8.ValidString(v):
		return invalid("%s %q: not valid UTF-8", field, v)
	case strings.ContainsRune(v, 0):
		return invalid("%s %q: contains NUL", field, v)
	}
	return nil
}

func validKey(group string, partition int) error {
	if err := validName("group", group); err != nil {
		return err
	}
	if partition < 0 {
		return invalid("partition: must not be negative, got %d", partition)
	}
	return nil
}

func validTTL(field string, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return invalid("%s: must be at least 1ms (the server's dates have millisecond precision), got %v", field, ttl)
	}
	return nil
}

// Aggregation-expression helpers. Every value that comes from a caller goes
// through lit ($literal), so an owner named "$x" is a string, not a path.
func lit(v any) bson.D { return bson.D{{Key: "$literal", Value: v}} }
func op(name string, args ...any) bson.D {
	return bson.D{{Key: name, Value: bson.A(args)}}
}

// nowPlus is the server-side expression $$NOW + d (a date).
func nowPlus(d time.Duration) bson.D { return op("$add", "$$NOW", d.Milliseconds()) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(b)
}

func dateOf(d bson.DateTime) time.Time {
	if d == 0 {
		return time.Time{}
	}
	return d.Time().UTC()
}

func wrapf(err error, format string, args ...any) error {
	return fmt.Errorf("lease: %s: %w", fmt.Sprintf(format, args...), err)
}
