package emulator

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/websocket"
)

// WebSocketPath is the path of AMQP over WebSockets, as on the service
// (wss://HOST/$servicebus/websocket, subprotocol "amqp").
const WebSocketPath = "/$servicebus/websocket"

// SelfSignedCertificate makes a certificate for hosts (names or IP
// addresses) valid for a year, and returns it with its PEM encoding (for
// clients' trust stores, e.g. SSL_CERT_FILE) and its key's PEM encoding.
func SelfSignedCertificate(hosts ...string) (tls.Certificate, []byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "ehmirror Event Hubs emulator"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, nil, fmt.Errorf("encode key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, keyPEM, err
}

// tlsConfig is the server TLS configuration, or nil without a certificate.
func (srv *Server) tlsConfig() *tls.Config {
	if srv.cfg.TLSCertificate == nil {
		return nil
	}
	return &tls.Config{Certificates: []tls.Certificate{*srv.cfg.TLSCertificate}, MinVersion: tls.VersionTLS12}
}

// listenTransports opens the amqps and WebSocket listeners that cfg asks for.
func (srv *Server) listenTransports() error {
	tc := srv.tlsConfig()
	if srv.cfg.TLSListen != "" {
		if tc == nil {
			return errors.New("TLSListen needs a TLSCertificate")
		}
		ln, err := net.Listen("tcp", srv.cfg.TLSListen)
		if err != nil {
			return fmt.Errorf("listen (TLS): %w", err)
		}
		srv.tlsLn = ln
	}
	if srv.cfg.WebSocketListen != "" {
		ln, err := net.Listen("tcp", srv.cfg.WebSocketListen)
		if err != nil {
			if srv.tlsLn != nil {
				srv.tlsLn.Close()
			}
			return fmt.Errorf("listen (WebSocket): %w", err)
		}
		if tc != nil {
			tc := tc.Clone()
			tc.NextProtos = []string{"http/1.1"}
			ln = tls.NewListener(ln, tc)
		}
		srv.wsLn = ln
	}
	return nil
}

// startTransports serves the extra listeners.
func (srv *Server) startTransports() {
	if srv.tlsLn != nil {
		tc := srv.tlsConfig()
		srv.wg.Add(1)
		go srv.accept(srv.tlsLn, func(nc net.Conn) net.Conn { return tls.Server(nc, tc) })
	}
	if srv.wsLn != nil {
		ws := websocket.Server{
			Handshake: func(cfg *websocket.Config, r *http.Request) error {
				// "amqp" (the AMQP WebSocket binding; Go, JavaScript) or
				// "AMQPWSB10" (its draft name; .NET, Python), as the
				// service accepts both.
				i := slices.IndexFunc(cfg.Protocol, func(p string) bool {
					return strings.EqualFold(p, "amqp") || strings.EqualFold(p, "AMQPWSB10")
				})
				if i < 0 {
					return fmt.Errorf("subprotocol %v, want amqp or AMQPWSB10", cfg.Protocol)
				}
				cfg.Protocol = []string{cfg.Protocol[i]}
				return nil
			},
			Handler: func(ws *websocket.Conn) {
				ws.PayloadType = websocket.BinaryFrame
				srv.mu.Lock()
				if srv.closed {
					srv.mu.Unlock()
					return
				}
				srv.wg.Add(1) // before Close waits: closed is still false
				srv.mu.Unlock()
				defer srv.wg.Done()
				remote, _ := net.ResolveTCPAddr("tcp", ws.Request().RemoteAddr)
				srv.serveConn(&wsConn{Conn: ws, remote: remote})
			},
		}
		mux := http.NewServeMux()
		mux.Handle(WebSocketPath, ws)
		srv.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second, ErrorLog: nil}
		srv.wg.Add(1)
		go func() {
			defer srv.wg.Done()
			srv.httpSrv.Serve(srv.wsLn)
		}()
	}
}

// wsConn is a WebSocket connection with the client's TCP address (the
// library reports the Origin instead).
type wsConn struct {
	*websocket.Conn
	remote *net.TCPAddr
}

// RemoteAddr returns the client's TCP address.
func (c *wsConn) RemoteAddr() net.Addr {
	if c.remote == nil {
		return c.Conn.RemoteAddr()
	}
	return c.remote
}

// TLSAddr returns the address of the amqps listener, or "" without one.
func (srv *Server) TLSAddr() string {
	if srv.tlsLn == nil {
		return ""
	}
	return srv.tlsLn.Addr().String()
}

// WebSocketAddr returns the address of the WebSocket listener, or "" without
// one; clients connect to wss://ADDR/$servicebus/websocket (ws:// without a
// certificate).
func (srv *Server) WebSocketAddr() string {
	if srv.wsLn == nil {
		return ""
	}
	return srv.wsLn.Addr().String()
}
