package emulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// Server is a running Event Hubs emulator: an AMQP 1.0 server that the
// azeventhubs SDK talks to over TCP.
type Server struct {
	cfg         Config
	log         *slog.Logger
	ln          net.Listener
	tlsLn       net.Listener // amqps, or nil
	wsLn        net.Listener // AMQP over WebSockets, or nil
	httpSrv     *http.Server // serves wsLn
	containerID string
	faults      *Faults
	entraKeys   entraKeys
	stats       counters
	throttle    *throttle // nil without a quota

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	hubs   map[string]*hub // by lower-case name
	conns  map[*conn]struct{}
	links  map[*link]struct{} // producer and consumer links, for faults
	closed bool
	connID uint64
}

// counters are the server-wide statistics.
type counters struct {
	connectionsAccepted atomic.Int64
	connectionsOpen     atomic.Int64
	eventsStored        atomic.Int64
	bytesStored         atomic.Int64
	rejectedSends       atomic.Int64
	eventsDelivered     atomic.Int64
	throttledRequests   atomic.Int64
}

// Start validates cfg, listens on cfg.Listen and serves connections until
// ctx is done or Close is called. It returns once the listener accepts
// connections.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.KeyName == "" {
		cfg.KeyName = DefaultKeyName
	}
	if cfg.Key == "" {
		cfg.Key = DefaultKey
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.heartbeat <= 0 {
		cfg.heartbeat = heartbeatInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := validatePolicies(cfg.Policies); err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	keys, err := parseEntraID(cfg.EntraID)
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	if err := cfg.Quota.validate(); err != nil {
		return nil, fmt.Errorf("emulator: Quota.%w", err)
	}
	srv := &Server{
		entraKeys:   keys,
		cfg:         cfg,
		log:         cfg.Logger,
		containerID: "ehmirror-emulator",
		hubs:        map[string]*hub{},
		conns:       map[*conn]struct{}{},
		links:       map[*link]struct{}{},
	}
	srv.faults = newFaults(srv)
	if cfg.Quota.Enabled() {
		srv.throttle = newThrottle(cfg.Quota, time.Now)
		srv.log.Info("ingress quota", "quota", cfg.Quota.String())
	}
	for i, h := range cfg.Hubs {
		if err := srv.AddHub(h); err != nil {
			srv.closeLogs()
			return nil, fmt.Errorf("emulator: Hubs[%d]: %w", i, err)
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		srv.closeLogs()
		return nil, fmt.Errorf("emulator: listen: %w", err)
	}
	srv.ln = ln
	if err := srv.listenTransports(); err != nil {
		ln.Close()
		srv.closeLogs()
		return nil, fmt.Errorf("emulator: %w", err)
	}
	srv.ctx, srv.cancel = context.WithCancel(ctx)
	srv.wg.Add(1)
	go srv.accept(ln, nil)
	srv.startTransports()
	go func() {
		<-srv.ctx.Done()
		srv.Close()
	}()
	srv.log.Info("event hubs emulator listening", "addr", srv.Addr(), "tls", srv.TLSAddr(), "websocket", srv.WebSocketAddr(), "hubs", len(cfg.Hubs))
	return srv, nil
}

func (srv *Server) now() time.Time { return srv.cfg.Now() }

// accept serves the connections of ln; wrap, if not nil, wraps each one
// (TLS).
func (srv *Server) accept(ln net.Listener, wrap func(net.Conn) net.Conn) {
	defer srv.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			srv.log.Warn("accept", "err", err)
			select {
			case <-srv.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		if wrap != nil {
			nc = wrap(nc)
		}
		srv.wg.Add(1)
		go func() {
			defer srv.wg.Done()
			srv.serveConn(nc)
		}()
	}
}

// serveConn serves one client connection until it ends.
func (srv *Server) serveConn(nc net.Conn) {
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		nc.Close()
		return
	}
	srv.connID++
	c := newConn(srv, nc, srv.connID)
	srv.conns[c] = struct{}{}
	srv.mu.Unlock()
	srv.stats.connectionsAccepted.Add(1)
	srv.stats.connectionsOpen.Add(1)
	c.serve(srv.ctx)
}

func (srv *Server) removeConn(c *conn) {
	srv.mu.Lock()
	if _, ok := srv.conns[c]; ok {
		delete(srv.conns, c)
		srv.stats.connectionsOpen.Add(-1)
	}
	srv.mu.Unlock()
}

// Addr returns the address the server listens on, host:port.
func (srv *Server) Addr() string { return srv.ln.Addr().String() }

// ConnectionString returns a connection string for the SDK with the
// configured key name and key:
// Endpoint=sb://HOST:PORT;SharedAccessKeyName=NAME;SharedAccessKey=KEY;UseDevelopmentEmulator=true.
// An unspecified listen host (0.0.0.0, ::) is given as 127.0.0.1.
func (srv *Server) ConnectionString() string {
	host, port, _ := net.SplitHostPort(srv.Addr())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true",
		net.JoinHostPort(host, port), srv.cfg.KeyName, srv.cfg.Key)
}

// Close stops the listener, closes every connection and waits for their
// goroutines. It is safe to call more than once.
func (srv *Server) Close() error {
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		srv.wg.Wait()
		return nil
	}
	srv.closed = true
	conns := make([]*conn, 0, len(srv.conns))
	for c := range srv.conns {
		conns = append(conns, c)
	}
	srv.mu.Unlock()
	srv.cancel()
	err := srv.ln.Close()
	if srv.tlsLn != nil {
		srv.tlsLn.Close()
	}
	if srv.httpSrv != nil {
		srv.httpSrv.Close()
	}
	for _, c := range conns {
		c.abort()
	}
	srv.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("emulator: close listener: %w", err)
	}
	if err := srv.closeLogs(); err != nil {
		return fmt.Errorf("emulator: close the data directory's logs: %w", err)
	}
	return nil
}

// AddHub creates an event hub; it fails if the configuration is invalid or a
// hub with the same name (case-insensitive) exists.
func (srv *Server) AddHub(h HubConfig) error {
	if err := h.validate(); err != nil {
		return fmt.Errorf("event hub %q: %w", h.Name, err)
	}
	h = h.withDefaults()
	key := strings.ToLower(h.Name)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if _, dup := srv.hubs[key]; dup {
		return fmt.Errorf("event hub %q already exists", h.Name)
	}
	nh := newHub(h, srv.now())
	if srv.cfg.DataDir != "" {
		for _, p := range nh.partitions {
			if err := p.openLog(logPath(srv.cfg.DataDir, h.Name, p.id), srv.now().UnixMilli()); err != nil {
				for _, q := range nh.partitions[:p.id] {
					q.log.close()
				}
				return fmt.Errorf("event hub %q: %w", h.Name, err)
			}
		}
	}
	srv.hubs[key] = nh
	return nil
}

func (srv *Server) hub(name string) *hub {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.hubs[strings.ToLower(name)]
}

func (srv *Server) registerLink(l *link) {
	srv.mu.Lock()
	srv.links[l] = struct{}{}
	srv.mu.Unlock()
}

func (srv *Server) unregisterLink(l *link) {
	srv.mu.Lock()
	delete(srv.links, l)
	srv.mu.Unlock()
}

func (srv *Server) linksOfKind(k linkKind) []*link {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	var out []*link
	for l := range srv.links {
		if l.kind == k {
			out = append(out, l)
		}
	}
	return out
}

func (srv *Server) allConns() []*conn {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	out := make([]*conn, 0, len(srv.conns))
	for c := range srv.conns {
		out = append(out, c)
	}
	return out
}

// StoredEvent is an event as the emulator stored it, decoded for tests.
type StoredEvent struct {
	Partition      int
	SequenceNumber int64
	// Offset is the event's x-opt-offset: its byte position in the partition.
	Offset       string
	EnqueuedTime time.Time
	// PartitionKey is the key the event was sent with, or "".
	PartitionKey string
	// Message is the encoded AMQP message exactly as the producer sent it
	// (a copy).
	Message []byte
	// Body is the data of the message's only data section, or nil.
	Body []byte
	// Properties are the application properties (string keys).
	Properties    map[string]any
	MessageID     any
	CorrelationID any
	ContentType   string
}

// Events returns the retained events of a partition in sequence order, or
// nil if the hub or partition does not exist.
func (srv *Server) Events(hubName string, partition int) []StoredEvent {
	h := srv.hub(hubName)
	if h == nil || partition < 0 || partition >= len(h.partitions) {
		return nil
	}
	recs := h.partitions[partition].snapshot(srv.now())
	out := make([]StoredEvent, 0, len(recs))
	for _, r := range recs {
		ev := StoredEvent{
			Partition:      partition,
			SequenceNumber: r.seq,
			Offset:         strconv.FormatInt(r.offset, 10),
			EnqueuedTime:   amqp.Timestamp(r.enqueued),
			PartitionKey:   r.key,
			Message:        append([]byte(nil), r.msg...),
		}
		var m amqp.Message
		if err := m.Unmarshal(ev.Message); err == nil {
			if len(m.Data) == 1 {
				ev.Body = m.Data[0]
			}
			if m.ApplicationProperties != nil {
				ev.Properties = map[string]any{}
				for _, e := range m.ApplicationProperties {
					if k, ok := e.Key.(string); ok {
						ev.Properties[k] = e.Value
					}
				}
			}
			if p := m.Properties; p != nil {
				ev.MessageID, ev.CorrelationID, ev.ContentType = p.MessageID, p.CorrelationID, string(p.ContentType)
			}
		}
		out = append(out, ev)
	}
	return out
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	ConnectionsAccepted int64 // TCP connections accepted since Start
	ConnectionsOpen     int64 // connections currently open
	EventsStored        int64 // events stored since Start, all hubs
	BytesStored         int64 // bytes of accepted producer deliveries
	RejectedSends       int64 // producer deliveries rejected (faults, size, malformed, quota)
	EventsDelivered     int64 // events sent to consumers
	Hubs                map[string]HubStats
	// ThrottledRequests counts producer deliveries rejected with
	// server-busy because the namespace's [Quota] was exhausted, like the
	// service's ThrottledRequests metric.
	ThrottledRequests int64
}

// HubStats are the statistics of one hub.
type HubStats struct {
	Partitions []PartitionStats // indexed by partition id
}

// PartitionStats are the statistics of one partition.
type PartitionStats struct {
	EventsStored   int64 // events stored since the hub was created
	BytesStored    int64 // bytes of the stored events' messages
	EventsRetained int   // events still retained
	BytesRetained  int64
	BeginSequence  int64 // sequence number of the oldest retained event
	LastSequence   int64 // sequence number of the newest event, -1 if none
}

// Stats returns a snapshot of the counters.
func (srv *Server) Stats() Stats {
	st := Stats{
		ConnectionsAccepted: srv.stats.connectionsAccepted.Load(),
		ConnectionsOpen:     srv.stats.connectionsOpen.Load(),
		EventsStored:        srv.stats.eventsStored.Load(),
		BytesStored:         srv.stats.bytesStored.Load(),
		RejectedSends:       srv.stats.rejectedSends.Load(),
		EventsDelivered:     srv.stats.eventsDelivered.Load(),
		ThrottledRequests:   srv.stats.throttledRequests.Load(),
		Hubs:                map[string]HubStats{},
	}
	srv.mu.Lock()
	hubs := make([]*hub, 0, len(srv.hubs))
	for _, h := range srv.hubs {
		hubs = append(hubs, h)
	}
	srv.mu.Unlock()
	now := srv.now()
	for _, h := range hubs {
		hs := HubStats{}
		for _, p := range h.partitions {
			info := p.info(now)
			hs.Partitions = append(hs.Partitions, PartitionStats{
				EventsStored:   info.storedEvents,
				BytesStored:    info.storedBytes,
				EventsRetained: info.retainedEvents,
				BytesRetained:  info.retainedBytes,
				BeginSequence:  info.beginSeq,
				LastSequence:   info.lastSeq,
			})
		}
		st.Hubs[h.cfg.Name] = hs
	}
	return st
}
