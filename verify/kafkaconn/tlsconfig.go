package kafkaconn

import "crypto/tls"

// TLSConfig returns the TLS configuration of the flags (-tls, -ca-file,
// -cert-file, -key-file), nil without -tls, for clients other than
// kafka-go's Transport and Dialer (the kafka package's Source).
func (c Config) TLSConfig() (*tls.Config, error) { return c.tlsConfig() }
