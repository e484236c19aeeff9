// Package kafkaconn holds how the project's scripts reach a Kafka cluster
// with kafka-go: broker list, TLS and SASL, set from command-line flags the
// way the mirror sets them from app settings. The SASL password and the
// password of an encrypted client key are read from the environment only
// (KAFKA_SASL_PASSWORD, KAFKA_TLS_KEY_PASSWORD), never from a flag, and are
// never printed; nor is the client key.
package kafkaconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/ehmirror/ehmirror/config"
)

// PasswordEnv is the environment variable holding the SASL password, the
// same name as the mirror's app setting.
const PasswordEnv = "KAFKA_SASL_PASSWORD"

// KeyPasswordEnv is the environment variable holding the password of an
// encrypted client key (-key-file), the same name as the mirror's setting.
const KeyPasswordEnv = "KAFKA_TLS_KEY_PASSWORD"

// DefaultBrokers is the dev environment's Kafka (make dev-env).
const DefaultBrokers = "127.0.0.1:9092"

// Config says how to reach a Kafka cluster.
type Config struct {
	// Brokers are the bootstrap host:port addresses.
	Brokers []string
	// TLS enables TLS; CAFile optionally names a PEM file of CA
	// certificates to trust instead of the system roots.
	TLS    bool
	CAFile string
	// CertFile and KeyFile name PEM files of a client certificate (the
	// leaf first, then intermediates) and its private key, for brokers that
	// require one (mutual TLS). KeyPassword decrypts an encrypted PKCS#8
	// key. The formats are those of the mirror's KAFKA_TLS_CERT_PEM and
	// KAFKA_TLS_KEY_PEM.
	CertFile, KeyFile string
	KeyPassword       string
	// SASL is "" (none), "plain", "scram-sha-256" or "scram-sha-512".
	SASL     string
	User     string
	Password string
}

// String describes the configuration without the password.
func (c Config) String() string {
	s := fmt.Sprintf("brokers=%s tls=%t", strings.Join(c.Brokers, ","), c.TLS)
	if c.CertFile != "" {
		s += fmt.Sprintf(" cert=%s key=%s", c.CertFile, c.KeyFile)
	}
	if c.SASL != "" {
		s += fmt.Sprintf(" sasl=%s user=%s password=<redacted>", c.SASL, c.User)
	}
	return s
}

// GoString is like String, so %#v does not reveal the password either.
func (c Config) GoString() string { return c.String() }

// Flags binds a Config to command-line flags.
type Flags struct {
	brokers, caFile, mechanism, user *string
	certFile, keyFile                *string
	tls                              *bool
}

// BrokersEnv is the environment variable that, when set, is the default of
// -brokers: the mirror's app setting of the same name.
const BrokersEnv = "KAFKA_BROKERS"

// RegisterFlags defines -brokers, -tls, -ca-file, -cert-file, -key-file,
// -sasl and -user on fs.
// The default of -brokers is $KAFKA_BROKERS, else DefaultBrokers.
func RegisterFlags(fs *flag.FlagSet, getenv func(string) string) *Flags {
	brokers := DefaultBrokers
	if v := strings.TrimSpace(getenv(BrokersEnv)); v != "" {
		brokers = v
	}
	return &Flags{
		brokers:   fs.String("brokers", brokers, "comma-separated Kafka bootstrap brokers host:port (default $"+BrokersEnv+" or "+DefaultBrokers+")"),
		tls:       fs.Bool("tls", false, "connect to Kafka with TLS"),
		caFile:    fs.String("ca-file", "", "PEM file of CA certificates to trust for Kafka TLS (default: system roots)"),
		certFile:  fs.String("cert-file", "", "PEM file of the client certificate for brokers that require one (mutual TLS); needs -tls and -key-file"),
		keyFile:   fs.String("key-file", "", "PEM file of the client certificate's private key (PKCS#8, PKCS#1 or SEC 1; encrypted PKCS#8 with the password in $"+KeyPasswordEnv+")"),
		mechanism: fs.String("sasl", "", "Kafka SASL mechanism: plain, scram-sha-256 or scram-sha-512 (password from $"+PasswordEnv+")"),
		user:      fs.String("user", "", "Kafka SASL user name"),
	}
}

// Config returns the parsed flags as a Config, with the password read
// through getenv, and checks it.
func (f *Flags) Config(getenv func(string) string) (Config, error) {
	c := Config{TLS: *f.tls, CAFile: *f.caFile, CertFile: *f.certFile, KeyFile: *f.keyFile, SASL: strings.ToLower(strings.TrimSpace(*f.mechanism)), User: *f.user}
	if c.KeyFile != "" {
		c.KeyPassword = getenv(KeyPasswordEnv)
	}
	for _, b := range strings.Split(*f.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	if c.SASL == "none" {
		c.SASL = ""
	}
	if c.SASL != "" {
		c.Password = getenv(PasswordEnv)
	}
	return c, c.Validate()
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("-brokers: empty; want host:port[,host:port...]")
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return fmt.Errorf("-brokers: %q is not host:port", b)
		}
	}
	if c.CAFile != "" && !c.TLS {
		return errors.New("-ca-file is set but -tls is not")
	}
	if (c.CertFile != "" || c.KeyFile != "") && !c.TLS {
		return errors.New("-cert-file or -key-file is set but -tls is not")
	}
	if _, err := c.mechanism(); err != nil {
		return err
	}
	if _, err := c.tlsConfig(); err != nil {
		return err
	}
	return nil
}

// mechanism builds the kafka-go SASL mechanism, nil for none.
func (c Config) mechanism() (sasl.Mechanism, error) {
	switch c.SASL {
	case "":
		return nil, nil
	case "plain", "scram-sha-256", "scram-sha-512":
	default:
		return nil, fmt.Errorf("-sasl %q: want plain, scram-sha-256 or scram-sha-512", c.SASL)
	}
	if c.User == "" {
		return nil, fmt.Errorf("-sasl %s needs -user", c.SASL)
	}
	if c.Password == "" {
		return nil, fmt.Errorf("-sasl %s needs the password in $%s", c.SASL, PasswordEnv)
	}
	if c.SASL == "plain" {
		return plain.Mechanism{Username: c.User, Password: c.Password}, nil
	}
	algo := scram.SHA256
	if c.SASL == "scram-sha-512" {
		algo = scram.SHA512
	}
	m, err := scram.Mechanism(algo, c.User, c.Password)
	if err != nil {
		// Only invalid UTF-8 fails here; never echo the credentials.
		return nil, fmt.Errorf("-sasl %s: user name or password is not valid UTF-8", c.SASL)
	}
	return m, nil
}

// tlsConfig returns the TLS configuration, nil for plaintext.
func (c Config) tlsConfig() (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca-file %s: no PEM certificate in it", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" || c.KeyFile != "" {
		cert, err := c.clientCert()
		if err != nil {
			return nil, err
		}
		cert.Apply(cfg)
	}
	return cfg, nil
}

// clientCert reads and checks the client certificate and its key.
func (c Config) clientCert() (*config.ClientCert, error) {
	read := func(flag, name string) (string, error) {
		if name == "" {
			return "", nil
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", flag, err)
		}
		return string(b), nil
	}
	certPEM, err := read("-cert-file", c.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read("-key-file", c.KeyFile)
	if err != nil {
		return nil, err
	}
	return config.ParseClientCertificate(certPEM, keyPEM, c.KeyPassword, time.Now(),
		config.CertNames{Cert: "-cert-file", Key: "-key-file", Password: "$" + KeyPasswordEnv})
}

// Transport returns a kafka-go Transport for Writers and Clients, with a
// short metadata cache so topics created moments ago are seen.
func (c Config) Transport() (*kafkago.Transport, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	mech, err := c.mechanism()
	if err != nil {
		return nil, err
	}
	return &kafkago.Transport{
		TLS:         tlsCfg,
		SASL:        mech,
		DialTimeout: 10 * time.Second,
		MetadataTTL: time.Second,
		ClientID:    "ehmirror-scripts",
	}, nil
}

// Dialer returns a kafka-go Dialer for Conns and Readers.
func (c Config) Dialer() (*kafkago.Dialer, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	mech, err := c.mechanism()
	if err != nil {
		return nil, err
	}
	return &kafkago.Dialer{
		Timeout:       10 * time.Second,
		DualStack:     true,
		TLS:           tlsCfg,
		SASLMechanism: mech,
		ClientID:      "ehmirror-scripts",
	}, nil
}
