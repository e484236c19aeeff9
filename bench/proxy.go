package bench

import (
	"crypto/tls"
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

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

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
	go func() { defer wg.Done(); p.pipe(server, client) }()
	go func() { defer wg.Done(); p.pipe(client, server) }()
	wg.Wait()
}

type stamped struct {
	due  time.Time
	data []byte
}

// pipe copies src to dst, delivering each chunk its delay after it was
// read; when either side ends, both are closed.
func (p *Proxy) pipe(dst, src net.Conn) {
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
