package bench

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a loopback TCP proxy that delays every byte by a configurable
// one-way delay in each direction, like a long network path: the delay is
// added to each chunk's delivery time, chunks are pipelined, so throughput
// is not capped (a bandwidth-delay product of queued data is in flight).
//
// With a TLS config it also terminates TLS: clients speak TLS to the proxy,
// the proxy speaks plain TCP to the target.
type Proxy struct {
	ln     net.Listener
	target string
	// delay is the one-way delay in nanoseconds, applied to data read from
	// then on (SetDelay takes effect for new chunks).
	delay atomic.Int64

	// kafka makes the proxy count Kafka requests (size-prefixed frames
	// from the client); accepted, open and requests are what it counted.
	kafka    atomic.Bool
	accepted atomic.Int64
	open     atomic.Int64
	requests atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ProxyStats are what a proxy counted since it started.
type ProxyStats struct {
	// Accepted and Open are the client connections accepted in all and
	// open now.
	Accepted, Open int64
	// Requests are the Kafka requests the clients sent (0 unless
	// CountKafkaRequests was called before they connected).
	Requests int64
}

// Stats returns what the proxy counted so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Accepted: p.accepted.Load(), Open: p.open.Load(), Requests: p.requests.Load()}
}

// CountKafkaRequests makes the proxy count the Kafka requests of the
// connections it accepts from then on: every request is a frame of a
// 4-byte big-endian size and that many bytes (the Kafka protocol's framing).
func (p *Proxy) CountKafkaRequests() { p.kafka.Store(true) }

// proxyChunk is the most one read forwards in one piece.
const proxyChunk = 64 << 10

// proxyQueue bounds the chunks queued per direction: 4096 × 64 KiB holds a
// bandwidth-delay product of 256 MiB (5 GB/s at 50 ms).
const proxyQueue = 4096

// StartProxy listens on a free loopback port and forwards every connection
// to target. tlsConfig, when non-nil, makes the proxy terminate TLS.
func StartProxy(target string, tlsConfig *tls.Config) (*Proxy, error) {
	return StartProxyOn("127.0.0.1:0", target, tlsConfig)
}

// StartProxyOn is StartProxy listening on listen.
func StartProxyOn(listen, target string, tlsConfig *tls.Config) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay sets the one-way delay added in each direction (half the added
// round-trip time).
func (p *Proxy) SetDelay(oneWay time.Duration) { p.delay.Store(int64(oneWay)) }

// Delay is the current one-way delay.
func (p *Proxy) Delay() time.Duration { return time.Duration(p.delay.Load()) }

// Close stops accepting and closes every proxied connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *Proxy) serve(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	p.accepted.Add(1)
	p.open.Add(1)
	defer p.open.Add(-1)
	var frames *frameCounter
	if p.kafka.Load() {
		frames = &frameCounter{n: &p.requests}
	}
	if tc, ok := client.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			return
		}
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(server, client, frames) }()
	go func() { defer wg.Done(); p.pipe(client, server, nil) }()
	wg.Wait()
}

type stamped struct {
	due  time.Time
	data []byte
}

// frameCounter counts size-prefixed frames in a byte stream, across the
// chunks it is given.
type frameCounter struct {
	n      *atomic.Int64
	size   [4]byte
	sizeN  int   // bytes of the size read so far
	remain int64 // bytes of the current frame's body still to come
}

// add counts the frames that start in b.
func (f *frameCounter) add(b []byte) {
	for len(b) > 0 {
		if f.remain > 0 {
			k := min(int64(len(b)), f.remain)
			f.remain -= k
			b = b[k:]
			continue
		}
		k := copy(f.size[f.sizeN:], b)
		f.sizeN += k
		b = b[k:]
		if f.sizeN == 4 {
			f.n.Add(1)
			f.remain = int64(binary.BigEndian.Uint32(f.size[:]))
			f.sizeN = 0
		}
	}
}

// pipe copies src to dst, delivering each chunk its delay after it was
// read, and counts its frames when frames is not nil; when either side
// ends, both are closed.
func (p *Proxy) pipe(dst, src net.Conn, frames *frameCounter) {
	q := make(chan stamped, proxyQueue)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(ch.data); err != nil {
				_ = src.Close()
				for range q {
				}
				return
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}()
	buf := make([]byte, proxyChunk)
	for {
		n, err := src.Read(buf)
		if n > 0 && frames != nil {
			frames.add(buf[:n])
		}
		if n > 0 {
			q <- stamped{due: time.Now().Add(p.Delay()), data: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
}

// advertisingListener is a listener whose Addr is another address: given
// to kfake (kfake.ListenFn), it makes the brokers advertise a proxy's
// address in their metadata, so clients reach every broker through it.
type advertisingListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisingListener) Addr() net.Addr { return l.addr }

// proxiedListen returns a kfake.ListenFn that puts a delay Proxy in front
// of every broker listener; the proxies are appended to *proxies.
func proxiedListen(proxies *[]*Proxy) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		p, err := StartProxy(ln.Addr().String(), nil)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		*proxies = append(*proxies, p)
		return advertisingListener{Listener: ln, addr: p.ln.Addr()}, nil
	}
}
