package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// Defaults applied by [NewSource] to zero-valued [Options] fields.
const (
	// DefaultClientID is the default Options.ClientID.
	DefaultClientID = "ehmirror"
	// DefaultSessionTimeout is the default Options.SessionTimeout: Kafka's
	// and kfake's minimum group session timeout.
	DefaultSessionTimeout = 6 * time.Second
	// DefaultHeartbeatInterval is the default Options.HeartbeatInterval.
	DefaultHeartbeatInterval = 500 * time.Millisecond
	// DefaultRebalanceTimeout is the default Options.RebalanceTimeout.
	DefaultRebalanceTimeout = 10 * time.Second
	// DefaultIdleGrace is the default Options.IdleGrace.
	DefaultIdleGrace = 5 * time.Second
	// DefaultJoinTimeout is the default Options.JoinTimeout: the default
	// RebalanceTimeout (how long a legitimate rebalance may keep a JoinGroup
	// waiting for the other members) plus a real broker's 3 s
	// group.initial.rebalance.delay.ms and a margin.
	DefaultJoinTimeout = 15 * time.Second
	// DefaultFetchMaxWait is the default Options.FetchMaxWait.
	DefaultFetchMaxWait = 250 * time.Millisecond
	// DefaultFetchIdleMaxWait is the default Options.FetchIdleMaxWait.
	DefaultFetchIdleMaxWait = 2 * time.Second
	// DefaultDialTimeout is the default Options.DialTimeout.
	DefaultDialTimeout = 5 * time.Second
	// DefaultRequestTimeout is the default Options.RequestTimeout.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultFetchMaxBytes is used by Fetch when the caller passes
	// maxBytes <= 0. Larger values made kafka-go slower in the project's
	// measurements (kafka-go-on-kfake.md §4).
	DefaultFetchMaxBytes = 1 << 20
)

// SASL mechanism names accepted in [SASL.Mechanism] (case-insensitive).
const (
	// SASLNone disables SASL.
	SASLNone = ""
	// SASLPlain is SASL/PLAIN; use it only over TLS.
	SASLPlain = "plain"
	// SASLScramSHA256 is SASL/SCRAM-SHA-256.
	SASLScramSHA256 = "scram-sha-256"
	// SASLScramSHA512 is SASL/SCRAM-SHA-512.
	SASLScramSHA512 = "scram-sha-512"
	// SASLOAuthBearer is SASL/OAUTHBEARER; SASL.OAuth supplies the tokens.
	SASLOAuthBearer = "oauthbearer"
)

// SASL holds SASL/PLAIN or SASL/SCRAM credentials, or the token source of
// SASL/OAUTHBEARER. Its String and LogValue methods never reveal the
// password or a token.
type SASL struct {
	// Mechanism is "" (no SASL), "plain", "scram-sha-256",
	// "scram-sha-512", "oauthbearer" or "aws-msk-iam". Matching is case-insensitive, so
	// the Kafka spellings "PLAIN" and "SCRAM-SHA-512" work too.
	Mechanism string
	// Username is the SASL user; required when Mechanism is set.
	Username string
	// Password is the SASL password. It is never logged nor included in
	// errors.
	Password string
	// OAuth configures SASL/OAUTHBEARER; required when Mechanism is
	// "oauthbearer".
	OAuth *OAuthBearer
	// AWS configures AWS_MSK_IAM; required when Mechanism is
	// "aws-msk-iam".
	AWS *AWSMSKIAM
}

// String describes s without its password.
func (s SASL) String() string {
	if s.Mechanism == "" {
		return "SASL{none}"
	}
	if s.OAuth != nil {
		return fmt.Sprintf("SASL{mechanism=%s principal=%s token=<redacted>}", s.Mechanism, s.OAuth.Principal)
	}
	if s.AWS != nil {
		return fmt.Sprintf("SASL{mechanism=%s region=%s principal=%s credentials=<redacted>}", s.Mechanism, s.AWS.Region, s.AWS.Principal)
	}
	return fmt.Sprintf("SASL{mechanism=%s user=%s password=<redacted>}", s.Mechanism, s.Username)
}

// GoString is like String so that %#v does not reveal the password either.
func (s SASL) GoString() string { return s.String() }

// LogValue implements [slog.LogValuer] without the password.
func (s SASL) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", s.Mechanism), slog.String("user", s.Username))
}

// mechanism builds the kafka-go SASL mechanism, nil for none; state
// records what status shows about it.
func (s SASL) mechanism(state *authState) (sasl.Mechanism, error) {
	if s.Mechanism != "" && !strings.EqualFold(s.Mechanism, SASLOAuthBearer) && !strings.EqualFold(s.Mechanism, SASLAWSMSKIAM) {
		state.mechanism = strings.ToUpper(s.Mechanism)
		state.principal = s.Username
	}
	switch strings.ToLower(s.Mechanism) {
	case SASLNone:
		return nil, nil
	case SASLOAuthBearer:
		if s.OAuth == nil {
			return nil, errors.New("kafka: SASL oauthbearer needs SASL.OAuth")
		}
		return newOAuthMechanism(*s.OAuth, state)
	case SASLAWSMSKIAM:
		if s.AWS == nil {
			return nil, errors.New("kafka: SASL aws-msk-iam needs SASL.AWS")
		}
		return newMSKMechanism(*s.AWS, state)
	case SASLPlain:
		if s.Username == "" {
			return nil, errors.New("kafka: SASL plain needs a username")
		}
		return plain.Mechanism{Username: s.Username, Password: s.Password}, nil
	case SASLScramSHA256, SASLScramSHA512:
		if s.Username == "" {
			return nil, fmt.Errorf("kafka: SASL %s needs a username", s.Mechanism)
		}
		algo := scram.SHA256
		if strings.EqualFold(s.Mechanism, SASLScramSHA512) {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, s.Username, s.Password)
		if err != nil {
			// scram only fails on invalid UTF-8 (SASLprep); do not echo
			// the credentials.
			return nil, fmt.Errorf("kafka: SASL %s: invalid username or password encoding", s.Mechanism)
		}
		return m, nil
	default:
		return nil, fmt.Errorf("kafka: unknown SASL mechanism %q (want plain, scram-sha-256, scram-sha-512, oauthbearer or aws-msk-iam)", s.Mechanism)
	}
}

// Options configures a [Source]. Zero values take the documented defaults.
type Options struct {
	// Brokers are the bootstrap "host:port" addresses. Required.
	Brokers []string

	// Group is the consumer group whose offsets the Source reads and
	// commits and which Claim joins. Required.
	Group string

	// ClientID is sent to the brokers with every request.
	// Default: DefaultClientID ("ehmirror").
	ClientID string

	// TLS, when non-nil, is used for every broker connection. nil means
	// plaintext. An empty ServerName is filled in with each broker's host.
	TLS *tls.Config

	// SASL configures authentication; the zero value means none.
	SASL SASL

	// SessionTimeout is how long the group coordinator waits for a
	// heartbeat before it evicts a member; it also bounds how long a
	// restarted broker with persisted group state waits for the old member
	// before a rejoin completes. Brokers only accept values inside their
	// group.min/max.session.timeout.ms (6 s … 30 min by default).
	// Default: DefaultSessionTimeout (6 s).
	SessionTimeout time.Duration

	// HeartbeatInterval is how often a member heartbeats. A member notices
	// a rebalance (another member joining or leaving) only at its next
	// heartbeat, so this bounds how late Claim.Lost fires and how long a
	// joining member waits. Must be below SessionTimeout.
	// Default: DefaultHeartbeatInterval (500 ms).
	HeartbeatInterval time.Duration

	// RebalanceTimeout is how long the coordinator waits for every member
	// to rejoin during a rebalance before it evicts the stragglers.
	// Default: DefaultRebalanceTimeout (10 s).
	RebalanceTimeout time.Duration

	// IdleGrace is how long the process's group membership stays in the
	// group after its last claim was released, so back-to-back drains do
	// not leave and join again. While idle, the member leaves at once when
	// its generation ends (it never takes part in a new one), so a partition
	// stays with a process that does not drain it for at most IdleGrace plus
	// the LeaveGroup round trip (SessionTimeout when the coordinator cannot
	// be reached). A negative value leaves at once.
	// Default: DefaultIdleGrace (5 s).
	IdleGrace time.Duration

	// JoinTimeout bounds how long a Claim waits for a generation (JoinGroup
	// and SyncGroup); a third of the time left before the Claim's context
	// deadline bounds it further. Default: DefaultJoinTimeout (15 s).
	JoinTimeout time.Duration

	// FetchMaxWait bounds a fetch long-poll: how long the broker holds a
	// Fetch when it has no new data. It is also lowered to half of the
	// remaining ctx deadline when that is shorter.
	// Default: DefaultFetchMaxWait (250 ms).
	FetchMaxWait time.Duration

	// FetchIdleMaxWait bounds the long poll of an idle partition. A fetch
	// that returned nothing and got no further (no record arrived during
	// its whole long poll) doubles the partition's next wait, from
	// FetchMaxWait up to FetchIdleMaxWait; a fetch that returns records or
	// gets further sets it back to FetchMaxWait. The broker answers a long
	// poll as soon as a record arrives, so the longer wait delays no record;
	// it spares the broker most of the requests of idle partitions, each of
	// which has a fetch of its own (at 250 ms, 200 idle partitions sent 800
	// requests a second; at 2 s, about 100). At most FetchMaxWait: no
	// doubling. Default: DefaultFetchIdleMaxWait (2 s).
	FetchIdleMaxWait time.Duration

	// DialTimeout bounds establishing one connection, including TLS and
	// SASL handshakes. Default: DefaultDialTimeout (5 s).
	DialTimeout time.Duration

	// RequestTimeout bounds one request round trip (beyond FetchMaxWait
	// for fetches) even when ctx has no deadline, so a broker that accepts
	// a connection but never answers cannot hang a call.
	// Default: DefaultRequestTimeout (10 s).
	RequestTimeout time.Duration

	// Logger receives the adapter's and kafka-go's diagnostics (kafka-go's
	// consumer-group chatter at Debug, its errors at Warn).
	// Default: a logger that discards everything.
	Logger *slog.Logger
}

// String describes the options without the SASL password.
func (o Options) String() string {
	return fmt.Sprintf("kafka.Options{Brokers:%v Group:%q ClientID:%q TLS:%t %v}",
		o.Brokers, o.Group, o.ClientID, o.TLS != nil, o.SASL)
}

// GoString is like String so that %#v does not reveal the password.
func (o Options) GoString() string { return o.String() }

// withDefaults validates o and returns a copy with defaults applied.
func (o Options) withDefaults() (Options, error) {
	if len(o.Brokers) == 0 {
		return o, errors.New("kafka: Options.Brokers is empty")
	}
	o.Brokers = append([]string(nil), o.Brokers...)
	for _, b := range o.Brokers {
		if b == "" {
			return o, errors.New("kafka: Options.Brokers contains an empty address")
		}
		if _, _, err := net.SplitHostPort(b); err != nil {
			return o, fmt.Errorf("kafka: broker address %q: want host:port", b)
		}
	}
	if o.Group == "" {
		return o, errors.New("kafka: Options.Group is empty")
	}
	if o.ClientID == "" {
		o.ClientID = DefaultClientID
	}
	def := func(d *time.Duration, v time.Duration, name string) error {
		if *d < 0 {
			return fmt.Errorf("kafka: Options.%s is negative", name)
		}
		if *d == 0 {
			*d = v
		}
		return nil
	}
	for _, f := range []struct {
		d    *time.Duration
		v    time.Duration
		name string
	}{
		{&o.SessionTimeout, DefaultSessionTimeout, "SessionTimeout"},
		{&o.HeartbeatInterval, DefaultHeartbeatInterval, "HeartbeatInterval"},
		{&o.RebalanceTimeout, DefaultRebalanceTimeout, "RebalanceTimeout"},
		{&o.FetchMaxWait, DefaultFetchMaxWait, "FetchMaxWait"},
		{&o.FetchIdleMaxWait, DefaultFetchIdleMaxWait, "FetchIdleMaxWait"},
		{&o.DialTimeout, DefaultDialTimeout, "DialTimeout"},
		{&o.RequestTimeout, DefaultRequestTimeout, "RequestTimeout"},
		{&o.JoinTimeout, DefaultJoinTimeout, "JoinTimeout"},
	} {
		if err := def(f.d, f.v, f.name); err != nil {
			return o, err
		}
	}
	if o.IdleGrace == 0 {
		o.IdleGrace = DefaultIdleGrace
	}
	if o.HeartbeatInterval >= o.SessionTimeout {
		return o, fmt.Errorf("kafka: Options.HeartbeatInterval (%v) must be below SessionTimeout (%v)", o.HeartbeatInterval, o.SessionTimeout)
	}
	if _, err := o.SASL.mechanism(&authState{}); err != nil {
		return o, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// kafkaLogger adapts l to kafka-go's Logger at the given level.
func kafkaLogger(l *slog.Logger, level slog.Level, attrs ...any) kafkago.Logger {
	return kafkago.LoggerFunc(func(msg string, args ...any) {
		l.Log(context.Background(), level, "kafka-go: "+strings.TrimSpace(fmt.Sprintf(msg, args...)), attrs...)
	})
}
