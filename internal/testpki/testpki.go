// Package testpki makes certificate authorities and certificates for the
// tests of mutual TLS: a broker certificate for 127.0.0.1 and client
// certificates, valid, expired or from another CA. It is for tests only.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// serial numbers certificates within one process.
var serial atomic.Int64

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	// PEM is the CA certificate in PEM.
	PEM []byte
	key crypto.Signer
}

// Pool returns a pool holding the CA certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Cert is an issued certificate with its key.
type Cert struct {
	// CertPEM is the certificate in PEM; KeyPEM its key in PKCS#8 PEM.
	CertPEM, KeyPEM []byte
	// TLS is the certificate and key for a tls.Config.
	TLS tls.Certificate
	Key crypto.Signer
}

// NewCA returns a new CA named cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: c, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Server issues a broker certificate for 127.0.0.1 and localhost.
func (ca *CA) Server(t testing.TB) *Cert {
	t.Helper()
	return ca.issue(t, "kafka broker", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), x509.ExtKeyUsageServerAuth, nil)
}

// Client issues a client certificate named cn, valid now.
func (ca *CA) Client(t testing.TB, cn string) *Cert {
	t.Helper()
	return ca.issue(t, cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), x509.ExtKeyUsageClientAuth, nil)
}

// ClientValid issues a client certificate valid from notBefore to notAfter
// (an expired one, for example), for key when it is not nil.
func (ca *CA) ClientValid(t testing.TB, cn string, notBefore, notAfter time.Time, key crypto.Signer) *Cert {
	t.Helper()
	return ca.issue(t, cn, notBefore, notAfter, x509.ExtKeyUsageClientAuth, key)
}

func (ca *CA) issue(t testing.TB, cn string, notBefore, notAfter time.Time, usage x509.ExtKeyUsage, key crypto.Signer) *Cert {
	t.Helper()
	if key == nil {
		key = newKey(t)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Key:     key,
	}
	if c.TLS, err = tls.X509KeyPair(c.CertPEM, c.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return c
}

// BrokerTLS is a broker's TLS configuration that requires a client
// certificate signed by clientCA.
func BrokerTLS(server *Cert, clientCA *CA) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{server.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCA.Pool(),
		MinVersion:   tls.VersionTLS12,
	}
}

func newKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
