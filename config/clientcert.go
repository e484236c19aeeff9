package config

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

// CertNames name where a client certificate, its key and the key's password
// come from (settings, flags or files), for the one-line errors of
// [ParseClientCertificate].
type CertNames struct {
	Cert, Key, Password string
}

// SettingNames are the app settings' names.
var SettingNames = CertNames{Cert: KafkaTLSCertPEM, Key: KafkaTLSKeyPEM, Password: KafkaTLSKeyPassword}

// CertError is a client certificate problem, naming the setting (or flag)
// at fault. Its message never holds key material nor the password.
type CertError struct {
	Setting string
	Message string
}

// Error is "SETTING: message".
func (e *CertError) Error() string { return e.Setting + ": " + e.Message }

// ClientCert is a parsed client certificate and its private key.
type ClientCert struct {
	// Chain is the leaf certificate followed by any intermediates.
	Chain []*x509.Certificate
	tls   tls.Certificate
	names CertNames
}

// Leaf is the client certificate itself.
func (c *ClientCert) Leaf() *x509.Certificate { return c.Chain[0] }

// String describes the certificate (subject, issuer, validity); never the key.
func (c *ClientCert) String() string {
	l := c.Leaf()
	return fmt.Sprintf("subject %q, issuer %q, valid until %s", l.Subject.String(), l.Issuer.String(), l.NotAfter.UTC().Format(time.RFC3339))
}

// ExpiryProblem returns, in one line, that the certificate has expired or
// expires within warn of now, naming the setting; "" otherwise. Open
// connections keep working after expiry (the broker checked the
// certificate at the handshake), so only this tells before the next
// handshake fails.
func (c *ClientCert) ExpiryProblem(now time.Time, warn time.Duration) string {
	l := c.Leaf()
	switch {
	case now.After(l.NotAfter):
		return fmt.Sprintf("%s: the client certificate (subject %q) expired at %s; open connections still work, but the next handshake fails: renew it", c.names.Cert, l.Subject.String(), l.NotAfter.UTC().Format(time.RFC3339))
	case warn > 0 && l.NotAfter.Sub(now) <= warn:
		return fmt.Sprintf("%s: the client certificate (subject %q) expires at %s, in %s; renew it", c.names.Cert, l.Subject.String(), l.NotAfter.UTC().Format(time.RFC3339), mirror.Ago(l.NotAfter.Sub(now)))
	}
	return ""
}

// GoString is like String, so %#v does not print the key.
func (c *ClientCert) GoString() string { return c.String() }

// checkValidity reports a certificate that is expired or not yet valid at now.
func (c *ClientCert) checkValidity(now time.Time) error {
	l := c.Leaf()
	switch {
	case now.After(l.NotAfter):
		return &CertError{c.names.Cert, fmt.Sprintf("the certificate (subject %q) expired at %s; renew it", l.Subject.String(), l.NotAfter.UTC().Format(time.RFC3339))}
	case now.Before(l.NotBefore):
		return &CertError{c.names.Cert, fmt.Sprintf("the certificate (subject %q) is not valid before %s; check the clock or the certificate", l.Subject.String(), l.NotBefore.UTC().Format(time.RFC3339))}
	}
	return nil
}

// Apply makes cfg present the certificate to brokers that ask for one. Each
// handshake checks the validity period again, so a certificate that expires
// while the process runs fails with an error naming the setting instead of
// an obscure alert from the broker.
func (c *ClientCert) Apply(cfg *tls.Config) {
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if err := c.checkValidity(time.Now()); err != nil {
			return nil, err
		}
		cert := c.tls
		return &cert, nil
	}
}

// ParseClientCertificate parses a PEM client certificate (the leaf first,
// then any intermediates) and its PEM private key: PKCS#8 ("PRIVATE KEY"),
// PKCS#1 ("RSA PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY"), or PKCS#8 encrypted
// with password ("ENCRYPTED PRIVATE KEY", PBES2 with PBKDF2 and AES or
// 3DES). It checks that the key matches the certificate and that the
// certificate is valid at now. Errors are *CertError values naming the part
// at fault through names; they never contain key material or the password.
func ParseClientCertificate(certPEM, keyPEM, password string, now time.Time, names CertNames) (*ClientCert, error) {
	switch {
	case strings.TrimSpace(certPEM) == "" && strings.TrimSpace(keyPEM) == "":
		return nil, &CertError{names.Cert, "missing"}
	case strings.TrimSpace(keyPEM) == "":
		return nil, &CertError{names.Key, fmt.Sprintf("missing; the client certificate in %s needs its private key", names.Cert)}
	case strings.TrimSpace(certPEM) == "":
		return nil, &CertError{names.Cert, fmt.Sprintf("missing; the private key in %s needs its client certificate", names.Key)}
	}
	chain, ders, err := parseCertChain(certPEM, names)
	if err != nil {
		return nil, err
	}
	key, err := parsePrivateKey(keyPEM, password, names)
	if err != nil {
		return nil, err
	}
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return nil, &CertError{names.Key, "unsupported private key type; want RSA, ECDSA or Ed25519"}
	}
	leafKey, ok := chain[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !leafKey.Equal(pub.Public()) {
		return nil, &CertError{names.Key, fmt.Sprintf("does not match the certificate in %s (subject %q); set the key that belongs to it", names.Cert, chain[0].Subject.String())}
	}
	c := &ClientCert{Chain: chain, names: names, tls: tls.Certificate{Certificate: ders, PrivateKey: key, Leaf: chain[0]}}
	if err := c.checkValidity(now); err != nil {
		return nil, err
	}
	return c, nil
}

// parseCertChain returns the certificates of certPEM and their DER.
func parseCertChain(certPEM string, names CertNames) ([]*x509.Certificate, [][]byte, error) {
	var chain []*x509.Certificate
	var ders [][]byte
	rest := []byte(certPEM)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, nil, &CertError{names.Cert, fmt.Sprintf("certificate %d is not a valid X.509 certificate: %v", len(chain)+1, err)}
			}
			chain = append(chain, c)
			ders = append(ders, b.Bytes)
		case strings.Contains(b.Type, "PRIVATE KEY"):
			// Name the problem, never the content.
			return nil, nil, &CertError{names.Cert, fmt.Sprintf("holds a private key; put only certificates here and the key in %s", names.Key)}
		}
	}
	if len(chain) == 0 {
		return nil, nil, &CertError{names.Cert, "holds no PEM certificate; want -----BEGIN CERTIFICATE----- blocks, the client certificate first"}
	}
	return chain, ders, nil
}

// parsePrivateKey returns the private key of keyPEM, decrypted with password
// when it is encrypted. Its errors never quote keyPEM.
func parsePrivateKey(keyPEM, password string, names CertNames) (crypto.PrivateKey, error) {
	rest := []byte(keyPEM)
	sawCert := false
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			sawCert = true
			continue
		case "ENCRYPTED PRIVATE KEY":
			if password == "" {
				return nil, &CertError{names.Password, fmt.Sprintf("missing; the key in %s is encrypted", names.Key)}
			}
			der, err := decryptPKCS8(b.Bytes, password)
			if errors.Is(err, errWrongPassword) {
				return nil, &CertError{names.Password, fmt.Sprintf("does not decrypt the key in %s; check the password", names.Key)}
			}
			if err != nil {
				return nil, &CertError{names.Key, "encrypted key: " + err.Error()}
			}
			k, err := x509.ParsePKCS8PrivateKey(der)
			if err != nil {
				return nil, &CertError{names.Password, fmt.Sprintf("does not decrypt the key in %s; check the password", names.Key)}
			}
			return k, nil
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			if _, ok := b.Headers["DEK-Info"]; ok {
				return nil, &CertError{names.Key, "encrypted the legacy OpenSSL way (Proc-Type: 4,ENCRYPTED), which is not supported; convert it with `openssl pkcs8 -topk8 -v2 aes-256-cbc`"}
			}
			if password != "" {
				return nil, &CertError{names.Password, fmt.Sprintf("set, but the key in %s is not encrypted; unset it", names.Key)}
			}
			var k crypto.PrivateKey
			var err error
			switch b.Type {
			case "PRIVATE KEY":
				k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
			case "RSA PRIVATE KEY":
				k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
			default:
				k, err = x509.ParseECPrivateKey(b.Bytes)
			}
			if err != nil {
				return nil, &CertError{names.Key, fmt.Sprintf("the %s block is not a valid private key", b.Type)}
			}
			return k, nil
		default:
			continue // EC PARAMETERS and the like
		}
	}
	if sawCert {
		return nil, &CertError{names.Key, fmt.Sprintf("holds a certificate, not a private key; the certificate goes in %s", names.Cert)}
	}
	return nil, &CertError{names.Key, "holds no PEM private key; want a -----BEGIN PRIVATE KEY----- (or RSA/EC/ENCRYPTED PRIVATE KEY) block"}
}

// clientCert reads and checks the client certificate settings; nil when
// none is set or they have a problem.
func (l *loader) clientCert(tlsOn bool) *ClientCert {
	certPEM, keyPEM, password := pemValue(l.secret(KafkaTLSCertPEM)), pemValue(l.secret(KafkaTLSKeyPEM)), l.secret(KafkaTLSKeyPassword)
	set := ""
	for _, name := range []string{KafkaTLSKeyPassword, KafkaTLSKeyPEM, KafkaTLSCertPEM} {
		if l.has(name) {
			set = name
		}
	}
	switch {
	case set == "":
		return nil
	case !tlsOn:
		l.problem(set, "set, but %s is not true; a client certificate needs TLS", KafkaTLS)
		return nil
	case certPEM == "" && l.has(KafkaTLSCertPEM), keyPEM == "" && l.has(KafkaTLSKeyPEM), password == "" && l.has(KafkaTLSKeyPassword):
		return nil // an unresolved Key Vault reference, reported already
	case certPEM == "" && keyPEM == "":
		l.problem(KafkaTLSKeyPassword, "set, but %s is not; the password decrypts that key", KafkaTLSKeyPEM)
		return nil
	}
	c, err := ParseClientCertificate(certPEM, keyPEM, password, time.Now(), SettingNames)
	if err != nil {
		var ce *CertError
		if errors.As(err, &ce) {
			l.problem(ce.Setting, "%s", ce.Message)
		} else {
			l.problem(KafkaTLSKeyPEM, "cannot be used") // never reached: every error is a CertError
		}
		return nil
	}
	return c
}

// pemValue accepts PEM whose line breaks were written as the two characters
// \n (a common way to put PEM in a one-line app setting).
func pemValue(v string) string {
	if !strings.Contains(v, "\n") && strings.Contains(v, `\n`) {
		return strings.ReplaceAll(v, `\n`, "\n")
	}
	return v
}
