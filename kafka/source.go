package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/sasl"

	"github.com/ehmirror/ehmirror/mirror"
)

// ErrClosed is returned (wrapped) by calls on a closed [Source].
var ErrClosed = errors.New("source closed")

// ErrClaimLost is returned (wrapped) by Claim.Commit when the claim's
// generation has ended, locally noticed or reported by the coordinator
// (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS,
// FENCED_INSTANCE_ID).
var ErrClaimLost = errors.New("claim lost")

// metadataTTL is the upper bound of the Transport's metadata cache age. The
// Transport re-reads the metadata of every topic of the cluster at a random
// point within it, so it is long: at 2 s, each Source asked for the whole
// cluster about once a second, a cost that grew with the cluster rather
// than with what is mirrored (issue 48). Topics and the stale-routing retry
// force a refresh when they see a difference anyway (a new topic or
// partition, a moved leader).
const metadataTTL = time.Minute

// Source is a [mirror.Source] backed by segmentio/kafka-go. It owns one
// kafka-go Transport (connection pool) for fetches, offsets and commits, one
// reusable connection for fresh topic listings, and the consumer-group
// memberships created by Claim. A Source is safe for concurrent use; Close it
// when done.
type Source struct {
	opts Options
	mech sasl.Mechanism
	auth *authState
	// sasl, when set, dials authenticated, re-authenticating connections
	// (OAUTHBEARER, AWS_MSK_IAM); kafka-go then does no TLS nor SASL.
	sasl      *saslDialer
	log       *slog.Logger
	addr      net.Addr
	transport *kafkago.Transport
	// router sends the client's commits and committed-offset reads
	// straight to the group's coordinator (coordinator.go).
	router *coordinatorRouter
	client *kafkago.Client
	// metadataVersion is the Metadata version topicMetadataRequest
	// negotiated (0 = not yet).
	metadataVersion atomic.Int32

	ctx    context.Context // background work; cancelled last in Close
	cancel context.CancelFunc
	// commits is the context of commit requests running in the background;
	// Close cancels it before waiting for them.
	commits     context.Context
	stopCommits context.CancelFunc
	wg          sync.WaitGroup

	refreshMu   sync.Mutex
	lastRefresh time.Time

	// idleWaits holds, for each partition whose last fetch found nothing
	// new, the long-poll wait of its next fetch (Options.FetchIdleMaxWait).
	idleMu    sync.Mutex
	idleWaits map[mirror.TopicPartition]time.Duration

	// batchRecords holds *[]protocol.Record buffers, empty and cleared,
	// that fetches read their batches' records into (decodeRecords),
	// instead of growing a buffer of 88 B per record for every fetch.
	batchRecords sync.Pool

	mu      sync.Mutex
	closed  bool
	members map[*membership]struct{}
	// unleft holds member IDs whose LeaveGroup failed (broker down). The
	// coordinator may still know them (a broker restarted with its group
	// state), and would make the next join wait for their session to
	// expire; Claim retries their LeaveGroup first.
	unleft []string
}

var _ mirror.Source = (*Source)(nil)

// NewSource validates opts, applies defaults and returns a Source. It does no
// network I/O; connection problems surface on the first call.
func NewSource(opts Options) (*Source, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	auth := &authState{}
	mech, err := o.SASL.mechanism(auth)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	nd := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	t := &kafkago.Transport{
		Dial:        nd.DialContext,
		DialTimeout: o.DialTimeout,
		IdleTimeout: 60 * time.Second,
		MetadataTTL: metadataTTL,
		ClientID:    o.ClientID,
		TLS:         o.TLS,
		SASL:        mech,
		Context:     ctx,
	}
	var sd *saslDialer
	if reauthenticates(mech) {
		// TLS and SASL are done by the dialer, which re-authenticates
		// (see reauth.go); kafka-go gets authenticated connections.
		sd = &saslDialer{dial: nd.DialContext, tls: o.TLS, mech: mech, clientID: o.ClientID, timeout: o.DialTimeout, ctx: ctx, log: o.Logger.With("component", "kafka")}
		t.Dial, t.TLS, t.SASL = sd.DialContext, nil, nil
	}
	addr := kafkago.TCP(o.Brokers...)
	router := newCoordinatorRouter(t, o.ClientID)
	s := &Source{
		opts:      o,
		mech:      mech,
		auth:      auth,
		sasl:      sd,
		log:       o.Logger.With("component", "kafka", "group", o.Group),
		addr:      addr,
		transport: t,
		router:    router,
		client:    &kafkago.Client{Addr: addr, Transport: router},
		ctx:       ctx,
		cancel:    cancel,
		members:   make(map[*membership]struct{}),
		idleWaits: make(map[mirror.TopicPartition]time.Duration),
	}
	s.commits, s.stopCommits = context.WithCancel(ctx)
	return s, nil
}

// Close leaves every group membership still held (LeaveGroup), closes all
// connections and stops background goroutines. It is idempotent. Calls made
// after Close fail with ErrClosed.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ms := make([]*membership, 0, len(s.members))
	for m := range s.members {
		ms = append(ms, m)
	}
	s.mu.Unlock()

	s.stopCommits()
	var errs []error
	for _, m := range ms {
		m.gate() // abort a join in progress too
		m.shutdown()
	}
	for _, m := range ms {
		<-m.done
		if m.closeErr != nil {
			errs = append(errs, m.closeErr)
		}
	}
	s.wg.Wait()

	s.transport.CloseIdleConnections()
	s.cancel()
	return errors.Join(errs...)
}

func (s *Source) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Topics lists every topic of the cluster, internal ones (names starting with
// "__") included, sorted by name, each with its topic id (KIP-516; "" on
// brokers older than Kafka 2.8). The listing comes from a Metadata request
// sent now (see topicMetadataRequest), never from a cache, so topics created
// or deleted moments ago are reflected. When the listing disagrees with the
// Transport's routing cache (a new topic, a changed partition count or
// leader), that cache is refreshed too, so Fetch and Watermarks on a new
// topic work right away.
func (s *Source) Topics(ctx context.Context) ([]mirror.Topic, error) {
	return s.listTopics(ctx, nil)
}

// DescribeTopics is Topics for the named topics only: those that do not
// exist (or are being deleted) are left out. Its Metadata requests ask
// about these topics alone, so what they cost does not grow with the
// cluster (mirror.TopicDescriber).
func (s *Source) DescribeTopics(ctx context.Context, names []string) ([]mirror.Topic, error) {
	if len(names) == 0 {
		return nil, nil
	}
	return s.listTopics(ctx, names)
}

// listTopics is Topics for names (nil: every topic).
func (s *Source) listTopics(ctx context.Context, names []string) ([]mirror.Topic, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("kafka: list topics: %w", ErrClosed)
	}
	md, err := s.topicMetadata(ctx, names...)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("kafka: list topics: %w", explainTLSAlert(s.diagnose(ctx, err)))
	}
	type tpKey struct {
		topic string
		id    int
	}
	counts := make(map[string]int)
	leaders := make(map[tpKey]int)
	out := make([]mirror.Topic, 0, len(md.topics))
	for _, t := range md.topics {
		if t.err != 0 {
			continue // being deleted or not yet ready
		}
		counts[t.name] = len(t.partitions)
		for _, p := range t.partitions {
			leaders[tpKey{t.name, int(p.id)}] = int(p.leader)
		}
		out = append(out, mirror.Topic{Name: t.name, Partitions: len(t.partitions), ID: t.id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })

	// Bring the Transport's routing cache in line with what we just saw.
	cached, err := s.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: names})
	stale := err != nil
	if err == nil {
		seen := make(map[string]int, len(cached.Topics))
		for _, t := range cached.Topics {
			if t.Error != nil {
				continue
			}
			seen[t.Name] = len(t.Partitions)
			for _, p := range t.Partitions {
				if l, ok := leaders[tpKey{t.Name, p.ID}]; ok && l != p.Leader.ID {
					stale = true
				}
			}
		}
		for name, n := range counts {
			if seen[name] != n {
				stale = true
			}
		}
	}
	if stale {
		s.log.Debug("refreshing transport metadata after topic listing")
		s.refreshMetadata(time.Now())
	}
	return out, nil
}

// diagnose explains a request that failed with a bare end of stream:
// kafka-go's Transport reports a broker's refusal during its connection
// set-up (a failed SASL authentication, a TLS handshake the broker ended) as
// "unexpected EOF". It dials a bootstrap broker with the same TLS and SASL
// settings and, when that handshake fails, adds its error, which names the
// cause. Other errors are returned as they are.
func (s *Source) diagnose(ctx context.Context, err error) error {
	if ctx.Err() != nil || !(errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) {
		return err
	}
	d := &kafkago.Dialer{ClientID: s.opts.ClientID, Timeout: s.opts.DialTimeout, TLS: s.opts.TLS, SASLMechanism: s.mech}
	if s.sasl != nil {
		d = &kafkago.Dialer{ClientID: s.opts.ClientID, Timeout: s.opts.DialTimeout, DialFunc: s.sasl.DialContext}
	}
	var first error
	for _, b := range s.opts.Brokers {
		c, derr := d.DialContext(ctx, "tcp", b)
		if derr == nil {
			_ = c.Close()
			return err // the broker accepts this client: the cause is elsewhere
		}
		if first == nil {
			first = fmt.Errorf("connecting to %s: %w", b, derr)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("%w (%w)", err, first)
}

// explainTLSAlert adds what a broker's TLS alert about the client's
// certificate means; other errors are returned as they are. (crypto/tls
// reports a peer's alert as a *net.OpError "remote error" around an
// unexported alert type, so the alert is recognised by its text.)
func explainTLSAlert(err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return err
	}
	switch op.Err.Error() {
	case "tls: bad certificate", "tls: unsupported certificate", "tls: revoked certificate", "tls: expired certificate",
		"tls: unknown certificate", "tls: unknown certificate authority", "tls: access denied", "tls: certificate required":
		return fmt.Errorf("%w (the broker refused this client's TLS certificate: none was sent, or it is expired or not signed by a CA the broker trusts)", err)
	}
	return err
}

// refreshMetadata drops the Transport's connection pools so that the next
// request starts from a fresh Metadata response (kafka-go offers no other way
// to invalidate its cache). In-flight requests finish on the old pool. A
// refresh is skipped when another one happened after since (the moment the
// caller's failed request started): the pool is fresher than that request.
func (s *Source) refreshMetadata(since time.Time) {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if s.lastRefresh.After(since) {
		return
	}
	s.lastRefresh = time.Now()
	s.transport.CloseIdleConnections()
}

// staleRouting reports whether err says the Transport routed a request with
// outdated metadata (unknown topic or partition, moved leader).
func staleRouting(err error) bool {
	for _, target := range []error{
		protocol.ErrNoTopic, protocol.ErrNoPartition, protocol.ErrNoLeader,
		kafkago.UnknownTopicOrPartition, kafkago.NotLeaderForPartition,
		kafkago.LeaderNotAvailable, kafkago.FencedLeaderEpoch, kafkago.UnknownLeaderEpoch,
		kafkago.NotCoordinatorForGroup, kafkago.GroupCoordinatorNotAvailable,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// withRetry runs call and, when it fails because of stale routing
// metadata, refreshes the Transport's metadata and runs it once more.
// partitionError returns the first error a response carries for one of its
// partitions, named by topic and partition; of reads a partition's number
// and error.
func partitionError[P any](topics map[string][]P, of func(P) (int, error)) error {
	for topic, ps := range topics {
		for _, p := range ps {
			if n, err := of(p); err != nil {
				return fmt.Errorf("%s/%d: %w", topic, n, err)
			}
		}
	}
	return nil
}

func (s *Source) withRetry(ctx context.Context, call func(context.Context) error) error {
	start := time.Now()
	err := call(ctx)
	if err != nil && staleRouting(err) && ctx.Err() == nil {
		s.log.Debug("retrying after stale metadata", "err", err)
		s.refreshMetadata(start)
		err = call(ctx)
	}
	return err
}

// requestCtx bounds one round trip by RequestTimeout (plus extra).
func (s *Source) requestCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.RequestTimeout+extra)
}

// Watermarks returns, for each partition, the log start offset and the last
// stable offset (ListOffsets earliest and latest under read_committed
// isolation, which Kafka answers with the LSO: the end below which no
// transaction is still open; without transactions it equals the high
// watermark).
func (s *Source) Watermarks(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]mirror.Watermarks, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("kafka: watermarks: %w", ErrClosed)
	}
	out := make(map[mirror.TopicPartition]mirror.Watermarks, len(tps))
	if len(tps) == 0 {
		return out, nil
	}
	offs, err := s.listOffsets(ctx, tps, earliestTimestamp, latestTimestamp)
	if err != nil {
		return nil, fmt.Errorf("kafka: watermarks of %d partitions: %w", len(tps), err)
	}
	for _, tp := range tps {
		out[tp] = mirror.Watermarks{Start: offs[earliestTimestamp][tp], End: offs[latestTimestamp][tp]}
	}
	return out, nil
}

// Committed returns the group's committed offsets (OffsetFetch), NoOffset
// where the group has committed nothing.
func (s *Source) Committed(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]int64, error) {
	out, _, err := s.committed(ctx, tps)
	return out, err
}

// committed returns the committed offsets and the metadata stored with them.
func (s *Source) committed(ctx context.Context, tps []mirror.TopicPartition) (map[mirror.TopicPartition]int64, map[mirror.TopicPartition]string, error) {
	return s.committedOf(ctx, s.opts.Group, tps)
}

// retryLeaves sends LeaveGroup for members whose leave failed earlier,
// best effort; a member still failing stays listed.
func (s *Source) retryLeaves(ctx context.Context) {
	s.mu.Lock()
	ids := s.unleft
	s.unleft = nil
	s.mu.Unlock()
	var still []string
	for _, id := range ids {
		rctx, cancel := s.requestCtx(ctx, 0)
		err := s.leaveGroup(rctx, id)
		cancel()
		if err != nil {
			still = append(still, id)
			continue
		}
		s.log.Debug("left group on behalf of an earlier member", "member", id)
	}
	if len(still) > 0 {
		s.mu.Lock()
		s.unleft = append(s.unleft, still...)
		s.mu.Unlock()
	}
}

// leaveGroup sends LeaveGroup for memberID; an already-unknown member counts
// as left.
func (s *Source) leaveGroup(ctx context.Context, memberID string) error {
	res, err := s.client.LeaveGroup(ctx, &kafkago.LeaveGroupRequest{
		GroupID: s.opts.Group,
		Members: []kafkago.LeaveGroupRequestMember{{ID: memberID}},
	})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err == nil {
		for _, m := range res.Members {
			if m.Error != nil {
				err = m.Error
			}
		}
	}
	if err != nil && !errors.Is(err, kafkago.UnknownMemberId) {
		return fmt.Errorf("kafka: leave group %q as %s: %w", s.opts.Group, memberID, err)
	}
	return nil
}

// Auth describes the Source's SASL authentication for status: mechanism,
// principal, the newest token's expiry and the newest failure to obtain
// one. It never holds a token or secret.
func (s *Source) Auth() AuthStatus { return s.auth.status() }

// Brokers returns the bootstrap brokers (KAFKA_BROKERS).
func (s *Source) Brokers() []string { return slices.Clone(s.opts.Brokers) }
